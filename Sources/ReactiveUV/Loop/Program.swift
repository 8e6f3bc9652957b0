#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Runs a program whose work lives on loops of their own (a server on an `EventLoopGroup`) from
/// `main.swift`: waits for the work to end, shuts the loops down and gives the exit status.
///
/// ```swift
/// let group = EventLoopGroup()
/// let server = TCPServer.serve(port: 8080, on: group, onAccepted: { connection in
///     _ = connection.bytes.subscribe(next: { connection.send($0) }, completed: { connection.close() })
/// }, drain: Program.drainOnTermination(timeout: .seconds(10)))
/// exit(Program.run(server, shuttingDown: group))
/// ```
///
/// The main thread is no loop's here. With a top-level `await`, `await Program.wait(for:shuttingDown:)` suspends
/// instead (a distinct name: top-level code would pick a blocking overload of the same name).
///
/// Thread rule: see each member.
public enum Program {
    /// Drain requests from the process's termination signals: `.graceful(timeout:)` at the first
    /// of `signals`, `.force` at the second, then it completes.
    ///
    /// Pass it as a server's `drain`. The signals are caught only while the server is subscribed.
    ///
    /// - Parameters:
    ///   - timeout: How long a graceful drain waits for connections to close before resetting them.
    ///   - closingIdle: Whether the drain closes idle connections at once (see `StreamConnection.markIdle()`).
    ///   - signals: The signals that ask for the drain; nil for SIGTERM and SIGINT. An empty list fails with `EINVAL`.
    ///   - loop: The loop that catches the signals; nil for the subscription's home.
    ///
    /// Thread rule: safe from any thread.
    public static func drainOnTermination(timeout: Duration = .seconds(10), closingIdle: Bool = false, signals: [Int32]? = nil,
                                          on loop: EventLoop? = nil) -> Signal<TCPServer.DrainRequest> {
        let signals = signals ?? [SIGTERM, SIGINT]
        guard !signals.isEmpty else {
            return .error(UVError(code: UVError.invalidArgumentCode, message: "no signal to drain on", context: "Program.drainOnTermination"))
        }
        return Signal<Int32>.unixSignals(signals, on: loop)
            .scan(0) { count, _ in count + 1 }
            .take(2)
            .map { $0 == 1 ? .graceful(timeout: timeout, closingIdle: closingIdle) : .force }
    }

    /// Blocks the calling thread until `work` ends, shuts `groups` down, and returns the exit status:
    /// 0 when `work` completed, 1 when it failed (the error goes to standard error).
    ///
    /// On a loop's thread it waits for nothing, says why on standard error and returns 70 (`EX_SOFTWARE`).
    ///
    /// Thread rule: any thread except a loop thread (the main thread of `main.swift`).
    public static func run<Value>(_ work: Signal<Value>, shuttingDown groups: EventLoopGroup...) -> Int32 {
        var status: Int32
        do {
            try work.waitUntilCompleted()
            status = 0
        } catch EventLoopError.calledOnLoopThread(_, let loop) {
            reportMisuse("Program.run was called on EventLoop '\(loop)''s thread, which it would stop: call it from main.swift's main thread")
            return 70
        } catch {
            status = failed(error)
        }
        for group in groups {
            do { try group.tryShutdown() } catch { status = status == 0 ? failed(error) : status }
        }
        return status
    }

    /// `run(_:shuttingDown:)` for async code (a `main.swift` with a top-level `await`): suspends until
    /// `work` ends instead of blocking, then shuts `groups` down.
    ///
    /// - Returns: The exit status: 0 completed, 1 failed (written to standard error), 70 on a loop's thread.
    ///
    /// Thread rule: safe from any task except one running on a loop (its loop would wait for itself).
    public static func wait<Value>(for work: Signal<Value>, shuttingDown groups: EventLoopGroup...) async -> Int32 {
        if let loop = EventLoop.current {
            reportMisuse("Program.wait(for:) was awaited on EventLoop '\(loop.name)''s thread, which would wait for itself: await it from main.swift")
            return 70
        }
        var status: Int32 = 0
        if let error = await work.waitUntilCompleted() { status = failed(error) }
        for group in groups {
            do { try await group.shutdownGracefully() } catch { status = status == 0 ? failed(error) : status }
        }
        return status
    }

    /// Writes `error` to standard error after the program's name; the status of a failure.
    private static func failed(_ error: any Error) -> Int32 {
        let name = CommandLine.arguments.first.map { String($0.split(separator: "/").last ?? "program") } ?? "program"
        var line = "\(name): \(error)\n"
        line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
        return 1
    }
}
