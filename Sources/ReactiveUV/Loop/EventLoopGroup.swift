import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A fixed set of event loops, each on its own thread, handed out round robin.
///
/// One loop per core serves a server: `TCPServer.serve(port:on: group)` listens on every loop.
///
/// Thread rule: safe from any thread.
public final class EventLoopGroup: Sendable {
    /// The loops, in creation order.
    public let loops: [EventLoop]
    private let counter = Atomic<Int>(0)

    /// Starts `loopCount` loops.
    ///
    /// - Parameters:
    ///   - loopCount: How many loops (default one per online core); values below 1 are raised to 1.
    ///   - name: A prefix for the loops' names ("group-0", "group-1", ...).
    ///   - metrics: Whether each loop reports metrics, its name as the `loop` dimension; nil uses `LoopMetrics.default`.
    ///
    /// Thread rule: safe from any thread.
    public init(loopCount: Int = EventLoopGroup.onlineCoreCount, name: String = "group", metrics: LoopMetrics? = nil) {
        let count = max(1, loopCount)
        loops = (0..<count).map { EventLoop(name: "\(name)-\($0)", metrics: metrics) }
    }

    /// A group of loops made elsewhere (a simulation's), handed out round robin like any group's.
    ///
    /// Thread rule: safe from any thread.
    package init(loops: [EventLoop]) {
        precondition(!loops.isEmpty, "a group has at least one loop")
        self.loops = loops
    }

    /// The number of online cores (at least 1): a server's loop count.
    ///
    /// Thread rule: safe from any thread.
    public static var onlineCoreCount: Int { max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN))) }

    /// The next loop, round robin.
    ///
    /// Thread rule: safe from any thread.
    public func next() -> EventLoop {
        let index = counter.wrappingAdd(1, ordering: .relaxed).oldValue
        return loops[Int(UInt(bitPattern: index) % UInt(loops.count))]
    }

    /// Shuts every loop down (see `EventLoop.shutdown()`), waiting for each thread to end.
    ///
    /// Thread rule: safe from any thread except one of the group's loop threads
    /// (there, each loop's shutdown completes after the current callback).
    public func shutdown() {
        for loop in loops { loop.shutdown() }
    }

    /// Shuts every loop down, throwing the first problem after trying them all.
    ///
    /// - Returns: One report per loop, in order.
    /// - Throws: The first `EventLoopError` any loop's `tryShutdown()` threw.
    ///
    /// Thread rule: safe from any thread except one of the group's loop threads.
    @discardableResult
    public func tryShutdown() throws(EventLoopError) -> [ShutdownReport] {
        var reports: [ShutdownReport] = []
        var firstError: EventLoopError?
        for loop in loops {
            do {
                reports.append(try loop.tryShutdown())
            } catch {
                if firstError == nil { firstError = error }
            }
        }
        if let firstError { throw firstError }
        return reports
    }
}
