import Synchronization

/// Where an `EventLoop` is in its life: one state, read by every thread.
///
/// ```
///  idle ──run()──▶ running ──run() returns──▶ idle        (owner-thread loops only)
///    │               │
///    └──shutdown()───┴──▶ closeRequested ──▶ closingHandles ──▶ draining ──▶ closed
/// ```
///
/// - `idle`: an owner-thread loop outside `run()`. Work from other threads is
///   queued and runs at the next `run()`; waiting calls are refused, since
///   nothing would answer them.
/// - `running`: the loop thread is in `uv_run`.
/// - `closeRequested`: `shutdown()` was asked; the loop starts closing at its
///   next turn. Work is still accepted.
/// - `closingHandles`: the loop thread runs the queued work, tells shutdown
///   observers, cancels timers and requests, and closes every handle.
///   Work is still accepted; handles opened now are closed too.
/// - `draining`: every handle is closing; their close callbacks and work that
///   arrives from other threads still run on the loop thread. New handles,
///   timers and requests are refused.
/// - `closed`: the last look at the queue found it empty. From here every
///   submission is refused, with an error the caller sees.
///
/// The state is written only by the transitions in EventLoop+Lifecycle.swift,
/// always under the loop's inbox lock, so a transition and the queue it decides
/// about change together; it is read anywhere without the lock.
enum LoopState: UInt8, AtomicRepresentable, CustomStringConvertible {
    case idle
    case running
    case closeRequested
    case closingHandles
    case draining
    case closed

    /// Whether work submitted now will run (on the loop thread).
    var acceptsWork: Bool { self != .closed }

    /// Whether a handle or timer may be opened now.
    var acceptsNewHandles: Bool { rawValue <= LoopState.closingHandles.rawValue }

    /// Whether a libuv request may start now (shutdown cancels the pending ones when it begins closing).
    var acceptsNewRequests: Bool { rawValue <= LoopState.closeRequested.rawValue }

    /// Whether the loop thread has begun closing (its handles, timers and requests).
    var hasBegunClosing: Bool { rawValue >= LoopState.closingHandles.rawValue }

    /// The state in words, for messages.
    var description: String {
        switch self {
        case .idle: return "idle (an owner-thread loop outside run())"
        case .running: return "running"
        case .closeRequested: return "shutting down (requested)"
        case .closingHandles: return "shutting down (closing its handles)"
        case .draining: return "shutting down (running its last work)"
        case .closed: return "shut down"
        }
    }
}
