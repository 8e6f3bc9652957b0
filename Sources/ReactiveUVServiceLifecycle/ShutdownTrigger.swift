import Foundation

/// A one-shot event one task waits for, fired by the first of graceful shutdown, cancellation or
/// a loop's shutdown.
/// Thread rule: `fire()` from any thread; `wait()` from one task.
final class ShutdownTrigger: @unchecked Sendable {
    // Sendable: `lock` guards `state` (an NSLock, which the thread sanitizer sees, unlike Mutex on Linux).
    private enum State {
        /// Not fired; the waiting task's continuation, once it waits.
        case waiting(CheckedContinuation<Void, Never>?)
        case fired
    }

    private let lock = NSLock()
    private var state = State.waiting(nil)

    /// Returns once `fire()` has been called (at once if it already was).
    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            lock.lock()
            let firedAlready: Bool
            if case .waiting = state {
                state = .waiting(continuation)
                firedAlready = false
            } else {
                firedAlready = true
            }
            lock.unlock()
            if firedAlready { continuation.resume() }
        }
    }

    /// Wakes the waiting task; the first call counts.
    func fire() {
        lock.lock()
        var waiter: CheckedContinuation<Void, Never>?
        if case .waiting(let continuation) = state {
            state = .fired
            waiter = continuation
        }
        lock.unlock()
        // Resumed outside the lock: the resumed task may run at once on this thread.
        waiter?.resume()
    }
}
