import Synchronization

/// A one-shot event one task waits for: fired by whichever of graceful shutdown,
/// cancellation or a loop's shutdown comes first; later fires do nothing.
///
/// Thread rule: `fire()` from any thread; `wait()` from one task.
final class ShutdownTrigger: Sendable {
    private enum State {
        /// Not fired; the continuation of the task waiting, once it waits.
        case waiting(CheckedContinuation<Void, Never>?)
        case fired
    }

    private let state = Mutex<State>(.waiting(nil))

    /// Returns once `fire()` has been called (at once if it already was).
    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let firedAlready = state.withLock { state -> Bool in
                guard case .waiting = state else { return true }
                state = .waiting(continuation)
                return false
            }
            if firedAlready { continuation.resume() }
        }
    }

    /// Wakes the waiting task; the first call counts.
    func fire() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard case .waiting(let continuation) = state else { return nil }
            state = .fired
            return continuation
        }
        // Resumed outside the lock: the resumed task may run at once on this thread.
        waiter?.resume()
    }
}
