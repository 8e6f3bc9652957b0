
extension Signal {
    /// Subscribes with plain callbacks for the async bridges (each captures only its own box or
    /// channel, so none allocates a context per await).
    func subscribeForValues(
        next: @escaping (Value) -> Void, error: @escaping (any Error) -> Void, completed: @escaping () -> Void
    ) -> Subscription {
        let sink = SinkSubscription(next: next, error: error, completed: completed)
        start(sink: sink)
        return sink
    }

    private func subscribe<State>(_ box: AwaitBox<State, Value>) -> Subscription {
        subscribeForValues(next: { box.receive($0) }, error: { box.finish(.failure($0)) }, completed: { box.finish(.success(())) })
    }

    /// Waits for the signal to end and hands over what `reduce` kept; the box's first `finish`
    /// resumes the continuation, exactly once.
    private nonisolated(nonsending) func awaitTerminal<State>(
        _ initial: State,
        stopEarly: Bool = false,
        _ reduce: @escaping (inout State, Value) -> Void
    ) async throws -> State {
        let box = AwaitBox<State, Value>(initial, stopEarly: stopEarly, reduce)
        // The operation closure is nonisolated: without the caller's isolation named, the subscription
        // below would be made on the global executor, away from a loop-isolated caller's loop.
        let actor = #isolation
        return try await withTaskCancellationHandler {
            try await withBridgeContinuation(isolation: actor) { (continuation: BridgeContinuation<State>) in
                // Cancelled before it got here: start nothing (a cancelled `FileSystem.createDirectory`
                // must not make the directory).
                guard box.setContinuation(continuation) else { return }
                box.setSubscription(subscribe(box))
            }
        } onCancel: {
            box.finish(.failure(CancellationError()))
        }
    }

    /// The first value, or nil if the signal completes without one (RAC's `-first`); disposes at the first value.
    ///
    /// - Throws: The signal's error, or `CancellationError` if the task is cancelled.
    ///
    /// Thread rule: safe from any task.
    public nonisolated(nonsending) func first() async throws -> Value? where Value: Sendable {
        try await awaitTerminal(Optional<Value>.none, stopEarly: true) { first, value in
            if first == nil { first = value }
        }
    }

    /// The last value, or nil if the signal completes without one.
    ///
    /// - Throws: The signal's error, or `CancellationError` if the task is cancelled.
    ///
    /// Thread rule: safe from any task.
    public nonisolated(nonsending) func last() async throws -> Value? where Value: Sendable {
        try await awaitTerminal(Optional<Value>.none) { last, value in last = value }
    }

    /// Every value, once the signal completed (the `collect()` operator needs an explicit `Signal<[Value]>` type here).
    ///
    /// - Throws: The signal's error, or `CancellationError` if the task is cancelled.
    ///
    /// Thread rule: safe from any task.
    public nonisolated(nonsending) func collect() async throws -> [Value] where Value: Sendable {
        try await awaitTerminal([Value]()) { values, value in values.append(value) }
    }

    /// Waits until the signal ends, ignoring its values.
    ///
    /// - Returns: The signal's error, or nil if it completed.
    ///
    /// Thread rule: safe from any task.
    @discardableResult
    public nonisolated(nonsending) func waitUntilCompleted() async -> (any Error)? {
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
    /// - Throws: The signal's error; `TimeoutError`; `EventLoopError.calledOnLoopThread` on a loop thread.
    ///
    /// On the thread driving a `Simulation` it runs the simulation (the timeout in virtual time)
    /// and throws an error naming the wait if the simulation goes idle before the signal ends.
    ///
    /// Thread rule: any thread except a loop thread.
    public func first(timeout: Duration? = nil) throws -> Value? where Value: Sendable {
        try block(operation: "first()", timeout: timeout, Optional<Value>.none, stopEarly: true) { first, value in
            if first == nil { first = value }
        }
    }

    /// Blocks the calling thread until the signal ends; returns its last value, or nil.
    ///
    /// - Parameter timeout: The longest wait; nil waits forever.
    /// - Throws: The signal's error; `TimeoutError`; `EventLoopError.calledOnLoopThread` on a loop thread.
    ///
    /// On the thread driving a `Simulation` it runs the simulation (the timeout in virtual time)
    /// and throws an error naming the wait if the simulation goes idle before the signal ends.
    ///
    /// Thread rule: any thread except a loop thread.
    public func last(timeout: Duration? = nil) throws -> Value? where Value: Sendable {
        try block(operation: "last()", timeout: timeout, Optional<Value>.none) { last, value in last = value }
    }

    /// Blocks the calling thread until the signal ends (RAC's `-waitUntilCompleted:`).
    ///
    /// - Parameter timeout: The longest wait; nil waits forever.
    /// - Throws: The signal's error; `TimeoutError`; `EventLoopError.calledOnLoopThread` on a loop thread.
    ///
    /// On the thread driving a `Simulation` it runs the simulation (the timeout in virtual time)
    /// and throws an error naming the wait if the simulation goes idle before the signal ends.
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
        if let driver = SimulationDrivers.current {
            // Nothing but this thread runs a simulation's loops: drive them instead of waiting.
            try driver.driveBlocking(operation: operation, timeout: timeout,
                                     start: { box.setSubscription(subscribe(box)) },
                                     isDone: { box.isFinished },
                                     abandon: { box.finish(.failure(CancellationError())) })
            return try box.result()
        }
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

/// The deprecated name of `TimeoutError`: `SignalWaitError.timedOut(operation:after:)` builds and
/// matches one; read its `operation` and `timeout` instead of binding the case's values.
///
/// Thread rule: a value type; safe from any thread.
@available(*, deprecated, renamed: "TimeoutError")
public typealias SignalWaitError = TimeoutError

/// What one await (or blocking wait) builds up from the values, with its one-shot completion.
final class AwaitBox<State, Value>: @unchecked Sendable {
    // Sendable: `lock` (a spin lock) guards everything; the continuation and `onFinish` are called
    // after unlocking. `reduce` and `stopEarly` are immutable.
    private let lock = SpinLock()
    @exclusivity(unchecked) private var state: State
    @exclusivity(unchecked) private var outcome: Result<Void, any Error>?
    @exclusivity(unchecked) private var continuation: BridgeContinuation<State>?
    @exclusivity(unchecked) private var subscription: Subscription?
    var onFinish: (() -> Void)?
    private let reduce: (inout State, Value) -> Void
    /// Whether the first value ends the wait.
    private let stopEarly: Bool

    init(_ initial: State, stopEarly: Bool, _ reduce: @escaping (inout State, Value) -> Void) {
        state = initial
        self.stopEarly = stopEarly
        self.reduce = reduce
    }

    func receive(_ value: Value) {
        lock.withLock { if outcome == nil { reduce(&state, value) } }
        if stopEarly { finish(.success(())) }
    }

    /// Keeps the continuation, or resumes it at once and returns false if the wait is over already.
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
        // `dispose()` never waits for a callback in progress (this may run in the cancellation
        // handler, under the task's lock, which a delivery resuming the task needs).
        subscription?.dispose()
        if let continuation { resume(continuation, result) }
        onFinish?()
    }

    /// Whether the wait is over (a value that stops it early, an error or the completion came).
    var isFinished: Bool { lock.withLock { outcome != nil } }

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
