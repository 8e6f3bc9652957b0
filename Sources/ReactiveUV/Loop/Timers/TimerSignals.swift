extension Signal where Value == Void {
    /// Sends one `()` after `delay`, then completes.
    ///
    /// Runs on the timers of `scheduler` (the subscription's home when nil):
    /// on a loop, one entry in the loop's timer queue (no libuv handle of its
    /// own; see Loop/Timers/EventLoop+Timers.swift); on a `TestScheduler`, its
    /// virtual clock. The timer is scheduled when a subscriber arrives and
    /// cancelled when the subscription ends or is disposed. A negative delay
    /// counts as zero. If the timer's loop shuts down before it fires, the
    /// signal fails with `EventLoopError.shutDown`.
    ///
    /// - Parameters:
    ///   - delay: How long to wait.
    ///   - scheduler: Where the timer runs; nil for the subscription's home.
    /// - Returns: The signal.
    ///
    /// Thread rule: safe from any thread.
    public static func timer(after delay: Duration, on scheduler: Scheduler? = nil) -> Signal<Void> {
        Signal { subscriber in
            let target = scheduler ?? subscriber.homeScheduler
            let timer = scheduleTimer(on: target, after: delay, every: nil, for: subscriber) {
                subscriber.sendNext(())
                subscriber.sendCompleted()
            }
            if timer == nil { reportRefusal(by: target, to: subscriber) }
            return timer
        }.debugNamed("+timer(after: \(delay))")
    }
}

extension Signal where Value == Int {
    /// Sends the tick index 0, 1, 2, ... every `interval`, without drift, until disposed.
    ///
    /// Tick N is due at subscription + (N+1)·interval (see
    /// `Scheduler.schedule(after:repeatingEvery:leeway:_:)`). An interval
    /// that is not positive ends the signal with a `UVError` (`EINVAL`); the
    /// shutdown of the timer's loop ends it with `EventLoopError.shutDown`.
    ///
    /// - Parameters:
    ///   - interval: Time between ticks; must be positive.
    ///   - scheduler: Where the timer runs; nil for the subscription's home.
    /// - Returns: The signal.
    ///
    /// Thread rule: safe from any thread.
    public static func interval(_ interval: Duration, on scheduler: Scheduler? = nil) -> Signal<Int> {
        Signal { subscriber in
            guard interval > .zero else {
                subscriber.sendError(UVError(code: UVError.invalidArgumentCode,
                                             message: "interval must be positive, got \(interval)",
                                             context: "Signal.interval"))
                return nil
            }
            let target = scheduler ?? subscriber.homeScheduler
            let ticks = TickCounter()
            let timer = scheduleTimer(on: target, after: interval, every: interval, for: subscriber) {
                let index = ticks.next()
                subscriber.sendNext(index)
            }
            if timer == nil { reportRefusal(by: target, to: subscriber) }
            return timer
        }.debugNamed("+interval(\(interval))")
    }
}

/// Schedules a timer signal's work on `scheduler`: once after `delay`, or then every `interval`.
///
/// On a loop (or its loop-time scheduler) the timer also carries the subscriber's
/// shutdown notice: if the loop shuts down while the timer is pending, the
/// subscriber gets `EventLoopError.shutDown` instead of waiting forever.
private func scheduleTimer<Value>(
    on scheduler: Scheduler, after delay: Duration, every interval: Duration?, for subscriber: Subscriber<Value>,
    _ work: @escaping @Sendable () -> Void
) -> (any Disposable)? {
    let loop: EventLoop, fromLoopTime: Bool
    if let target = scheduler as? EventLoop {
        (loop, fromLoopTime) = (target, false)
    } else if let target = scheduler as? LoopTimeScheduler {
        (loop, fromLoopTime) = (target.loop, true)
    } else if let interval {
        return scheduler.schedule(after: delay, repeatingEvery: interval, work)
    } else {
        return scheduler.schedule(after: delay, work)
    }
    let name = loop.name
    let onShutdown: @Sendable () -> Void = { subscriber.sendError(EventLoopError.shutDown(loop: name)) }
    if let interval {
        return loop.scheduleRepeatingTimer(after: delay, every: interval, fromLoopTime: fromLoopTime,
                                           onShutdown: onShutdown, work)
    }
    return loop.scheduleTimer(after: delay, fromLoopTime: fromLoopTime, onShutdown: onShutdown, work)
}

/// A loop's scheduler returns nil only when it refused the work (it shut down):
/// the subscriber gets that as an error instead of waiting forever. (Other
/// schedulers, such as the immediate one, return nil after running the work.)
private func reportRefusal<Value>(by scheduler: Scheduler, to subscriber: Subscriber<Value>) {
    guard let loop = (scheduler as? EventLoop) ?? (scheduler as? LoopTimeScheduler)?.loop else { return }
    subscriber.sendError(EventLoopError.shutDown(loop: loop.name))
}

/// Counts ticks of one interval subscription.
private final class TickCounter: @unchecked Sendable {
    // Only touched by the scheduler's work, which runs serially on one thread (the timer's loop).
    private var count = 0
    func next() -> Int {
        defer { count += 1 }
        return count
    }
}
