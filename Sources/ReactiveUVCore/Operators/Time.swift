/// Operators that work with time: `throttle` and `debounce` (the same debounce), `delay`,
/// `timeout`, `timeout(idle:)`; the batching ones (`buffer(every:)`) are in Batching.swift.
///
/// Timers run on the given scheduler, else on the subscription's home (a loop's timers, or a
/// `TestScheduler`'s virtual time). The operator's state lives on that scheduler's thread, where
/// events are hopped and the result delivers. Each keeps at most one timer pending, cancelled
/// by disposal. If the timers' loop shuts down first, the operator ends with `EventLoopError.shutDown`.
extension Signal {
    /// RAC 2's `-throttle:`, which is a **debounce**: a value is sent only after `interval` has
    /// passed without a newer value. `debounce(_:on:)` is the same operator by the other
    /// libraries' name; the rate limiter is `throttle(_:latest:on:)`.
    ///
    /// A newer value replaces the pending one and restarts the wait. Completion sends the
    /// pending value, then completes; an error discards it and is forwarded at once.
    ///
    /// RAC: `-throttle:`; Rx: `debounce`; Combine: `debounce(for:scheduler:)`.
    ///
    /// - Parameters:
    ///   - interval: The quiet time a value must survive; negative counts as zero.
    ///   - scheduler: Where the timer runs and the result delivers; nil for the subscription's home.
    ///
    /// Thread rule: safe from any thread.
    public func throttle(_ interval: Duration, on scheduler: Scheduler? = nil) -> Signal<Value> {
        timed(on: scheduler) { downstream, scheduler, subscription in
            ThrottleState(downstream, scheduler: scheduler, subscription: subscription, interval: interval)
        }.debugNamed("[\(name)] -throttle: \(interval)")
    }

    /// Sends a value only after `interval` has passed without a newer value: RAC 2's `-throttle:` by its usual name.
    ///
    /// A newer value replaces the pending one and restarts the wait. Completion sends the
    /// pending value, then completes; an error discards it and is forwarded at once. Unlike
    /// `throttle(_:on:)`, an interval that is not positive ends the signal with a `UVError` (`EINVAL`).
    ///
    /// RAC: `-throttle:`; Rx: `debounce`; Combine: `debounce(for:scheduler:)`.
    ///
    /// - Parameters:
    ///   - interval: The quiet time a value must survive; must be positive.
    ///   - scheduler: Where the timer runs and the result delivers; nil for the subscription's home.
    ///
    /// Thread rule: safe from any thread.
    public func debounce(_ interval: Duration, on scheduler: Scheduler? = nil) -> Signal<Value> {
        guard interval > .zero else {
            return .invalidArgument("debounce interval must be positive, got \(interval)", in: "Signal.debounce(_:on:)")
        }
        return timed(on: scheduler) { downstream, scheduler, subscription in
            ThrottleState(downstream, scheduler: scheduler, subscription: subscription, interval: interval)
        }.debugNamed("[\(name)] -debounce: \(interval)")
    }

    /// Delays values and completion by `interval`; an error is forwarded at once (RAC's `-delay:`).
    ///
    /// Order is kept. An error discards the values still waiting.
    ///
    /// - Parameters:
    ///   - interval: The delay; negative counts as zero.
    ///   - scheduler: Where the timer runs and the result delivers; nil for the subscription's home.
    ///
    /// Thread rule: safe from any thread.
    public func delay(_ interval: Duration, on scheduler: Scheduler? = nil) -> Signal<Value> {
        // Not fused: the source's completion ends only its child subscription, the delayed one comes later.
        operatorSignal { downstream, subscription in
            let state = DelayState(downstream, scheduler: scheduler ?? subscription.home,
                                   subscription: subscription, interval: interval)
            self.attachAsChild(of: subscription) { state.receive($0) }
        }.debugNamed("[\(name)] -delay: \(interval)")
    }

    /// Fails with `TimeoutError.timeoutOperator(after: interval)` unless the signal ends within `interval` of subscription (RAC's `-timeout:onScheduler:`).
    ///
    /// Values before the deadline pass through. On timeout the source is disposed.
    ///
    /// - Parameters:
    ///   - interval: The time allowed; zero or negative times out on the next turn of the scheduler.
    ///   - scheduler: Where the timer runs and the result delivers; nil for the subscription's home.
    ///
    /// Thread rule: safe from any thread.
    public func timeout(_ interval: Duration, on scheduler: Scheduler? = nil) -> Signal<Value> {
        timed(on: scheduler) { downstream, scheduler, subscription in
            let state = TimeoutState(downstream, scheduler: scheduler, subscription: subscription, interval: interval)
            state.start()
            return state
        }.debugNamed("[\(name)] -timeout: \(interval)")
    }

    /// Fails with `TimeoutError.idleTimeoutOperator(after: interval)` when `interval` passes without an event: after subscription, and after each value.
    ///
    /// Every value restarts the wait, where `timeout(_:on:)` is a deadline for the whole signal.
    /// On timeout the source is disposed. An interval that is not positive ends the signal at
    /// once with a `UVError` (`EINVAL`).
    ///
    /// RAC: none (`-timeout:onScheduler:` is the whole-signal deadline); Rx:
    /// `timeout` (RxSwift, RxJS: per value); Combine: `timeout(_:scheduler:)`.
    ///
    /// - Parameters:
    ///   - interval: The longest quiet time allowed; must be positive.
    ///   - scheduler: Where the timer runs and the result delivers; nil for the subscription's home.
    ///
    /// Thread rule: safe from any thread.
    public func timeout(idle interval: Duration, on scheduler: Scheduler? = nil) -> Signal<Value> {
        guard interval > .zero else {
            return .invalidArgument("idle timeout interval must be positive, got \(interval)", in: "Signal.timeout(idle:on:)")
        }
        return timed(on: scheduler) { downstream, scheduler, subscription in
            let state = IdleTimeoutState(downstream, scheduler: scheduler, subscription: subscription, interval: interval)
            state.start()
            return state
        }.debugNamed("[\(name)] -timeout: (idle) \(interval)")
    }

    /// A time operator over the state `make` returns. On the home it is fused (`lift`). On a scheduler
    /// given, the source gets a child subscription: its end must not dispose the events still hopping
    /// to the state's thread (the pending value, the completion).
    private func timed<Output>(
        on scheduler: Scheduler?,
        _ make: @escaping @Sendable (@escaping (Event<Output>) -> Void, Scheduler, Subscription) -> TimedState<Value, Output>
    ) -> Signal<Output> {
        guard let scheduler else {
            return lift { downstream, subscription in
                let state = make(downstream, subscription.home, subscription)
                return { state.receive($0) }
            }
        }
        return operatorSignal { downstream, subscription in
            let state = make(downstream, scheduler, subscription)
            self.attachAsChild(of: subscription) { state.receive($0) }
        }
    }
}

/// The shared part of the time operators: the scheduler, the one pending timer, the hop to the scheduler's thread.
///
/// Not the subscription's root by default: teardown (on the home thread) touches only `timer`,
/// a thread-safe `SerialDisposable`, so the state stays on the scheduler's thread. A state that
/// holds values until its timer fires calls `releaseAtTeardown()`.
class TimedState<Input, Output>: OperatorState<Output>, @unchecked Sendable {
    // `scheduler`, `subscription`, `interval` and `timer` are immutable references (the last two thread-safe);
    // everything subclasses add is touched only on `scheduler`'s thread.
    let scheduler: Scheduler
    package let subscription: Subscription
    let interval: Duration
    let timer = SerialDisposable()
    private(set) var armed = false

    init(_ downstream: @escaping (Event<Output>) -> Void, scheduler: Scheduler, subscription: Subscription, interval: Duration) {
        self.scheduler = scheduler
        self.subscription = subscription
        self.interval = interval
        super.init(downstream)
        subscription.add(timer)
        watchForShutdown()
    }

    /// Ends the operator with `EventLoopError.shutDown` if its scheduler is a loop that shuts down first.
    private func watchForShutdown() {
        guard let loop = scheduler.loopLifecycle else { return }
        let shutDown = loop.shutDownError
        // Runs on the loop's thread, the state's own. It holds the state strongly; the cycle through
        // the loop's observer list ends with the subscription (its token) or the loop's shutdown.
        let observer: @Sendable () -> Void = { [self] in
            guard !self.subscription.isDisposed else { return }
            self.finish(.error(shutDown))
        }
        guard let token = loop.addShutdownObserver(observer) else {
            // The loop is already shut down: nothing runs on it any more, so this thread may end the operator.
            finish(.error(shutDown))
            return
        }
        subscription.add(token)
    }

    /// Has the subscription's teardown release the downstream and what the state holds (`didFinish`),
    /// on the scheduler's thread: at once as the root when that is the home, else by a hop there.
    final func releaseAtTeardown() {
        if scheduler === subscription.home {
            subscription.attachRoot(self)
            return
        }
        let scheduler = self.scheduler
        subscription.add(ActionDisposable { [self] in
            _ = scheduler.schedule { self.releaseObserver(of: self.subscription) }
        })
    }

    /// Handles an event on the scheduler's thread, hopping there first if needed.
    final func receive(_ event: Event<Input>) {
        if scheduler.isCurrent {
            handle(event)
            return
        }
        let payload = UncheckedSendable(event)
        _ = scheduler.schedule { [self] in
            if !subscription.isDisposed { handle(payload.value) }
        }
    }

    func handle(_ event: Event<Input>) {}

    func timerFired() {}

    /// Starts the one timer.
    final func arm(after delay: Duration) {
        armed = true
        timer.inner = scheduler.schedule(after: delay) { [self] in
            armed = false
            if isDone || subscription.isDisposed { return }
            timerFired()
        }
    }

    final func disarm() {
        armed = false
        timer.inner = nil
    }

    override func didFinish() {
        disarm()
    }
}

/// `throttle`'s and `debounce`'s state: the pending value and when it becomes due.
private final class ThrottleState<Value>: TimedState<Value, Value>, @unchecked Sendable {
    // Scheduler thread only.
    private var pending: Value?
    private var due = SchedulerInstant(nanoseconds: 0)

    override func handle(_ event: Event<Value>) {
        switch event {
        case .next(let value):
            // One timer per quiet period: a newer value moves the deadline, and the timer re-arms
            // for the rest instead of being replaced.
            pending = value
            due = scheduler.now + interval
            if !armed { arm(after: interval) }
        case .error:
            pending = nil
            finish(event)
        case .completed:
            let last = pending
            pending = nil
            if let last { sendNext(last) }
            finish(.completed)
        }
    }

    override func timerFired() {
        let now = scheduler.now
        if now < due {
            arm(after: due - now)
            return
        }
        guard let value = pending else { return }
        pending = nil
        sendNext(value)
    }

    override func didFinish() {
        super.didFinish()
        pending = nil
    }
}

/// `delay`'s state: events waiting for their time, oldest first.
private final class DelayState<Value>: TimedState<Value, Value>, @unchecked Sendable {
    // Scheduler thread only.
    private struct Waiting {
        let due: SchedulerInstant
        let event: Event<Value>
    }
    private var waiting = RingBuffer<Waiting>()

    override func handle(_ event: Event<Value>) {
        if case .error = event {
            waiting.removeAll()
            finish(event)
            return
        }
        waiting.append(Waiting(due: scheduler.now + interval, event: event))
        if !armed { arm(after: interval) }
    }

    override func timerFired() {
        // The timer was set for the oldest event, so it is due; later ones may be too.
        guard let first = waiting.popFirst() else { return }
        forward(first.event)
        let now = scheduler.now
        while !isDone, let next = waiting.first, next.due <= now {
            _ = waiting.popFirst()
            forward(next.event)
        }
        if !isDone, let next = waiting.first { arm(after: next.due - now) }
    }

    override func didFinish() {
        super.didFinish()
        waiting.removeAll()
    }
}

/// `timeout`'s state: one timer started at subscription.
private final class TimeoutState<Value>: TimedState<Value, Value>, @unchecked Sendable {
    // Scheduler thread only (no state beyond the base class).

    package func start() {
        if scheduler.isCurrent {
            arm(after: interval)
        } else {
            _ = scheduler.schedule { [self] in if !subscription.isDisposed && !isDone { arm(after: interval) } }
        }
    }

    override func handle(_ event: Event<Value>) {
        forward(event)
    }

    override func timerFired() {
        finish(.error(TimeoutError.timeoutOperator(after: interval)))
    }
}

/// `timeout(idle:)`'s state: when the quiet time runs out.
private final class IdleTimeoutState<Value>: TimedState<Value, Value>, @unchecked Sendable {
    // Scheduler thread only.
    private var due = SchedulerInstant(nanoseconds: 0)

    package func start() {
        if scheduler.isCurrent {
            restart()
        } else {
            _ = scheduler.schedule { [self] in if !subscription.isDisposed && !isDone { restart() } }
        }
    }

    /// Moves the deadline; one timer per quiet period, re-armed for the rest when it fires early.
    private func restart() {
        due = scheduler.now + interval
        if !armed { arm(after: interval) }
    }

    override func handle(_ event: Event<Value>) {
        if case .next = event, !isDone { restart() }
        forward(event)
    }

    override func timerFired() {
        let now = scheduler.now
        if now < due {
            arm(after: due - now)
            return
        }
        finish(.error(TimeoutError.idleTimeoutOperator(after: interval)))
    }
}
