/// What the algebra needs of a scheduler that runs on an event loop's thread: the loop's life,
/// named in `Scheduler.loopLifecycle` (the algebra knows no loop).
/// Thread rule: every requirement is safe from any thread unless it says otherwise.
package protocol LoopLifecycle: AnyObject, Sendable {
    var name: String { get }
    /// Whether this is the process's shared loop, which never shuts down.
    var isShared: Bool { get }
    /// Whether the loop still opens handles (it has not begun closing them).
    var acceptsNewHandles: Bool { get }
    /// The error a submission the loop refused gets (it has shut down, or never started).
    var refusalError: any Error { get }
    /// The error an operation on the loop ends with when the loop shuts down under it.
    var shutDownError: any Error { get }
    /// Queues `work` for the loop's thread; false (and `work` dropped) once the loop has closed.
    func enqueueDroppingIfShutDown(_ work: @escaping @Sendable () -> Void) -> Bool
    /// Calls `observer` once, on the loop's thread, when the loop begins shutting down; nil when it
    /// already has (the shared loop takes observers that never run).
    func addShutdownObserver(_ observer: @escaping @Sendable () -> Void) -> (any Disposable)?
    /// Resumes once the loop has run a job queued now (so a callback running there has returned),
    /// or at once when the loop runs nothing more.
    func afterRunningCallback() async
}

/// What the algebra needs of the runtime it runs in: the scheduler of subscriptions made off every
/// loop, and the errors it gives. ReactiveUV provides it (`LibUVRuntime`), looked up by type name
/// on first use, since the algebra does not link against the loop.
package protocol AlgebraRuntime: Sendable {
    /// The scheduler of subscriptions made on a thread with no current scheduler (`EventLoop.shared`).
    static var defaultScheduler: Scheduler { get }
    /// An error for an argument an operator refuses (`EINVAL`), with its message and the operation.
    static func invalidArgument(message: String, context: String) -> any Error
    /// The error for a scheduler that is not a loop and refused work (it has shut down).
    static func shutDown(_ scheduler: String) -> any Error
}

package enum Runtime {
    /// The provider, looked up once (its metadata is registered when its image loads).
    package static let provider: any AlgebraRuntime.Type = {
        guard let provider = _typeByName("ReactiveUV.LibUVRuntime") as? any AlgebraRuntime.Type else {
            fatalError("ReactiveUVCore needs ReactiveUV's runtime: link the ReactiveUV library")
        }
        return provider
    }()

    /// The scheduler of subscriptions made off every loop and test scheduler.
    package static var defaultScheduler: Scheduler { provider.defaultScheduler }
}
