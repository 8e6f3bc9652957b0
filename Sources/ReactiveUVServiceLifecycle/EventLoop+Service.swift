import ReactiveUV
import ServiceLifecycle

/// An event loop as a swift-service-lifecycle `Service`: a `ServiceGroup` keeps it running and
/// shuts it down at graceful shutdown or cancellation. Async code picks this `run()` over an
/// owner-thread loop's synchronous one, so drive such a loop from synchronous code.
extension EventLoop: Service {
    /// Waits, without blocking a thread, until graceful shutdown, cancellation or another caller's
    /// shutdown of the loop; then shuts the loop down with `shutdownGracefully()`.
    ///
    /// - A loop already shut down returns at once (one that could not start throws
    ///   `EventLoopError.couldNotStart`).
    /// - `EventLoop.shared` is never shut down: `run()` returns and leaves it running.
    /// - An owner-thread loop throws `EventLoopServiceError.ownerThreadLoop` at once.
    ///
    /// A `ServiceGroup` shuts services down in reverse order: list the loop before those that use it.
    ///
    /// - Throws: `EventLoopServiceError`, or the `EventLoopError` of the shutdown
    ///   (`.calledOnLoopThread` from a task running on this loop, `.loopCloseFailed`).
    ///
    /// Thread rule: safe from any task except one running on this loop.
    public func run() async throws {
        if let startFailure { throw EventLoopError.couldNotStart(loop: name, error: startFailure) }
        guard ownsThread else { throw EventLoopServiceError.ownerThreadLoop(loop: name) }
        if isShutDown { return }
        await waitForShutdownTrigger(watching: isShared ? [] : [self])
        if isShared { return }
        try await shutdownGracefully()
    }
}

extension EventLoopGroup: Service {
    /// Waits, without blocking a thread, until graceful shutdown, cancellation or another caller's
    /// shutdown of one of the loops; then shuts every loop down with `shutdownGracefully()`.
    ///
    /// A group whose loops have all shut down returns at once. List it before the services that use it.
    ///
    /// - Throws: The first `EventLoopError` of the shutdown, after every loop was shut down
    ///   (`.couldNotStart`, `.calledOnLoopThread` from a task on one of the loops, `.loopCloseFailed`).
    ///
    /// Thread rule: safe from any task except one running on a loop of this group.
    public func run() async throws {
        if !loops.allSatisfy(\.isShutDown) {
            await waitForShutdownTrigger(watching: loops)
        }
        try await shutdownGracefully()
        if let failed = loops.first(where: { $0.startFailure != nil }), let failure = failed.startFailure {
            throw EventLoopError.couldNotStart(loop: failed.name, error: failure)
        }
    }
}

/// Why an event loop cannot be run as a `Service`.
///
/// Thread rule: a value type; safe from any thread.
public enum EventLoopServiceError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The loop runs on its owner's thread, so there is no thread for a service to keep running.
    case ownerThreadLoop(loop: String)

    /// A sentence for a human.
    ///
    /// Thread rule: safe from any thread.
    public var description: String {
        switch self {
        case .ownerThreadLoop(let loop):
            return "EventLoop '\(loop)' runs on its owner's thread (EventLoop.onCurrentThread()): it has no thread of its own for a ServiceGroup to keep running and shut down; make it with EventLoop(name:) or use an EventLoopGroup as the service, or drive it with its synchronous run()"
        }
    }
}

/// Suspends until graceful shutdown is triggered, the task is cancelled, or one of `loops` begins shutting down.
func waitForShutdownTrigger(watching loops: [EventLoop]) async {
    let request = ShutdownTrigger()
    var observers: [any Disposable] = []
    for loop in loops {
        guard let observer = loop.onShutdown({ request.fire() }) else {
            // Already closing (or closed): nothing to wait for.
            request.fire()
            break
        }
        observers.append(observer)
    }
    await withTaskCancellationOrGracefulShutdownHandler {
        await request.wait()
    } onCancelOrGracefulShutdown: {
        request.fire()
    }
    for observer in observers { observer.dispose() }
}
