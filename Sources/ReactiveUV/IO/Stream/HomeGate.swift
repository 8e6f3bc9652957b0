/// Where a loop-bound source sends its events: the core's gate (a `Subscriber`), or, as its one
/// specialization, the subscription itself as its own sink (`SinkSubscription`) with no gate in between.
///
/// A source may send to the sink directly only where the sink already does all that the gate
/// would (`directSink(for:in:on:)` checks it when the source is subscribed):
/// - the subscription's home is the source's loop and the source runs on it, so no event needs
///   hopping to another thread;
/// - the observer is that subscription's own sink (`subscribe(next:error:completed:)`, no
///   operator and no logging in between), whose dispose handshake drops what comes after a
///   dispose (and lets `disposeAndWait()` from another thread wait for a callback in progress), and
///   which disposes the subscription on a terminal event;
/// - the source holds the gate until it ends and calls it from a local binding, so nothing frees
///   the sink during a delivery (the subscription's teardown makes the source let go, which
///   breaks the subscription → source → subscription cycle).
/// No gate takes the subscription's root slot, so the source takes it (`attachRoot`: a home stream
/// reader), and the teardown reaches it there, with no lock and no child list. A source that
/// registers flow control finds the subscription in `subscription`; a home reader needs no hop
/// counting. Anything else (another thread, an operator's observer, a subject) keeps the gate.
/// What this spares is the `Subscriber` of every such subscription, and its gate's work per event.
///
/// Thread rule: `sendNext`, `sendCompleted`, `sendError` and `isDisposed` are safe from any thread
/// for `.subscriber`; a `.sink` is only ever made for, and called on, its home loop's thread.
enum HomeGate<Value> {
    case subscriber(Subscriber<Value>)
    case sink(SinkSubscription<Value>)

    /// The sink a source on `loop` may send to without a gate, if `observer` is one: see the type's rules.
    /// Loop-bound sources call it in `attach`, on whatever thread subscribes; `loop` is then `subscription.home`.
    ///
    /// The home is checked by identity against the calling thread's loop first, so a subscription
    /// made anywhere else costs one thread-local load, and no dynamic cast of the home is made.
    /// Inlined: across a call, the sink it returns would be retained, then released.
    @inline(__always)
    static func directSink(for observer: Observer<Value>, in subscription: Subscription, on loop: Scheduler) -> SinkSubscription<Value>? {
        guard case .sink(let sink) = observer else { return nil }
        let home = sink.home
        // The calling thread's loop is the home, and it is the source's loop.
        guard let current = ThreadLocals.currentLoop.value, current == Unmanaged.passUnretained(home).toOpaque(),
              home === loop else {
            return nil
        }
        guard loop.loopLifecycle?.acceptsNewHandles == true, !sink.isDisposed else { return nil }
        return sink
    }

    /// The subscription the events go to.
    var subscription: Subscription {
        switch self {
        case .subscriber(let subscriber): subscriber.subscription
        case .sink(let sink): sink
        }
    }

    /// `subscription.home`'s identity, as `Subscriber.homeIdentity`.
    var homeIdentity: UnsafeMutableRawPointer {
        switch self {
        case .subscriber(let subscriber): subscriber.homeIdentity
        case .sink(let sink): Unmanaged.passUnretained(sink.home).toOpaque()
        }
    }

    /// Whether the subscription is disposed (or has ended).
    var isDisposed: Bool { subscription.isDisposed }

    /// Sends a value: through the gate (hopped to the home when needed), or to the sink.
    @inline(__always)
    func sendNext(_ value: Value) {
        switch self {
        case .subscriber(let subscriber): subscriber.sendNext(value)
        case .sink(let sink): sink.handleNext(value)
        }
    }

    /// Sends a value on the home thread (the caller checked it once, as `Subscriber.deliverNext`'s callers do).
    @inline(__always)
    func deliverNext(_ value: Value) {
        switch self {
        case .subscriber(let subscriber): subscriber.deliverNext(value)
        case .sink(let sink): sink.handleNext(value)
        }
    }

    /// Sends values in order as one delivery where the gate can (`Subscriber.sendNexts`).
    func sendNexts<Values: Sequence>(_ values: Values) where Values.Element == Value {
        switch self {
        case .subscriber(let subscriber): subscriber.sendNexts(values)
        case .sink(let sink):
            let entry = sink.enterDelivery()
            if entry == .refused { return }
            for value in values { sink.handleNextInBurst(value) }
            sink.leave(entry)
        }
    }

    /// Sends completion, ending the subscription.
    @inline(__always)
    func sendCompleted() {
        switch self {
        case .subscriber(let subscriber): subscriber.sendCompleted()
        case .sink(let sink): sink.handleCompleted()
        }
    }

    /// Ends the subscription: with `failure`, or completed when it is nil.
    @inline(__always)
    func sendEnd(failure: (any Error)?) {
        if let failure { sendError(failure) } else { sendCompleted() }
    }

    /// Sends an error, ending the subscription.
    @inline(__always)
    func sendError(_ error: any Error) {
        switch self {
        case .subscriber(let subscriber): subscriber.sendError(error)
        case .sink(let sink): sink.handleError(error)
        }
    }

    /// The flow control the source registered for this reader, if any: the gate's (which counts the
    /// values it hopped), or, for a sink, the one its subscription made when a consumer asked.
    var registeredFlowControl: FlowControl? {
        switch self {
        case .subscriber(let subscriber): subscriber.registeredFlowControl
        case .sink(let sink): sink.flowControlIfMade
        }
    }

    /// The scheduler the events are delivered on.
    var homeScheduler: Scheduler { subscription.home }
}
