/// A scheduler on an event loop whose delays count from the loop's time, as
/// libuv's and Node's timers do, instead of from the call.
///
/// `loop.scheduler` (the loop itself) guarantees that work never runs before
/// its delay has passed since `schedule(after:)` was called, as RAC's
/// `after:` date and NIO's deadlines do. That costs a clock read per call and
/// means a callback that schedules many timers pushes the later ones back by
/// however long it has been running.
///
/// Called on the loop thread, this scheduler counts instead from libuv's
/// loop time (`uv_now`: read when the current loop iteration began, in whole
/// milliseconds) plus the delay rounded up to whole milliseconds, exactly
/// like `uv_timer_start`. A million timers scheduled in one callback are then
/// all measured from the same instant, and a timer may run up to the time the
/// current iteration has already spent earlier than "delay after the call".
/// Called from any other thread it counts from the call, like the loop.
/// Everything else (the run queue, cancellation, shutdown, repeating
/// schedules without drift) is the loop's own scheduler.
///
/// Thread rule: safe from any thread.
public final class LoopTimeScheduler: Scheduler, @unchecked Sendable {
    // Immutable after init; the loop does its own synchronization.
    /// The loop whose timers this scheduler uses.
    public let loop: EventLoop

    init(loop: EventLoop) {
        self.loop = loop
        super.init()
        loopLifecycle = loop
    }

    /// The monotonic clock.
    ///
    /// Thread rule: safe from any thread.
    public override var now: SchedulerInstant { SchedulerInstant.now }

    /// The instant this scheduler's delays count from if it is called now.
    ///
    /// On the loop thread: libuv's loop time (`uv_now`, in whole milliseconds,
    /// read when the current iteration began), so a timer scheduled now with
    /// `schedule(after: d)` is due at `loopTime + d` (d rounded up to whole
    /// milliseconds). Elsewhere: the monotonic clock now, since delays scheduled
    /// off the loop thread count from the call. Both readings are on the
    /// monotonic clock `SchedulerInstant.now` reads (libuv reads
    /// `CLOCK_MONOTONIC` for its loop time where the coarse clock is coarser
    /// than a millisecond, as on Linux with HZ below 1000; with a 1 ms coarse
    /// clock the two may differ by up to a millisecond).
    ///
    /// - Returns: The base instant for delays scheduled now.
    ///
    /// Thread rule: safe from any thread.
    public var loopTime: SchedulerInstant { SchedulerInstant(nanoseconds: loop.timerBase(fromLoopTime: true)) }

    /// `"loop 'name' (loop time)"`.
    ///
    /// Thread rule: safe from any thread.
    public override var schedulerDescription: String { "\(loop.schedulerDescription) (loop time)" }

    /// Runs `work` on the loop thread after what is already queued, like `EventLoop.schedule(_:)`.
    ///
    /// - Parameter work: The work to run.
    /// - Returns: A disposable that cancels the work if it has not started, or nil after shutdown.
    ///
    /// Thread rule: safe from any thread.
    @discardableResult
    public override func schedule(_ work: @escaping @Sendable () -> Void) -> (any Disposable)? {
        loop.schedule(work)
    }

    /// Runs `work` once on the loop thread when `delay` has passed on the loop's clock.
    ///
    /// On the loop thread the delay counts from the current iteration's loop
    /// time and is rounded up to whole milliseconds; elsewhere it counts from
    /// the call. A zero or negative delay queues the work like `schedule(_:)`.
    ///
    /// - Parameters:
    ///   - delay: How long to wait.
    ///   - work: The work to run.
    /// - Returns: A disposable that cancels the timer, or nil after shutdown.
    ///
    /// Thread rule: safe from any thread.
    @discardableResult
    public override func schedule(after delay: Duration, _ work: @escaping @Sendable () -> Void) -> (any Disposable)? {
        loop.scheduleTimer(after: delay, fromLoopTime: true, work)
    }

    /// Runs `work` after `delay` (counted as in `schedule(after:_:)`), then every `interval`, without drift.
    ///
    /// - Parameters:
    ///   - delay: Time until the first run.
    ///   - interval: Time between runs (at least 1 ms).
    ///   - leeway: Ignored (libuv timers do not coalesce).
    ///   - work: The work to run each tick.
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
    /// This loop's timers counted from the loop's time (libuv's `uv_now`), like `uv_timer_start` and Node.
    ///
    /// See `LoopTimeScheduler` for when to prefer it over `scheduler`.
    ///
    /// Thread rule: safe from any thread.
    public var loopTimeScheduler: LoopTimeScheduler { LoopTimeScheduler(loop: self) }
}
