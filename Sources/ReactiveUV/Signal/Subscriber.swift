import Synchronization

/// The object a signal's `didSubscribe` sends events to: RAC's pass-through subscriber.
///
/// It is the gate of the seeds' subscribe path:
/// - after the subscription is disposed, or after `sendError`/`sendCompleted`,
///   every event is dropped;
/// - events always reach the subscriber on the subscription's home thread:
///   a send from another thread is hopped there through the home loop's
///   queue, in the order that thread sent them, so events for one subscriber
///   are never concurrent;
/// - a send made on the home thread has been delivered when it returns
///   (synchronous, as in RAC). A subscriber that makes its own source send
///   again (re-entrancy) gets the new event nested inside the current one,
///   depth first.
///
/// Thread rule: `send*` and `isDisposed` are safe from any thread.
public final class Subscriber<Value>: ObserverReleasing, @unchecked Sendable {
    // `observer` and `terminated` are touched only on `subscription.home`'s thread
    // (sends from other threads are hopped there first); `subscription` is immutable.
    @usableFromInline @exclusivity(unchecked) var observer: ((Event<Value>) -> Void)?
    @usableFromInline @exclusivity(unchecked) var terminated = false
    @usableFromInline let subscription: Subscription
    /// `subscription.home`'s identity, compared with the thread's current scheduler without touching `home`
    /// (the subscription keeps `home` alive, so the pointer stays valid).
    @usableFromInline let homeIdentity: UnsafeMutableRawPointer
    /// The flow control the source registered, if any (set once, atomically): hops count against it.
    let sourceFlowControl = AtomicLazyReference<FlowControl>()

    @usableFromInline
    init(observer: @escaping (Event<Value>) -> Void, subscription: Subscription) {
        self.observer = observer
        self.subscription = subscription
        self.homeIdentity = Unmanaged.passUnretained(subscription.home).toOpaque()
    }

    /// Sends a value.
    ///
    /// - Parameter value: The value.
    ///
    /// Thread rule: safe from any thread.
    @inlinable
    public func sendNext(_ value: Value) {
        send(.next(value))
    }

    /// Sends an error, ending the subscription.
    ///
    /// - Parameter error: The error.
    ///
    /// Thread rule: safe from any thread.
    @inlinable
    public func sendError(_ error: any Error) {
        send(.error(error))
    }

    /// Sends completion, ending the subscription.
    ///
    /// Thread rule: safe from any thread.
    @inlinable
    public func sendCompleted() {
        send(.completed)
    }

    /// Sends an event.
    ///
    /// - Parameter event: The event.
    ///
    /// Thread rule: safe from any thread.
    @inlinable
    public func send(_ event: Event<Value>) {
        if ThreadLocals.currentScheduler.value == homeIdentity {
            deliver(event)
        } else {
            hop(event)
        }
    }

    /// Delivers on the home thread through the gate.
    @inlinable
    func deliver(_ event: Event<Value>) {
        guard !terminated, !subscription.isDisposed, let observer else { return }
        if event.isTerminating {
            terminated = true
            observer(event)
            subscription.dispose()
        } else {
            observer(event)
        }
    }

    /// `sendNext` from a source that knows it runs on the home thread (it compared its loop
    /// with `homeIdentity` once, when it was subscribed): the gate without the thread check.
    func deliverNext(_ value: Value) {
        deliver(.next(value))
    }

    @usableFromInline
    func hop(_ event: Event<Value>) {
        if subscription.isDisposed { return }
        // Two boxes, not a tuple in one: see UncheckedSendable.
        let target = UncheckedSendable(self), payload = UncheckedSendable(event)
        if let control = sourceFlowControl.load() {
            control.willQueueValue()
            // A home that is gone drops the work, and the count with it: nothing is left to pause for.
            _ = subscription.home.schedule {
                target.value.deliver(payload.value)
                control.didDeliverQueuedValue()
            }
            return
        }
        _ = subscription.home.schedule { target.value.deliver(payload.value) }
    }

    /// Whether the subscription is disposed (or has ended): a long-running
    /// producer can stop early when this turns true.
    ///
    /// Thread rule: safe from any thread.
    @inlinable
    public var isDisposed: Bool { subscription.isDisposed }

    /// The subscription's compound disposable: add what should be torn down with it.
    ///
    /// RAC's `didSubscribeWithDisposable:`. Teardown runs on the home thread.
    ///
    /// Thread rule: safe from any thread.
    public var disposable: CompoundDisposable { subscription }

    /// The scheduler whose thread this subscriber's events are delivered on.
    ///
    /// Thread rule: safe from any thread.
    public var homeScheduler: Scheduler { subscription.home }

    func releaseObserver() {
        observer = nil
    }
}
