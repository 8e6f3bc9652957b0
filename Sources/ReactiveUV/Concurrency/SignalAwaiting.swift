
extension Signal {
    /// Subscribes with plain callbacks for the async bridges; returns the subscription.
    ///
    /// The callbacks go to the sink as they come: each bridge's callbacks capture only its own box or
    /// channel, so none allocates a context per await.
    func subscribeForValues(
        next: @escaping (Value) -> Void, error: @escaping (any Error) -> Void, completed: @escaping () -> Void
    ) -> Subscription {
        let subscription = Subscription(home: Subscription.homeForCallingThread)
        let sink = Sink(next: next, error: error, completed: completed, subscription: subscription)
        start(sink, on: subscription)
        return subscription
    }

    /// Subscribes `box`: its `receive`, its end.
    private func subscribe<State>(_ box: AwaitBox<State, Value>) -> Subscription {
        subscribeForValues(next: { box.receive($0) }, error: { box.finish(.failure($0)) }, completed: { box.finish(.success(())) })
    }

    /// Waits for the signal to end and hands over what `reduce` kept.
    ///
    /// The continuation is resumed exactly once, by the box's first `finish` (the outcome is set
    /// under its lock), so release builds need no checked continuation (`BridgeContinuation`).
    private func awaitTerminal<State>(
        _ initial: State,
        stopEarly: Bool = false,
        _ reduce: @escaping (inout State, Value) -> Void
    ) async throws -> State {
        let box = AwaitBox<State, Value>(initial, stopEarly: stopEarly, reduce)
        return try await withTaskCancellationHandler {
            try await withBridgeContinuation { (continuation: BridgeContinuation<State>) in
                // A task cancelled before it got here has its outcome already: start nothing (a
                // cancelled `FileSystem.createDirectory` must not make the directory).
                guard box.setContinuation(continuation) else { return }
                box.setSubscription(subscribe(box))
            }
        } onCancel: {
            box.finish(.failure(CancellationError()))
        }
    }

    /// The first value, or nil if the signal completes without one (RAC's `-first`).
    ///
    /// Subscribes, and disposes as soon as the first value arrived.
    ///
    /// - Returns: The first value, or nil.
    /// - Throws: The signal's error, or `CancellationError` if the task is cancelled.
    ///
    /// Thread rule: safe from any task.
    public func first() async throws -> Value? where Value: Sendable {
        try await awaitTerminal(Optional<Value>.none, stopEarly: true) { first, value in
            if first == nil { first = value }
        }
    }

    /// The last value, or nil if the signal completes without one.
    ///
    /// - Returns: The last value, or nil.
    /// - Throws: The signal's error, or `CancellationError` if the task is cancelled.
    ///
    /// Thread rule: safe from any task.
    public func last() async throws -> Value? where Value: Sendable {
        try await awaitTerminal(Optional<Value>.none) { last, value in last = value }
    }

    /// Every value, once the signal completed.
    ///
    /// In an async context this async form is chosen; the `collect()` operator
    /// (a `Signal<[Value]>`) is still there with an explicit type.
    ///
    /// - Returns: The values, in order.
    /// - Throws: The signal's error, or `CancellationError` if the task is cancelled.
    ///
    /// Thread rule: safe from any task.
    public func collect() async throws -> [Value] where Value: Sendable {
        try await awaitTerminal([Value]()) { values, value in values.append(value) }
    }

    /// Waits until the signal ends, ignoring its values.
    ///
    /// - Returns: The signal's error, or nil if it completed.
    ///
    /// Thread rule: safe from any task.
    @discardableResult
    public func waitUntilCompleted() async -> (any Error)? {
        do {
            _ = try await awaitTerminal(()) { _, _ in }
            return nil
        } catch {
            return error
        }
    }

    // MARK: - Blocking (RAC's -first, -waitUntilCompleted:)

    /// Blocks the calling thread until the first value (RAC's blocking `-first`).
    ///
    /// - Parameter timeout: The longest wait; nil waits forever.
    /// - Returns: The first value, or nil if the signal completed without one.
    /// - Throws: The signal's error; `TimeoutError` (its `operation` names the helper); `EventLoopError.calledOnLoopThread`
    ///   on a loop thread, where waiting would deadlock.
    ///
    /// Thread rule: any thread except a loop thread.
    public func first(timeout: Duration? = nil) throws -> Value? where Value: Sendable {
        try block(operation: "first()", timeout: timeout, Optional<Value>.none, stopEarly: true) { first, value in
            if first == nil { first = value }
        }
    }

    /// Blocks the calling thread until the signal ends; returns its last value.
    ///
    /// - Parameter timeout: The longest wait; nil waits forever.
    /// - Returns: The last value, or nil if it completed without one.
    /// - Throws: The signal's error; `TimeoutError` (its `operation` names the helper); `EventLoopError.calledOnLoopThread` on a loop thread.
    ///
    /// Thread rule: any thread except a loop thread.
    public func last(timeout: Duration? = nil) throws -> Value? where Value: Sendable {
        try block(operation: "last()", timeout: timeout, Optional<Value>.none) { last, value in last = value }
    }

    /// Blocks the calling thread until the signal ends (RAC's `-waitUntilCompleted:`).
    ///
    /// - Parameter timeout: The longest wait; nil waits forever.
    /// - Throws: The signal's error; `TimeoutError` (its `operation` names the helper); `EventLoopError.calledOnLoopThread` on a loop thread.
    ///
    /// Thread rule: any thread except a loop thread.
    public func waitUntilCompleted(timeout: Duration? = nil) throws {
        try block(operation: "waitUntilCompleted()", timeout: timeout, ()) { _, _ in }
    }

    private func block<State>(
        operation: String,
        timeout: Duration?,
        _ initial: State,
        stopEarly: Bool = false,
        _ reduce: @escaping (inout State, Value) -> Void
    ) throws -> State {
        if let loop = EventLoop.current {
            throw EventLoopError.calledOnLoopThread(operation: operation, loop: loop.name)
        }
        let box = AwaitBox<State, Value>(initial, stopEarly: stopEarly, reduce)
        let done = Latch()
        box.onFinish = { done.open() }
        let subscription = subscribe(box)
        box.setSubscription(subscription)
        if let timeout {
            if !done.wait(until: SchedulerInstant.now + timeout) {
                subscription.dispose()
                throw TimeoutError(operation: operation, after: timeout)
            }
        } else {
            done.wait()
        }
        return try box.result()
    }
}

/// The blocking helpers' timeout error under its old name; it is `TimeoutError` now.
///
/// `SignalWaitError.timedOut(operation: "first()", after: t)` still builds
/// (and, through `==` or a `catch` pattern, matches) what `first(timeout:)`
/// throws; a `case .timedOut(let operation, let after)` binding pattern no
/// longer compiles: read `operation` and `timeout`.
///
/// Thread rule: a value type; safe from any thread.
@available(*, deprecated, renamed: "TimeoutError")
public typealias SignalWaitError = TimeoutError

/// The state one await (or blocking wait) builds up from the values, with its one-shot completion.
final class AwaitBox<State, Value>: @unchecked Sendable {
    // Everything is protected by `lock` (a spin lock); the continuation and `onFinish` are called after
    // unlocking. `reduce` and `stopEarly` are immutable.
    private let lock = SpinLock()
    @exclusivity(unchecked) private var state: State
    @exclusivity(unchecked) private var outcome: Result<Void, any Error>?
    @exclusivity(unchecked) private var continuation: BridgeContinuation<State>?
    @exclusivity(unchecked) private var subscription: Subscription?
    var onFinish: (() -> Void)?
    /// Folds a value into `state`.
    private let reduce: (inout State, Value) -> Void
    /// Whether the first value ends the wait.
    private let stopEarly: Bool

    init(_ initial: State, stopEarly: Bool, _ reduce: @escaping (inout State, Value) -> Void) {
        state = initial
        self.stopEarly = stopEarly
        self.reduce = reduce
    }

    /// A value from the subscription: folded in unless the wait is over.
    func receive(_ value: Value) {
        lock.withLock { if outcome == nil { reduce(&state, value) } }
        if stopEarly { finish(.success(())) }
    }

    /// Keeps the continuation to resume, or resumes it at once if the wait is over already.
    ///
    /// - Returns: Whether the wait goes on (false: it was over, and the continuation is resumed).
    func setContinuation(_ continuation: BridgeContinuation<State>) -> Bool {
        let finished: Result<Void, any Error>? = lock.withLock {
            if outcome == nil { self.continuation = continuation }
            return outcome
        }
        guard let finished else { return true }
        resume(continuation, finished)
        return false
    }

    func setSubscription(_ subscription: Subscription) {
        let finished = lock.withLock { () -> Bool in
            self.subscription = subscription
            return outcome != nil
        }
        if finished { subscription.dispose() }
    }

    func finish(_ result: Result<Void, any Error>) {
        let (continuation, subscription, onFinish): (BridgeContinuation<State>?, Subscription?, (() -> Void)?) = lock.withLock {
            if outcome != nil { return (nil, nil, nil) }
            outcome = result
            let taken = self.continuation
            self.continuation = nil
            return (taken, self.subscription, self.onFinish)
        }
        // `dispose()` never waits for a callback in progress (this may run in the task's
        // cancellation handler, under the task's lock, which a delivery resuming the task needs).
        // The box ignores whatever arrives after its outcome.
        subscription?.dispose()
        if let continuation { resume(continuation, result) }
        onFinish?()
    }

    func result() throws -> State {
        try lock.withLock {
            if case .failure(let error) = outcome { throw error }
            return state
        }
    }

    private func resume(_ continuation: BridgeContinuation<State>, _ result: Result<Void, any Error>) {
        switch result {
        case .success: continuation.resume(returning: lock.withLock { state })
        case .failure(let error): continuation.resume(throwing: error)
        }
    }
}
