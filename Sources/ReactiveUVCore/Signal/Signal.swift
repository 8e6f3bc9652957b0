import Synchronization

/// A stream of values over time that ends with an error or completion: RAC's `RACSignal`.
///
/// Cold: `didSubscribe` runs once per subscriber, when it subscribes, through
/// `Scheduler.subscription`: at once on a loop thread, else on
/// `EventLoop.shared`. The subscription belongs to that loop (its home);
/// every event reaches the subscriber on the home thread, never two at once.
/// Disposing the subscription stops delivery and tears down everything it
/// created.
///
/// Operators that transform one signal (`map`, `filter`, `scan`, ...) are
/// fused: subscribing to a chain makes one subscription and one chain of
/// direct calls, with no lock and no allocation per value.
///
/// Closures given to a signal run on the subscription's home thread, not in
/// the caller's isolation: operator closures and `didSubscribe` are
/// `@Sendable` (two subscriptions may run them on two loops at once), and
/// `subscribe`'s callbacks are `sending` (handed over to the home thread).
/// The values a signal sends need not be `Sendable`; the operators that hand
/// them to another thread (`deliver(on:)`, `subscribe(on:)`) require it.
///
/// Thread rule: subscribing and operators are safe from any thread.
public class Signal<Value>: @unchecked Sendable {
    // `didSubscribe` is immutable; `debugName` is protected by `nameLock`.
    @usableFromInline let didSubscribe: (@Sendable (Subscriber<Value>) -> (any Disposable)?)?
    private let nameLock = SpinLock()
    @exclusivity(unchecked) private var debugName: String?

    /// Creates a cold signal that runs `didSubscribe` for each subscriber.
    ///
    /// Send events to the subscriber (from any thread), and return a
    /// disposable that tears down what you set up (or nil). It is disposed when
    /// the subscriber disposes or the signal ends.
    ///
    /// - Parameter didSubscribe: Called once per subscription, on its home thread; `@Sendable`
    ///   because subscriptions on several loops may run it at once.
    /// - Returns: The signal.
    ///
    /// Thread rule: safe from any thread.
    public init(_ didSubscribe: @escaping @Sendable (Subscriber<Value>) -> (any Disposable)?) {
        self.didSubscribe = didSubscribe
        if DebugSignals.isEnabled { debugName = "+createSignal:" }
    }

    /// For subclasses, which override `attach` (`SourceSignal`, the operators' signals).
    @usableFromInline
    init() {
        self.didSubscribe = nil
    }

    /// The debug name (RAC's `name`); empty unless set, or unless debug naming
    /// is on (`REACTIVEUV_DEBUG_SIGNALS=1`), in which case operators name their results.
    ///
    /// Thread rule: safe from any thread.
    public var name: String {
        get { nameLock.withLock { debugName } ?? "" }
        set { nameLock.withLock { debugName = newValue } }
    }

    /// Sets the debug name and returns the signal, for chaining.
    ///
    /// - Parameter name: The name.
    /// - Returns: `self`.
    ///
    /// Thread rule: safe from any thread.
    @discardableResult
    public func named(_ name: String) -> Self {
        self.name = name
        return self
    }

    /// Names the signal only when debug naming is on, so the string is never built otherwise.
    /// Final and inlinable: off, it is one flag test where a signal is made, not a call.
    @inlinable
    @discardableResult
    package final func debugNamed(_ name: @autoclosure () -> String) -> Self {
        if DebugSignals.isEnabled { self.name = name() }
        return self
    }

    /// Connects `observer` to this signal inside `subscription`: the one way in. Home thread only.
    ///
    /// The base signal puts a gate (`Subscriber`) in front of the observer and
    /// runs `didSubscribe` with it; subjects register such a gate; fused and
    /// lifted signals attach their operator's observer upstream, in the same
    /// subscription; operators with several inputs run their body.
    @usableFromInline
    package func attach(_ observer: Observer<Value>, to subscription: Subscription) {
        let subscriber = Subscriber(observer: observer, subscription: subscription)
        subscription.attachRoot(subscriber)
        // A subscription disposed before it attached (a child made after its parent ended, a
        // dispose from another thread that won the race) starts nothing, as a queued attach would not.
        if let didSubscribe, !subscription.isDisposed {
            subscription.add(didSubscribe(subscriber))
        }
    }

    /// Attaches `observer` on `subscription`'s home: now if on its thread, else queued there.
    @inlinable
    package final func start(_ observer: Observer<Value>, on subscription: Subscription) {
        if subscription.home.isCurrent {
            attach(observer, to: subscription)
        } else {
            startElsewhere(observer, on: subscription)
        }
    }

    /// The off-home path, kept out of `start` so the common path never builds `PendingAttach<Value>`'s metadata.
    @usableFromInline
    @inline(never)
    final func startElsewhere(_ observer: Observer<Value>, on subscription: Subscription) {
        let pending = PendingAttach(signal: self, observer: observer, subscription: subscription)
        let scheduled = subscription.home.schedule { pending.run() }
        if let scheduled {
            subscription.add(scheduled)
        } else {
            // A loop that could not start says so; any other refusing home has shut down.
            observer.receive(.error(subscription.home.loopLifecycle?.refusalError
                ?? Runtime.provider.shutDown(subscription.home.schedulerDescription)))
        }
    }

    /// `fuse` for an operator that sends many values out of one upstream event, as a burst: its
    /// transform is also given the subscription's own sink when that is the downstream (nil
    /// otherwise). Inside a delivery the operator entered with `subscription.enterDelivery()`, on
    /// the thread it runs on, it may send values with `sink.handleNextInBurst` (see there).
    ///
    /// - Parameter transform: Makes the upstream observer from the downstream's closures and sink.
    /// - Returns: The derived signal.
    @inlinable
    func fuseBursting<U>(
        _ transform: @escaping @Sendable (
            _ downstream: @escaping (Event<U>) -> Void, _ downstreamNext: ((U) -> Void)?, _ sink: Sink<U>?,
            _ subscription: Subscription
        ) -> ClosureObserver<Value>
    ) -> Signal<U> {
        BurstFusedSignal(upstream: self, transform: transform)
    }

    /// A signal whose subscribers attach `transform(observer)` to this signal, in the same subscription.
    ///
    /// The building block of fused operators: `transform` runs once per
    /// subscription on its home thread and returns the observer this signal
    /// will feed, which forwards (some of) its events to `observer`.
    ///
    /// - Parameter transform: Makes the upstream observer from the downstream one.
    /// - Returns: The derived signal.
    @inlinable
    func lift<U>(
        _ transform: @escaping @Sendable (_ downstream: @escaping (Event<U>) -> Void, _ subscription: Subscription) -> (Event<Value>) -> Void
    ) -> Signal<U> {
        LiftedSignal(upstream: self, transform: transform)
    }

    /// `lift` for operators that also pass values along as plain values (the value shortcut).
    ///
    /// `transform` runs once per subscription on its home thread with the
    /// downstream's closure and, when the downstream has one, its value
    /// shortcut; it returns the operator's `ClosureObserver`, with a value
    /// shortcut of its own when it was given one. The two closures share the
    /// operator's state and must treat a value alike.
    ///
    /// - Parameter transform: Makes the upstream observer from the downstream's closures.
    /// - Returns: The derived signal.
    @inlinable
    func fuse<U>(
        _ transform: @escaping @Sendable (
            _ downstream: @escaping (Event<U>) -> Void, _ downstreamNext: ((U) -> Void)?, _ subscription: Subscription
        ) -> ClosureObserver<Value>
    ) -> Signal<U> {
        FusedSignal(upstream: self, transform: transform)
    }
}

/// A subscription waiting to be attached on its home thread.
///
/// A class rather than a tuple in a generic box: Swift 6.3.1 over-releases a
/// class reference taken out of a generic struct holding a tuple with a
/// closure, when the struct is captured by an escaping closure (and its
/// optimizer crashes on the same code). See `UncheckedSendable`.
@usableFromInline
final class PendingAttach<Value>: @unchecked Sendable {
    // Created on the subscribing thread, then used only on the home thread (handed over through the home's queue).
    let signal: Signal<Value>
    let observer: Observer<Value>
    package let subscription: Subscription

    init(signal: Signal<Value>, observer: Observer<Value>, subscription: Subscription) {
        self.signal = signal
        self.observer = observer
        self.subscription = subscription
    }

    func run() {
        if !subscription.isDisposed { signal.attach(observer, to: subscription) }
    }
}

/// A signal derived from another by transforming its observer (a fused operator).
@usableFromInline
final class LiftedSignal<Upstream, Value>: Signal<Value>, @unchecked Sendable {
    // Both stored properties are immutable.
    @usableFromInline let upstream: Signal<Upstream>
    @usableFromInline let transform: @Sendable (@escaping (Event<Value>) -> Void, Subscription) -> (Event<Upstream>) -> Void

    @inlinable
    init(
        upstream: Signal<Upstream>,
        transform: @escaping @Sendable (@escaping (Event<Value>) -> Void, Subscription) -> (Event<Upstream>) -> Void
    ) {
        self.upstream = upstream
        self.transform = transform
        super.init()
    }

    @usableFromInline
    package override func attach(_ observer: Observer<Value>, to subscription: Subscription) {
        upstream.attach(ClosureObserver(event: transform(observer.closures(values: false).event, subscription)), to: subscription)
    }
}

/// A signal derived from another by a fused operator that also passes values as plain values (`fuse`).
@usableFromInline
final class FusedSignal<Upstream, Value>: Signal<Value>, @unchecked Sendable {
    // Both stored properties are immutable.
    @usableFromInline let upstream: Signal<Upstream>
    @usableFromInline let transform: @Sendable (@escaping (Event<Value>) -> Void, ((Value) -> Void)?, Subscription) -> ClosureObserver<Upstream>

    @inlinable
    init(
        upstream: Signal<Upstream>,
        transform: @escaping @Sendable (@escaping (Event<Value>) -> Void, ((Value) -> Void)?, Subscription) -> ClosureObserver<Upstream>
    ) {
        self.upstream = upstream
        self.transform = transform
        super.init()
    }

    @usableFromInline
    package override func attach(_ observer: Observer<Value>, to subscription: Subscription) {
        let downstream = observer.closures(values: true)
        upstream.attach(transform(downstream.event, downstream.next, subscription), to: subscription)
    }
}

/// `FusedSignal` for an operator that sends bursts of values out of one upstream event (the
/// framing operators): its transform is also given the subscription's own sink, when that sink
/// is its downstream, so that inside a delivery it entered (`DeliveryHandshake.enterDelivery`) it can
/// hand each value to `Sink.handleNextInBurst` without a closure and a handshake per value.
@usableFromInline
final class BurstFusedSignal<Upstream, Value>: Signal<Value>, @unchecked Sendable {
    // Both stored properties are immutable.
    @usableFromInline let upstream: Signal<Upstream>
    @usableFromInline let transform: @Sendable (@escaping (Event<Value>) -> Void, ((Value) -> Void)?, Sink<Value>?, Subscription) -> ClosureObserver<Upstream>

    @inlinable
    init(
        upstream: Signal<Upstream>,
        transform: @escaping @Sendable (@escaping (Event<Value>) -> Void, ((Value) -> Void)?, Sink<Value>?, Subscription) -> ClosureObserver<Upstream>
    ) {
        self.upstream = upstream
        self.transform = transform
        super.init()
    }

    @usableFromInline
    package override func attach(_ observer: Observer<Value>, to subscription: Subscription) {
        let downstream = observer.closures(values: true)
        // Only the sink of this very subscription: its deliveries are the ones a burst on it covers.
        let sink = observer.kind == .sink ? unsafeDowncast(observer, to: Sink<Value>.self) : nil
        let ownSink = sink.flatMap { $0.subscription === subscription ? $0 : nil }
        upstream.attach(transform(downstream.event, downstream.next, ownSink, subscription), to: subscription)
    }
}

