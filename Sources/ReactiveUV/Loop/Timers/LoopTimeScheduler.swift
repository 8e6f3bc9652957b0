/// A scheduler on an event loop whose delays count from the loop's time, as libuv's and Node's
/// timers do, instead of from the call.
///
/// On the loop thread a delay counts from `uv_now` (when the current iteration began, in whole
/// milliseconds), rounded up to whole milliseconds, exactly like `uv_timer_start`: timers
/// scheduled in one callback share a base, and may run earlier than "delay after the call" by
/// the time the iteration has spent. Off the loop thread it counts from the call, like
/// `loop.scheduler`, which never runs work before its delay since the call.
///
/// Thread rule: safe from any thread.
public final class LoopTimeScheduler: Scheduler, @unchecked Sendable {
    // Sendable: immutable after init; the loop does its own synchronization.
    /// The loop whose timers this scheduler uses.
    public let loop: EventLoop

    init(loop: EventLoop) {
        self.loop = loop
        super.init()
        loopLifecycle = loop
    }

    /// The loop's clock: the monotonic clock, or a simulated loop's virtual time.
    ///
    /// Thread rule: safe from any thread.
    public override var now: SchedulerInstant { loop.now }

    /// The instant delays scheduled now count from: libuv's loop time on the loop thread, the
    /// monotonic clock now elsewhere (both on `SchedulerInstant`'s clock; libuv's may lag it by up
    /// to a millisecond where its coarse clock is used).
    ///
    /// Thread rule: safe from any thread.
    public var loopTime: SchedulerInstant { SchedulerInstant(nanoseconds: loop.timerBase(fromLoopTime: true)) }

    /// `"loop 'name' (loop time)"`.
    ///
    /// Thread rule: safe from any thread.
    public override var schedulerDescription: String { "\(loop.schedulerDescription) (loop time)" }

    /// Runs `work` on the loop thread after what is already queued, like `EventLoop.schedule(_:)`.
    ///
    /// - Returns: A disposable that cancels the work if it has not started, or nil after shutdown.
    ///
    /// Thread rule: safe from any thread.
    @discardableResult
    public override func schedule(_ work: @escaping @Sendable () -> Void) -> (any Disposable)? {
        loop.schedule(work)
    }

    /// Runs `work` once on the loop thread when `delay` has passed on the loop's clock.
    ///
    /// A zero or negative delay queues the work like `schedule(_:)`.
    ///
    /// - Returns: A disposable that cancels the timer, or nil after shutdown.
    ///
    /// Thread rule: safe from any thread.
    @discardableResult
    public override func schedule(after delay: Duration, _ work: @escaping @Sendable () -> Void) -> (any Disposable)? {
        loop.scheduleTimer(after: delay, fromLoopTime: true, work)
    }

    /// Runs `work` after `delay` (counted as in `schedule(after:_:)`), then every `interval` (at
    /// least 1 ms), without drift; `leeway` is ignored.
    ///
    /// - Returns: A disposable that stops the timer, or nil after shutdown.
    ///
    /// Thread rule: safe from any thread.
    @discardableResult
    public override func schedule(
        after delay: Duration,
        repeatingEvery interval: Duration,
        leeway: Duration = .zero,
        _ work: @escaping @Sendable () -> Void
    ) -> (any Disposable)? {
        loop.scheduleRepeatingTimer(after: delay, every: interval, fromLoopTime: true, work)
    }
}

extension EventLoop {
    /// This loop's timers counted from the loop's time, like `uv_timer_start` and Node (see `LoopTimeScheduler`).
    ///
    /// Thread rule: safe from any thread.
    public var loopTimeScheduler: LoopTimeScheduler { LoopTimeScheduler(loop: self) }
}
