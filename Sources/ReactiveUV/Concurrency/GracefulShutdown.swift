#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension EventLoop {
    /// Shuts the loop down (see `tryShutdown()`), waiting on a short-lived thread instead of the caller's.
    ///
    /// - Returns: What the shutdown found open and what `uv_loop_close` returned.
    /// - Throws: `EventLoopError.calledOnLoopThread` from a task running on this loop, and the
    ///   errors of `tryShutdown()`.
    ///
    /// Thread rule: safe from any task except one running on this loop.
    @discardableResult
    public func shutdownGracefully() async throws(EventLoopError) -> ShutdownReport {
        if inEventLoop { throw EventLoopError.calledOnLoopThread(operation: "shutdownGracefully()", loop: name) }
        let result: Result<ShutdownReport, EventLoopError> = await withCheckedContinuation { continuation in
            runOnNewThread {
                continuation.resume(returning: Result { () throws(EventLoopError) in try self.tryShutdown() })
            }
        }
        return try result.get()
    }
}

extension EventLoopGroup {
    /// Shuts every loop down without blocking the caller's thread.
    ///
    /// - Returns: One report per loop, in order.
    /// - Throws: The first `EventLoopError` (see `EventLoop.shutdownGracefully()`).
    ///
    /// Thread rule: safe from any task except one running on a loop of this group.
    @discardableResult
    public func shutdownGracefully() async throws(EventLoopError) -> [ShutdownReport] {
        var reports: [ShutdownReport] = []
        var firstError: EventLoopError?
        for loop in loops {
            do {
                reports.append(try await loop.shutdownGracefully())
            } catch {
                if firstError == nil { firstError = error }
            }
        }
        if let firstError { throw firstError }
        return reports
    }
}

func runOnNewThread(_ body: @escaping @Sendable () -> Void) {
    final class Box: @unchecked Sendable {
        // Sendable: handed to exactly one thread.
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }
    let context = Unmanaged.passRetained(Box(body)).toOpaque()
    var thread = pthread_t()
    let rc = pthread_create(&thread, nil, { argument in
        Unmanaged<Box>.fromOpaque(argument!).takeRetainedValue().body()
        return nil
    }, context)
    if rc != 0 {
        Unmanaged<Box>.fromOpaque(context).takeRetainedValue().body()
    } else {
        pthread_detach(thread)
    }
}
