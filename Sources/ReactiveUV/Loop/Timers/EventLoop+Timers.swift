@_spi(SchedulerImplementation) import ReactiveUVCore
internal import CLibUV

// A loop's timers: the signal factories (TimerSignals.swift), the scheduler entry points
// (`schedule(after:)`, LoopTimeScheduler.swift), one scheduled item (ScheduledTimer.swift), the
// loop's min-heap (TimerQueue.swift), and here deadlines and the driver: one `uv_timer_t` per
// loop armed for the earliest deadline, so no scheduled timer owns a libuv handle.

extension EventLoop {
    /// `onShutdown` runs (on the loop thread, instead of `work`) if the loop shuts down while the timer is pending.
    func scheduleTimer(after delay: Duration, fromLoopTime: Bool = false, onShutdown: (@Sendable () -> Void)? = nil,
                       _ work: @escaping @Sendable () -> Void) -> (any Disposable)? {
        // Zero goes through the run queue, which keeps a chain of zero-delay work from starving I/O.
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

    /// Nanoseconds on the monotonic clock when a timer of `delay` is due: from the call, or with
    /// `fromLoopTime` on the loop thread as `uv_timer_start` counts (`uv_now` plus whole milliseconds).
    private func timerDeadline(after delay: Duration, fromLoopTime: Bool) -> UInt64 {
        guard fromLoopTime, inEventLoop else { return (SchedulerInstant(nanoseconds: clockNanoseconds) + delay).nanoseconds }
        let milliseconds = delay.millisecondsRoundedUp
        let (scaled, overflow) = milliseconds.multipliedReportingOverflow(by: 1_000_000)
        let (sum, overflow2) = timerBase(fromLoopTime: true).addingReportingOverflow(scaled)
        return overflow || overflow2 ? .max : sum
    }

    /// libuv's loop time in milliseconds (when the current iteration began). Loop thread only.
    /// A simulated loop's is its virtual time in whole milliseconds.
    var loopTimeMilliseconds: UInt64 {
        if let virtualClock { return virtualClock.nanoseconds / 1_000_000 }
        return uv_now(uvLoop)
    }

    /// The monotonic nanoseconds a delay scheduled now counts from (see `timerDeadline`).
    func timerBase(fromLoopTime: Bool) -> UInt64 {
        guard fromLoopTime, inEventLoop else { return clockNanoseconds }
        return loopTimeMilliseconds &* 1_000_000
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

    private func addTimer(_ timer: ScheduledTimer) {
        assertInEventLoop()
        if timer.isCancelled || !acceptsNewHandles {
            timer.dropForShutdown()
            return
        }
        timers.push(timer)
        if !firingTimers, timer.deadline < armedDeadline { armTimerDriver() }
    }

    /// Loop thread only: drops a cancelled timer's closure now, and the heap entry when convenient.
    func timerWasCancelled(_ timer: ScheduledTimer) {
        assertInEventLoop()
        guard timer.work != nil else { return }  // already fired, or dropped at shutdown
        timer.work = nil
        timer.onShutdown = nil
        guard timer.inHeap else { return }  // not added yet: addTimer will see the flag
        timers.noteCancelled()
        if timers.liveCount == 0 {
            // Nothing live is left: clear the heap so a cancelled far-future timer does not keep the
            // driver armed (and an owner-thread run() from returning).
            timers.removeCancelled()
            armTimerDriver()
        }
    }

    /// The driver's callback: runs every timer due now, in deadline order, at most 16,384 a call
    /// (the rest from the run queue next iteration).
    func fireDueTimers() {
        assertInEventLoop()
        firingTimers = true
        let now = clockNanoseconds
        var budget = 16_384
        var more = false
        while let work = takeDueTimerWork(at: now) {
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

    /// The work of the earliest live timer due at `now`, skipping cancelled ones; a repeating timer
    /// is put back for its next tick first. Nil when no live timer is due.
    @inline(__always)
    func takeDueTimerWork(at now: UInt64) -> (@Sendable () -> Void)? {
        while let timer = timers.popDue(at: now) {
            guard let work = timer.work, !timer.isCancelled else { continue }
            if timer.interval == 0 {
                timer.work = nil
                timer.onShutdown = nil
            } else {
                // Missed ticks coalesce: the next deadline is the first start + k·interval still ahead.
                timer.deadline &+= timer.interval
                if timer.deadline <= now {
                    timer.deadline &+= ((now - timer.deadline) / timer.interval + 1) &* timer.interval
                }
                timers.push(timer)
            }
            return work
        }
        return nil
    }

    /// Arms the driver for the earliest deadline (rounded up to milliseconds), or stops it. From its
    /// own callback at least 1 ms: 0 would run it again in the same pass, forever.
    func armTimerDriver(fromDriverCallback: Bool = false) {
        assertInEventLoop()
        let driver = timerDriverHandle
        guard let deadline = timers.earliestDeadline, acceptsNewHandles else {
            armedDeadline = .max
            uvCheckReporting(uv_timer_stop(driver), "uv_timer_stop")
            return
        }
        armedDeadline = deadline
        // A simulated loop's driver is its simulation, which reads the heap itself.
        if virtualClock != nil { return }
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
