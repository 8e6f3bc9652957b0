/// A misuse of an `EventLoop`'s lifecycle, reported instead of crashing or hanging.
///
/// Thread rule: a value type; safe from any thread.
public enum EventLoopError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Work was submitted to (or a subscription made on) a loop that has shut down, or the
    /// shutdown ended what ran on it.
    case shutDown(loop: String)
    /// A call that waits for the loop was made on the loop's own thread, where it would deadlock.
    case calledOnLoopThread(operation: String, loop: String)
    /// `EventLoop.shared` lives as long as the process and is never shut down.
    case sharedLoopCannotShutDown
    /// An owner-thread loop was asked to shut down from another thread while not running.
    case notRunningOnOwnerThread(operation: String, loop: String)
    /// `uv_loop_close` failed after every handle was closed.
    case loopCloseFailed(loop: String, error: UVError)
    /// The loop could not be set up (no file descriptor or thread left): it refuses every submission.
    case couldNotStart(loop: String, error: UVError)

    /// A sentence for a human.
    ///
    /// Thread rule: safe from any thread.
    public var description: String {
        switch self {
        case .shutDown(let loop):
            // One sentence for both: what refused work hears and what a subscription the shutdown ended hears.
            return "EventLoop '\(loop)' has shut down: it runs nothing more, and what ran on it has ended"
        case .calledOnLoopThread(let operation, let loop):
            return "\(operation) was called on the thread of EventLoop '\(loop)': a loop thread never waits for a loop (its own or another, which could be waiting for it); call it from a thread that is no loop's, or use its async form"
        case .sharedLoopCannotShutDown:
            return "EventLoop.shared lives as long as the process and cannot be shut down"
        case .notRunningOnOwnerThread(let operation, let loop):
            return "\(operation) on EventLoop '\(loop)' must be called from the thread that owns it, or while its run() is running"
        case .loopCloseFailed(let loop, let error):
            return "uv_loop_close failed on EventLoop '\(loop)' after closing every handle: \(error)"
        case .couldNotStart(let loop, let error):
            return "EventLoop '\(loop)' could not start (\(error)): nothing submitted to it runs"
        }
    }
}

/// What a loop's shutdown found and did.
///
/// Thread rule: a value type; safe from any thread.
public struct ShutdownReport: Sendable, Hashable {
    /// The handles that were still open when shutdown began, and that shutdown closed.
    public let closedHandles: [OpenHandle]
    /// What `uv_loop_close` returned: 0 when everything was released.
    public let loopCloseResult: Int32
}
