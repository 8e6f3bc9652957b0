extension Signal {
    /// Subscribes with callbacks for each kind of event.
    ///
    /// The home is the calling thread's loop (or current test scheduler), else `EventLoop.shared`,
    /// where `didSubscribe` runs shortly after this returns. Callbacks run on the home thread;
    /// after `error` or `completed`, or once disposed, none runs again.
    ///
    /// The callbacks are `sending` (handed over to the home thread), so the compiler rejects one
    /// that touches the caller's isolated state or captures a non-Sendable object the caller keeps
    /// using. Keep such state on the loop (`LoopBound`), hop back (`Task { @MainActor in ... }`),
    /// or read `values` in a task (docs/guides/async.md, "Callbacks and isolation").
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

    /// `subscribe(next:error:completed:)` once its callbacks were handed over. They are consumed,
    /// since the sink stores them. Returns the `Subscription` itself, for library consumers that
    /// take the source's `flowControl` from it.
    @inlinable
    package func subscribeSink(
        next: consuming ((Value) -> Void)?, error: consuming ((any Error) -> Void)?, completed: consuming (() -> Void)?
    ) -> Subscription {
        let subscription = Subscription(homeForCallingThread: ())
        let sink = Sink(next: next, error: error, completed: completed, subscription: subscription)
        // Event logging is out of line, so this body stays small enough to inline.
        if SignalLogging.isActive {
            startLogging(sink, on: subscription)
        } else {
            start(sink, on: subscription)
        }
        return subscription
    }

    /// Subscribes to values only.
    ///
    /// - Parameter next: Called with each value on the subscription's home thread.
    /// - Returns: The subscription; dispose it to stop.
    ///
    /// Thread rule: safe from any thread.
    @inlinable
    @discardableResult
    public func subscribeNext(_ next: sending @escaping (Value) -> Void) -> any Disposable {
        subscribe(next: next)
    }

    /// Subscribes to the error only.
    ///
    /// - Parameter error: Called once if the signal fails.
    /// - Returns: The subscription; dispose it to stop.
    ///
    /// Thread rule: safe from any thread.
    @discardableResult
    public func subscribeError(_ error: sending @escaping (any Error) -> Void) -> any Disposable {
        subscribe(error: error)
    }

    /// Subscribes to completion only.
    ///
    /// - Parameter completed: Called once if the signal completes.
    /// - Returns: The subscription; dispose it to stop.
    ///
    /// Thread rule: safe from any thread.
    @discardableResult
    public func subscribeCompleted(_ completed: sending @escaping () -> Void) -> any Disposable {
        subscribe(completed: completed)
    }

    /// Subscribes with one callback for every event.
    ///
    /// - Parameter observer: Called with each event on the subscription's home thread.
    /// - Returns: The subscription; dispose it to stop.
    ///
    /// Thread rule: safe from any thread.
    @discardableResult
    public func observe(_ observer: sending @escaping (Event<Value>) -> Void) -> any Disposable {
        subscribeSink(next: { observer(.next($0)) }, error: { observer(.error($0)) }, completed: { observer(.completed) })
    }

    /// Forwards every event of this signal to another signal's subscriber (RAC's `subscribe:`).
    ///
    /// For writing signals out of others: `Signal { subscriber in other.subscribe(subscriber) }`.
    /// The returned disposable is added to `subscriber`'s subscription, and torn down with it.
    ///
    /// - Parameter subscriber: The subscriber to forward to.
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
