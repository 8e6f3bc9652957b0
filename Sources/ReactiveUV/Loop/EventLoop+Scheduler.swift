internal import CLibUV
import Synchronization

extension EventLoop {
    func scheduleSoon(_ work: @escaping @Sendable () -> Void) -> (any Disposable)? {
        let item = CancellableWork(work)
        guard enqueue({ item.run() }) else {
            execute(work)  // reports the rejection
            return nil
        }
        return item
    }

    /// `onShutdown` runs (on the loop thread, instead of `work`) if the loop shuts down while the timer is pending.
    func scheduleTimer(after delay: Duration, fromLoopTime: Bool = false, onShutdown: (@Sendable () -> Void)? = nil,
                       _ work: @escaping @Sendable () -> Void) -> (any Disposable)? {
        // Zero goes through the run queue: it is due now, and the run queue keeps a
        // chain of zero-delay work from starving the loop's other phases.
        if delay <= .zero { return scheduleSoon(work) }
        let deadline = timerDeadline(after: delay, fromLoopTime: fromLoopTime)
        return startTimer(ScheduledTimer(loop: self, deadline: deadline, interval: 0, requestedDelay: delay,
                                         onShutdown: onShutdown, work: work))
    }

    /// `onShutdown` runs (on the loop thread) if the loop shuts down while the timer is still repeating.
    func scheduleRepeatingTimer(after delay: Duration, every interval: Duration, fromLoopTime: Bool = false,
                                onShutdown: (@Sendable () -> Void)? = nil,
                                _ work: @escaping @Sendable () -> Void) -> (any Disposable)? {
        let step = max(interval.clampedNanoseconds, 1_000_000)
        let deadline = timerDeadline(after: delay, fromLoopTime: fromLoopTime)
        return startTimer(ScheduledTimer(loop: self, deadline: deadline, interval: step, requestedDelay: delay,
                                         onShutdown: onShutdown, work: work))
    }

    /// Nanoseconds on the monotonic clock when a timer of `delay` is due.
    ///
    /// From the call by default. With `fromLoopTime` on the loop thread, from
    /// libuv's loop time (`uv_now`, read when the current iteration began, in
    /// whole milliseconds) plus the delay rounded up to whole milliseconds:
    /// exactly how `uv_timer_start` counts. Off the loop thread the loop's time
    /// cannot be read safely, so the call time is used.
    private func timerDeadline(after delay: Duration, fromLoopTime: Bool) -> UInt64 {
        guard fromLoopTime, inEventLoop else { return (SchedulerInstant.now + delay).nanoseconds }
        let milliseconds = delay.millisecondsRoundedUp
        let (scaled, overflow) = milliseconds.multipliedReportingOverflow(by: 1_000_000)
        let (sum, overflow2) = timerBase(fromLoopTime: true).addingReportingOverflow(scaled)
        return overflow || overflow2 ? .max : sum
    }

    /// Nanoseconds on the monotonic clock that a delay scheduled now counts from:
    /// libuv's loop time with `fromLoopTime` on the loop thread, else the clock now.
    func timerBase(fromLoopTime: Bool) -> UInt64 {
        guard fromLoopTime, inEventLoop else { return SchedulerInstant.now.nanoseconds }
        return uv_now(uvLoop) &* 1_000_000
    }
}

/// Work queued through `execute` that can be cancelled before it runs.
final class CancellableWork: Disposable, @unchecked Sendable {
    // `cancelled` is atomic; `work` is set in init and cleared only by `run()` on the loop thread.
    private let cancelled = Atomic<Bool>(false)
    private var work: (@Sendable () -> Void)?

    init(_ work: @escaping @Sendable () -> Void) { self.work = work }

    func run() {
        let work = self.work
        self.work = nil
        if !cancelled.load(ordering: .acquiring) { work?() }
    }

    func dispose() { cancelled.store(true, ordering: .releasing) }

    var isDisposed: Bool { cancelled.load(ordering: .acquiring) }
}
