import Foundation
import ReactiveUV

/// A wait that reached its deadline: the harness's name for `TimeoutError`. Its `operation` names
/// what the test waited for, `timeout` how long, and `observed` what had happened by then.
///
/// Thread rule: a value type; safe from any thread.
public typealias WaitTimeout = TimeoutError

extension TimeoutError {
    /// Creates the error a harness wait throws at its deadline: what the test was `waitingFor`
    /// ("3 values"), for how long, and what was `observed` by then.
    ///
    /// Thread rule: safe from any thread.
    public init(waitingFor: String, timeout: Duration, observed: String) {
        self.init(operation: waitingFor, after: timeout, observed: observed)
    }

    /// What the test was waiting for (`operation`).
    ///
    /// Thread rule: safe from any thread.
    public var waitingFor: String { operation }
}

/// Waits until `condition` holds, checking it about every millisecond on the calling thread, for
/// state no recorder sees (a counter a callback bumps, a client thread's result).
///
/// - Parameters:
///   - what: What is awaited, for the message ("the server to listen").
///   - timeout: The deadline, on the monotonic clock.
///   - observed: The state at the deadline, for the message.
///   - condition: Checked on the calling thread; keep it cheap and free of waits.
/// - Throws: `WaitTimeout` naming `what` and `observed` when the deadline passes first.
///
/// Thread rule: safe from any thread that is no loop's (it blocks the caller).
public func waitFor(_ what: String, timeout: Duration, observed: @autoclosure () -> String = "",
                    _ condition: () -> Bool) throws(WaitTimeout) {
    let deadline = SchedulerInstant.now + timeout
    let notifier = Notifier()
    while !condition() {
        if SchedulerInstant.now >= deadline {
            throw WaitTimeout(waitingFor: what, timeout: timeout, observed: observed())
        }
        _ = notifier.wait(timeout: .milliseconds(1)) { false }
    }
}

/// A condition variable with deadline waits on the monotonic clock.
final class Notifier: @unchecked Sendable {
    // Sendable: NSCondition is itself thread-safe.
    private let condition = NSCondition()

    func notifyAll() {
        condition.lock()
        condition.broadcast()
        condition.unlock()
    }

    /// Waits until `check()` is true or the deadline passes; `check` runs with the condition's lock held.
    func wait(timeout: Duration, until check: () -> Bool) -> Bool {
        let deadline = SchedulerInstant.now + timeout
        condition.lock()
        defer { condition.unlock() }
        while !check() {
            let now = SchedulerInstant.now
            if now >= deadline { return check() }
            let remaining = deadline - now
            // Bounded slices, so a missed broadcast delays the check and never hangs it.
            let slice = min(remaining, .milliseconds(10))
            let seconds = Double(slice.components.seconds) + Double(slice.components.attoseconds) / 1e18
            _ = condition.wait(until: Date(timeIntervalSinceNow: seconds))
        }
        return true
    }
}
