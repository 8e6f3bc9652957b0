extension Signal {
    /// Subscribes with callbacks for each kind of event.
    ///
    /// The home is the calling thread's loop (or current test scheduler), else `EventLoop.shared`.
    /// Callbacks run on the home thread; after `error` or `completed`, or once disposed, none runs.
    ///
    /// The callbacks are `sending`, so the compiler rejects one touching the caller's isolated state
    /// or a non-Sendable object it keeps using: keep such state on the loop (`LoopBound`), hop back
    /// (`Task { @MainActor in ... }`), or read `values` in a task (docs/guides/async.md).
    ///
    /// - Parameters:
    ///   - next: Called with each value.
    ///   - error: Called once if the signal fails.
    ///   - completed: Called once if the signal completes.
    /// - Returns: The subscription; dispose it to stop.
    ///
    /// Thread rule: safe from any thread.
    @inlinable
    @discardableResult
    public func subscribe(
        next: sending ((Value) -> Void)? = nil,
        error: sending ((any Error) -> Void)? = nil,
        completed: sending (() -> Void)? = nil
    ) -> any Disposable {
        return subscribeSink(next: next, error: error, completed: completed)
    }

    /// `subscribe(next:error:completed:)` with the callbacks handed over; returns the subscription,
    /// whose `flowControl` library consumers take.
    @inlinable
    package func subscribeSink(
        next: consuming ((Value) -> Void)?, error: consuming ((any Error) -> Void)?, completed: consuming (() -> Void)?
    ) -> SinkSubscription<Value> {
        let sink = SinkSubscription(next: next, error: error, completed: completed)
        // Logging is out of line, so this body stays small enough to inline.
        if SignalLogging.isActive {
            startLogging(sink)
        } else {
            start(sink: sink)
        }
        return sink
    }

    /// Subscribes to values only, delivered on the subscription's home thread.
    ///
    /// Thread rule: safe from any thread.
    @inlinable
    @discardableResult
    public func subscribeNext(_ next: sending @escaping (Value) -> Void) -> any Disposable {
        subscribe(next: next)
    }

    /// Subscribes to the error only.
    ///
    /// Thread rule: safe from any thread.
    @discardableResult
    public func subscribeError(_ error: sending @escaping (any Error) -> Void) -> any Disposable {
        subscribe(error: error)
    }

    /// Subscribes to completion only.
    ///
    /// Thread rule: safe from any thread.
    @discardableResult
    public func subscribeCompleted(_ completed: sending @escaping () -> Void) -> any Disposable {
        subscribe(completed: completed)
    }

    /// Subscribes with one callback for every event, on the subscription's home thread.
    ///
    /// Thread rule: safe from any thread.
    @discardableResult
    public func observe(_ observer: sending @escaping (Event<Value>) -> Void) -> any Disposable {
        subscribeSink(next: { observer(.next($0)) }, error: { observer(.error($0)) }, completed: { observer(.completed) })
    }

    /// Forwards every event to another signal's subscriber (RAC's `subscribe:`), for writing signals
    /// out of others; the returned disposable is torn down with `subscriber`'s subscription.
    ///
    /// Thread rule: safe from any thread.
    @discardableResult
    public func subscribe(_ subscriber: Subscriber<Value>) -> any Disposable {
        let subscription = Subscription(home: Subscription.homeForCallingThread)
        subscriber.disposable.add(subscription)
        start(ClosureObserver(event: { subscriber.send($0) }), on: subscription)
        return subscription
    }
}
