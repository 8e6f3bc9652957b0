/// RAC's subscription scheduler: now on a thread with a current scheduler, else on `EventLoop.shared`.
/// Thread rule: safe from any thread.
final class SubscriptionScheduler: Scheduler, @unchecked Sendable {
    // Sendable: no stored state.

    override var schedulerDescription: String { "subscription" }

    /// The scheduler work goes to: the current one, else the shared loop's.
    private var target: Scheduler { Scheduler.current ?? Runtime.defaultScheduler }

    override var now: SchedulerInstant { target.now }

    override func schedule(_ work: @escaping @Sendable () -> Void) -> (any Disposable)? {
        if Scheduler.current != nil {
            work()
            return nil
        }
        return Runtime.defaultScheduler.schedule(work)
    }

    override func schedule(after delay: Duration, _ work: @escaping @Sendable () -> Void) -> (any Disposable)? {
        target.schedule(after: delay, work)
    }

    override func schedule(
        after delay: Duration,
        repeatingEvery interval: Duration,
        leeway: Duration,
        _ work: @escaping @Sendable () -> Void
    ) -> (any Disposable)? {
        target.schedule(after: delay, repeatingEvery: interval, leeway: leeway, work)
    }

    override func scheduleRecursive(
        _ action: @escaping @Sendable (_ reschedule: @escaping @Sendable () -> Void) -> Void
    ) -> (any Disposable)? {
        target.scheduleRecursive(action)
    }
}
