@_spi(SchedulerImplementation) import ReactiveUVCore
internal import CLibUV

// A loop's timers, all in this folder:
// - `Signal.timer` / `Signal.interval` (TimerSignals.swift): the public signal factories; on a
//   loop they schedule a `ScheduledTimer` that also carries the subscriber's shutdown notice.
// - `EventLoop.schedule(after:...)` and `LoopTimeScheduler` (LoopTimeScheduler.swift): the
//   scheduler entry points; both end in `scheduleTimer` / `scheduleRepeatingTimer` below.
// - `ScheduledTimer` (ScheduledTimer.swift): one piece of scheduled work and its disposable.
// - `TimerQueue` (TimerQueue.swift): the loop's 4-ary min-heap of pending timers.
// - This file: deadlines, and the driver: one `uv_timer_t` per loop (`timerDriver`, made with
//   the loop like its wake-up handle) armed for the earliest deadline; its callback runs what
//   is due. No scheduled timer owns a libuv handle of its own.

extension EventLoop {
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

    /// libuv's loop time in milliseconds (`uv_now`: when the current iteration began). Loop thread only.
    var loopTimeMilliseconds: UInt64 { uv_now(uvLoop) }

    /// Nanoseconds on the monotonic clock that a delay scheduled now counts from:
    /// libuv's loop time with `fromLoopTime` on the loop thread, else the clock now.
    func timerBase(fromLoopTime: Bool) -> UInt64 {
        guard fromLoopTime, inEventLoop else { return SchedulerInstant.now.nanoseconds }
        return uv_now(uvLoop) &* 1_000_000
    }

    /// Queues a timer on the loop thread (from any thread).
    func startTimer(_ timer: ScheduledTimer) -> (any Disposable)? {
        if inEventLoop {
            guard acceptsNewHandles else {
                reportMisuse(refusal.description)
                return nil
            }
            addTimer(timer)
            return timer
        }
        guard enqueue({ [self] in addTimer(timer) }) else {
            execute {}  // reports the rejection
            return nil
        }
        return timer
    }

    /// Loop thread only.
    private func addTimer(_ timer: ScheduledTimer) {
        assertInEventLoop()
        if timer.isCancelled || !acceptsNewHandles {
            timer.dropForShutdown()
            return
        }
        timers.push(timer)
        if !firingTimers, timer.deadline < armedDeadline { armTimerDriver() }
    }

    /// Loop thread only: drop a cancelled timer's closure now, and the heap entry when convenient.
    func timerWasCancelled(_ timer: ScheduledTimer) {
        assertInEventLoop()
        guard timer.work != nil else { return }  // already fired, or dropped at shutdown
        timer.work = nil
        timer.onShutdown = nil
        guard timer.inHeap else { return }  // not added yet: addTimer will see the flag
        timers.noteCancelled()
        if timers.liveCount == 0 {
            // Nothing live is left: clear the heap so a cancelled far-future timer
            // does not keep the driver armed (and an owner-thread run() from returning).
            timers.removeCancelled()
            armTimerDriver()
        }
    }

    /// The driver's callback: runs every timer due now, in deadline order.
    ///
    /// At most 16,384 per call; the rest continue from the run queue on the next
    /// iteration (never by restarting the driver with 0 ms from its own callback).
    func fireDueTimers() {
        assertInEventLoop()
        firingTimers = true
        let now = SchedulerInstant.now.nanoseconds
        var budget = 16_384
        var more = false
        while let timer = timers.popDue(at: now) {
            guard let work = timer.work, !timer.isCancelled else { continue }
            if timer.interval == 0 {
                timer.work = nil
                timer.onShutdown = nil
            } else {
                // The next deadline is the first start + k·interval still ahead: a
                // blocked loop coalesces missed ticks instead of bursting.
                timer.deadline &+= timer.interval
                if timer.deadline <= now {
                    timer.deadline &+= ((now - timer.deadline) / timer.interval + 1) &* timer.interval
                }
                timers.push(timer)
            }
            work()
            budget -= 1
            if budget == 0 {
                more = timers.earliestDeadline.map { $0 <= now } ?? false
                break
            }
        }
        firingTimers = false
        if more { _ = enqueue { [self] in fireDueTimers() } }
        armTimerDriver(fromDriverCallback: true)
    }

    /// Arms the driver for the earliest deadline (rounded up to libuv's milliseconds), or stops it.
    ///
    /// From the driver's own callback the timeout is at least 1 ms: restarting a libuv
    /// timer with 0 ms from its callback would run it again in the same pass, forever.
    func armTimerDriver(fromDriverCallback: Bool = false) {
        assertInEventLoop()
        let driver = timerDriverHandle
        guard let deadline = timers.earliestDeadline, acceptsNewHandles else {
            armedDeadline = .max
            uvCheckReporting(uv_timer_stop(driver), "uv_timer_stop")
            return
        }
        armedDeadline = deadline
        let loopNow = uv_now(uvLoop) &* 1_000_000
        var timeout: UInt64 = deadline <= loopNow ? 0 : (deadline - loopNow + 999_999) / 1_000_000
        if fromDriverCallback && timeout == 0 { timeout = 1 }
        uvCheckReporting(uv_timer_start(driver, timerDriverCallback, timeout, 0), "uv_timer_start")
    }

    /// Shutdown: drops every pending timer without running it; timers behind a signal tell their subscriber.
    func cancelAllTimers() {
        assertInEventLoop()
        let pending = timers.removeAll()
        armedDeadline = .max
        for timer in pending { timer.dropForShutdown() }
    }

    /// Pending timers, as open handles for reports.
    func pendingTimerHandles() -> [OpenHandle] {
        timers.liveTimers().map { OpenHandle(kind: "timer", label: $0.label, isActive: true, isReferenced: true) }
    }
}

let timerDriverCallback: uv_timer_cb = { handle in
    guard let data = handle?.pointee.data else { return }
    Unmanaged<EventLoop>.fromOpaque(data).takeUnretainedValue().fireDueTimers()
}
