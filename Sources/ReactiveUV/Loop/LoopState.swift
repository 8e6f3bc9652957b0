import Synchronization

/// Where an `EventLoop` is in its life: one state, read by every thread.
///
/// ```
///  idle ──run()──▶ running ──run() returns──▶ idle        (owner-thread loops only)
///    │               │
///    └──shutdown()───┴──▶ closeRequested ──▶ closingHandles ──▶ draining ──▶ closed
/// ```
///
/// - `idle`: an owner-thread loop outside `run()`: other threads' work waits for the next `run()`;
///   waiting calls are refused.
/// - `running`: the loop thread is in `uv_run`.
/// - `closeRequested`: `shutdown()` was asked; closing starts at the next turn.
/// - `closingHandles`: queued work runs, shutdown observers fire, timers and requests are
///   cancelled, every handle closes (even those opened now). Work is still accepted.
/// - `draining`: close callbacks and other threads' work still run; new handles, timers and
///   requests are refused.
/// - `closed`: the last look at the queue found it empty; every submission is refused.
///
/// Written only by the transitions in EventLoop+Lifecycle.swift, under the inbox lock, so a
/// transition and the queue it decides about change together; read anywhere without it.
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

    /// Whether a libuv request may start now (shutdown cancels pending ones when it begins closing).
    var acceptsNewRequests: Bool { rawValue <= LoopState.closeRequested.rawValue }

    /// Whether the loop thread has begun closing (its handles, timers and requests).
    var hasBegunClosing: Bool { rawValue >= LoopState.closingHandles.rawValue }

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
