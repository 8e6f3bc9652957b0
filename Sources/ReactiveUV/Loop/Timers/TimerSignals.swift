extension Signal where Value == Void {
    /// Sends one `()` after `delay`, then completes.
    ///
    /// The timer is scheduled when a subscriber arrives and cancelled when the subscription ends. A
    /// negative delay counts as zero. If the timer's loop shuts down first, it fails with
    /// `EventLoopError.shutDown`.
    ///
    /// - Parameters:
    ///   - delay: How long to wait.
    ///   - scheduler: Where the timer runs; nil for the subscription's home.
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
    /// Tick N is due at subscription + (N+1)·interval. A non-positive interval fails with a
    /// `UVError` (`EINVAL`); the timer's loop shutting down fails it with `EventLoopError.shutDown`.
    ///
    /// - Parameters:
    ///   - interval: Time between ticks; must be positive.
    ///   - scheduler: Where the timer runs; nil for the subscription's home.
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

/// Schedules a timer signal's work on `scheduler`; on a loop the timer also carries the
/// subscriber's shutdown notice.
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

/// A loop's scheduler returns nil only when it refused the work (shut down): the subscriber gets
/// that as an error. Other schedulers (the immediate one) return nil after running the work.
private func reportRefusal<Value>(by scheduler: Scheduler, to subscriber: Subscriber<Value>) {
    guard let loop = (scheduler as? EventLoop) ?? (scheduler as? LoopTimeScheduler)?.loop else { return }
    subscriber.sendError(EventLoopError.shutDown(loop: loop.name))
}

private final class TickCounter: @unchecked Sendable {
    // Sendable: touched only by the timer's work, which runs serially on the timer's loop.
    private var count = 0
    func next() -> Int {
        defer { count += 1 }
        return count
    }
}
