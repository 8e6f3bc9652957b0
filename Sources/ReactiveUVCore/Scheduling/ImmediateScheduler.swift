#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Runs work synchronously on the calling thread.
/// Thread rule: safe from any thread.
final class ImmediateScheduler: Scheduler, @unchecked Sendable {
    // Sendable: no stored state.

    override var schedulerDescription: String { "immediate" }

    override func schedule(_ work: @escaping @Sendable () -> Void) -> (any Disposable)? {
        work()
        return nil
    }

    override func schedule(after delay: Duration, _ work: @escaping @Sendable () -> Void) -> (any Disposable)? {
        // RAC's immediate scheduler sleeps until the date, then runs the block.
        let deadline = SchedulerInstant.now + delay
        while true {
            let now = SchedulerInstant.now
            if now >= deadline { break }
            let remaining = deadline.nanoseconds - now.nanoseconds
            var request = timespec(tv_sec: Int(remaining / 1_000_000_000), tv_nsec: Int(remaining % 1_000_000_000))
            _ = nanosleep(&request, nil)
        }
        work()
        return nil
    }

    override func schedule(
        after delay: Duration,
        repeatingEvery interval: Duration,
        leeway: Duration,
        _ work: @escaping @Sendable () -> Void
    ) -> (any Disposable)? {
        reportMisuse("Scheduler.immediate cannot schedule repeating work (it would block the calling thread forever); use a loop's scheduler")
        return nil
    }

    override func scheduleRecursive(
        _ action: @escaping @Sendable (_ reschedule: @escaping @Sendable () -> Void) -> Void
    ) -> (any Disposable)? {
        // A trampoline: each reschedule bumps a counter the loop drains, so the depth stays at one.
        let remaining = TrampolineCounter()
        remaining.value = 1
        while remaining.value > 0 {
            remaining.value -= 1
            action { remaining.value += 1 }
        }
        return nil
    }
}

/// The trampoline's counter; captured by the reschedule closure.
private final class TrampolineCounter: @unchecked Sendable {
    // Sendable: touched only on the thread running `scheduleRecursive`; a reschedule from elsewhere
    // after it returned has no effect, as in RAC.
    package var value = 0
}

/// Writes a programming-error message to standard error, where RAC would assert but a server must keep running.
package func reportMisuse(_ message: String) {
    var line = "ReactiveUV: " + message + "\n"
    line.withUTF8 { buffer in
        _ = write(2, buffer.baseAddress, buffer.count)
    }
}
