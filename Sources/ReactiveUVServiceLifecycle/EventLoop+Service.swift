import ReactiveUV
import ServiceLifecycle

/// An event loop as a swift-service-lifecycle `Service`: a `ServiceGroup` keeps it
/// running and shuts it down at graceful shutdown (SIGTERM, say) or cancellation.
///
/// Importing this module gives `EventLoop` an `async throws` `run()` beside the synchronous one
/// of owner-thread loops; async code picks the async one, so drive an owner-thread loop from
/// synchronous code.
extension EventLoop: Service {
    /// Waits, without blocking a thread, until graceful shutdown is triggered, the task is
    /// cancelled or the loop is shut down by someone else; then shuts the loop down with
    /// `shutdownGracefully()` and returns.
    ///
    /// - A loop already shut down returns at once (a loop that could not start
    ///   throws `EventLoopError.couldNotStart` instead).
    /// - `EventLoop.shared` is never shut down: `run()` returns at graceful
    ///   shutdown or cancellation and leaves it running.
    /// - An owner-thread loop (`EventLoop.onCurrentThread()`) has no thread of its
    ///   own for the service to keep: `run()` throws `EventLoopServiceError.ownerThreadLoop` at once.
    ///
    /// A `ServiceGroup` shuts its services down in reverse order, so list the loop before the
    /// services that use it.
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
    /// Waits, without blocking a thread, until graceful shutdown is triggered, the task is
    /// cancelled or one of the loops is shut down by someone else; then shuts every loop
    /// down with `shutdownGracefully()` and returns.
    ///
    /// A group whose loops have all shut down returns at once. List the group before the
    /// services that use it in a `ServiceGroup`, so it stops last.
    ///
    /// - Throws: The first `EventLoopError` of the shutdown, after every loop was shut down
    ///   (`.couldNotStart` for a loop that never started, `.calledOnLoopThread` from a
    ///   task running on one of the loops, `.loopCloseFailed`).
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
    /// The loop runs on its owner's thread (`EventLoop.onCurrentThread()`), so there is no
    /// thread for a service to keep running and shut down.
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
