/// Where and when work runs: a loop, the calling thread (`Scheduler.immediate`), the subscription
/// scheduler, or a test's virtual clock (RAC's `RACScheduler`).
///
/// `schedule` returns a `Disposable?` that cancels work not yet started; `Scheduler.current` is the
/// one running on the calling thread. Subclass it only to build a new kind (as `TestScheduler` does).
///
/// Thread rule: every scheduler in ReactiveUV is safe from any thread.
open class Scheduler: @unchecked Sendable {
    // Sendable: `loopLifecycle` is written once, by a loop's initializer, before the scheduler is
    // shared; subclasses document their own synchronization.

    /// The loop whose thread runs this scheduler's work, for what must follow its shutdown; nil for a
    /// scheduler on no loop. Unowned: a loop names itself here.
    package unowned(unsafe) var loopLifecycle: (any LoopLifecycle)?

    /// Creates a scheduler; for subclasses.
    ///
    /// Thread rule: safe from any thread.
    public init() {}

    /// The scheduler's current time: the monotonic clock, or virtual time for a test scheduler.
    ///
    /// Thread rule: safe from any thread.
    open var now: SchedulerInstant { SchedulerInstant.now }

    /// A short name for messages ("loop 'shared'", "immediate").
    ///
    /// Thread rule: safe from any thread.
    open var schedulerDescription: String { "\(type(of: self))" }

    /// Runs `work` as soon as the scheduler can.
    ///
    /// - Returns: A disposable that cancels the work if it has not started, or nil when the work
    ///   already ran (immediate scheduling) or cannot be cancelled.
    ///
    /// Thread rule: safe from any thread.
    @discardableResult
    open func schedule(_ work: @escaping @Sendable () -> Void) -> (any Disposable)? {
        preconditionFailure("\(type(of: self)) must override Scheduler.schedule(_:)")
    }

    /// `schedule(_:)`, except that a loop that has shut down drops the work silently (for the
    /// library's bookkeeping hops); false when dropped.
    /// Thread rule: safe from any thread.
    @discardableResult
    package final func scheduleDroppingIfShutDown(_ work: @escaping @Sendable () -> Void) -> Bool {
        if let loop = loopLifecycle { return loop.enqueueDroppingIfShutDown(work) }
        schedule(work)
        return true
    }

    /// Runs `work` once, no earlier than `delay` from now (negative counts as zero; loops round up).
    ///
    /// - Returns: A disposable that cancels the work if it has not started.
    ///
    /// Thread rule: safe from any thread.
    @discardableResult
    open func schedule(after delay: Duration, _ work: @escaping @Sendable () -> Void) -> (any Disposable)? {
        preconditionFailure("\(type(of: self)) must override Scheduler.schedule(after:_:)")
    }

    /// Runs `work` first after `delay`, then every `interval`, until disposed.
    ///
    /// Tick N is due at start + delay + N·interval, however long `work` takes; ticks due while the
    /// scheduler is blocked coalesce into one. An interval below the resolution (1 ms on a loop) is
    /// raised to it; `leeway` is accepted for RAC and unused by loops.
    ///
    /// - Returns: A disposable that stops the ticks.
    ///
    /// Thread rule: safe from any thread.
    @discardableResult
    open func schedule(
        after delay: Duration,
        repeatingEvery interval: Duration,
        leeway: Duration = .zero,
        _ work: @escaping @Sendable () -> Void
    ) -> (any Disposable)? {
        preconditionFailure("\(type(of: self)) must override Scheduler.schedule(after:repeatingEvery:leeway:_:)")
    }

    /// Runs `action` now-ish and again each time it calls `reschedule` (RAC's `scheduleRecursiveBlock:`).
    ///
    /// Each reschedule goes back through the scheduler, so the stack stays flat; k calls schedule k more runs.
    ///
    /// - Returns: A disposable that stops further runs.
    ///
    /// Thread rule: safe from any thread.
    @discardableResult
    open func scheduleRecursive(
        _ action: @escaping @Sendable (_ reschedule: @escaping @Sendable () -> Void) -> Void
    ) -> (any Disposable)? {
        let recursion = RecursiveSchedule(scheduler: self, action: action)
        recursion.submit()
        return recursion
    }

    /// Whether this scheduler is the one running on the calling thread.
    ///
    /// Thread rule: safe from any thread.
    @inlinable
    public final var isCurrent: Bool {
        ThreadLocals.currentScheduler.value == Unmanaged.passUnretained(self).toOpaque()
    }

    /// The scheduler running on the calling thread: its loop on a loop thread, a test scheduler while
    /// it runs work, nil anywhere else.
    ///
    /// Thread rule: safe from any thread.
    open class var current: Scheduler? {
        guard let pointer = ThreadLocals.currentScheduler.value else { return nil }
        return Unmanaged<Scheduler>.fromOpaque(pointer).takeUnretainedValue()
    }

    /// Runs work synchronously on the calling thread (RAC's immediate scheduler): `schedule(after:)`
    /// blocks until the delay passed; repeating schedules are refused (a message, and nil).
    ///
    /// Thread rule: safe from any thread.
    public static let immediate: Scheduler = ImmediateScheduler()

    /// Runs work at once on a thread with a current scheduler, else on `EventLoop.shared` (RAC's
    /// `subscriptionScheduler`, which every `didSubscribe` runs through).
    ///
    /// Thread rule: safe from any thread.
    public static let subscription: Scheduler = SubscriptionScheduler()

    /// Runs `body` with this scheduler as `Scheduler.current` on the calling thread, then restores the
    /// previous one (a virtual-time scheduler marks itself current while it runs work).
    ///
    /// Thread rule: any thread; the caller must make sure work meant for this scheduler really runs here.
    @_spi(SchedulerImplementation)
    public final func runAsCurrentScheduler<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        let previous = ThreadLocals.currentScheduler.value
        ThreadLocals.currentScheduler.set(Unmanaged.passUnretained(self).toOpaque())
        defer { ThreadLocals.currentScheduler.set(previous) }
        return try body()
    }
}
