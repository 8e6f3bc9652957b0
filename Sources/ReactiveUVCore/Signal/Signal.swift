import Synchronization

/// A stream of values over time that ends with an error or completion: RAC's `RACSignal`.
///
/// Cold: `didSubscribe` runs once per subscriber, at once on a loop thread, else on
/// `EventLoop.shared`. That loop is the subscription's home: every event reaches the subscriber
/// on its thread, never two at once. Disposing stops delivery and tears down what it created.
/// Operators that transform one signal (`map`, `filter`, `scan`...) fuse into one subscription.
///
/// Closures run on the home thread, not in the caller's isolation: operator closures and
/// `didSubscribe` are `@Sendable`, `subscribe`'s callbacks `sending`. Values need be `Sendable`
/// only through operators that hand them to another thread (`deliver(on:)`, `subscribe(on:)`).
///
/// Thread rule: subscribing and operators are safe from any thread.
public class Signal<Value>: @unchecked Sendable {
    // Sendable: `didSubscribe` is immutable; `nameLock` guards `debugName`.
    @usableFromInline let didSubscribe: (@Sendable (Subscriber<Value>) -> (any Disposable)?)?
    private let nameLock = SpinLock()
    @exclusivity(unchecked) private var debugName: String?

    /// Creates a cold signal that runs `didSubscribe` for each subscriber, on its home thread.
    ///
    /// Send events to the subscriber (from any thread) and return what tears down your setup (or
    /// nil); it is disposed when the subscriber disposes or the signal ends.
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

    /// The debug name (RAC's `name`): empty unless set, or unless debug naming is on
    /// (`REACTIVEUV_DEBUG_SIGNALS=1`) and an operator named its result.
    ///
    /// Thread rule: safe from any thread.
    public var name: String {
        get { nameLock.withLock { debugName } ?? "" }
        set { nameLock.withLock { debugName = newValue } }
    }

    /// Sets the debug name and returns the signal, for chaining.
    ///
    /// Thread rule: safe from any thread.
    @discardableResult
    public func named(_ name: String) -> Self {
        self.name = name
        return self
    }

    /// Names the signal only when debug naming is on, so the string is never built otherwise.
    @inlinable
    @discardableResult
    package final func debugNamed(_ name: @autoclosure () -> String) -> Self {
        if DebugSignals.isEnabled { self.name = name() }
        return self
    }

    /// Connects `observer` to this signal inside `subscription`: the one way in. Home thread only.
    /// Subclasses override it (subjects register a gate, fused operators attach upstream).
    @usableFromInline
    package func attach(_ observer: Observer<Value>, to subscription: Subscription) {
        let subscriber = Subscriber(observer: observer, subscription: subscription)
        subscription.attachRoot(subscriber)
        // A subscription disposed before it attached starts nothing.
        if let didSubscribe, !subscription.isDisposed {
            subscription.add(didSubscribe(subscriber))
        }
    }

    /// `attach(.closures(closures), to: subscription)`: how an operator attaches its closures.
    @inlinable
    final func attach(_ closures: ClosureObserver<Value>, to subscription: Subscription) {
        attach(.closures(closures), to: subscription)
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

    /// The off-home path, out of line so the inlined `start` stays free of `PendingAttach`.
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

    /// `start(.sink(sink), on: sink)`: a subscription with callbacks, its own observer. Borrowed here, the
    /// sink is wrapped in the observer without a retain.
    @inlinable
    package final func start(sink: SinkSubscription<Value>) {
        start(.sink(sink), on: sink)
    }

    /// `start(.closures(closures), on: subscription)`.
    @inlinable
    package final func start(_ closures: ClosureObserver<Value>, on subscription: Subscription) {
        start(.closures(closures), on: subscription)
    }

    /// `fuse` for an operator that sends many values per upstream event: its transform also gets the
    /// end of the chain when the subscription's own sink is its downstream, to send a burst through
    /// `Sink.handleNextInBurst` in one delivery.
    @inlinable
    func fuseBursting<U>(
        _ transform: @escaping @Sendable (
            _ downstream: @escaping (Event<U>) -> Void, _ downstreamNext: ((U) -> Void)?, _ sink: Sink<U>?,
            _ subscription: Subscription
        ) -> ClosureObserver<Value>
    ) -> Signal<U> {
        BurstFusedSignal(upstream: self, transform: transform)
    }

    /// A signal whose subscribers attach `transform(observer)` to this one, in the same subscription
    /// (fused operators); `transform` runs once per subscription, on its home thread.
    @inlinable
    func lift<U>(
        _ transform: @escaping @Sendable (_ downstream: @escaping (Event<U>) -> Void, _ subscription: Subscription) -> (Event<Value>) -> Void
    ) -> Signal<U> {
        LiftedSignal(upstream: self, transform: transform)
    }

    /// `lift` with the value shortcut: `transform` gets the downstream's shortcut when it has one,
    /// and its event and value closures must treat a value alike.
    @inlinable
    func fuse<U>(
        _ transform: @escaping @Sendable (
            _ downstream: @escaping (Event<U>) -> Void, _ downstreamNext: ((U) -> Void)?, _ subscription: Subscription
        ) -> ClosureObserver<Value>
    ) -> Signal<U> {
        FusedSignal(upstream: self, transform: transform)
    }
}

/// A subscription waiting to be attached on its home thread. A class, not a tuple in a generic
/// box, which the compiler over-releases when an escaping closure captures it.
@usableFromInline
final class PendingAttach<Value>: @unchecked Sendable {
    // Sendable: made on the subscribing thread, then used only on the home thread (handed over through its queue).
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
    // Sendable: both stored properties are immutable.
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
    // Sendable: both stored properties are immutable.
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

/// `FusedSignal` for an operator that sends bursts per upstream event (framing), also given the
/// chain's `Sink` (see `fuseBursting`).
@usableFromInline
final class BurstFusedSignal<Upstream, Value>: Signal<Value>, @unchecked Sendable {
    // Sendable: both stored properties are immutable.
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
        // Only this subscription's own sink: its deliveries are the ones a burst on it covers.
        let downstream: ClosureObserver<Value>, sink: Sink<Value>?
        switch observer {
        case .sink(let own): (downstream, sink) = own.makeEnd(own, true)
        case .closures(let closures): (downstream, sink) = (closures, nil)
        }
        upstream.attach(transform(downstream.event, downstream.next, sink, subscription), to: subscription)
    }
}

