import Synchronization

/// The gate an event passes to enter a subscription: RAC's pass-through subscriber.
///
/// `Signal { subscriber in ... }` sends to one; a subject keeps one per subscription of an operator
/// (a subscription with callbacks is its own gate there).
/// - After the subscription is disposed, or a terminal event passed, every event is dropped.
/// - Events reach the observer on the home thread: a send from another thread hops there, in
///   order, so one subscription's events never overlap.
/// - A send on the home thread has been delivered when it returns (as in RAC); re-entrant sends nest.
/// - A terminal event closes the gate, reaches the observer, then disposes the subscription.
///
/// Thread rule: `send*` and `isDisposed` are safe from any thread.
public final class Subscriber<Value>: ObserverReleasing, @unchecked Sendable {
    // Sendable: `subscription`, `homeIdentity`, `closures` and `observerKind` are immutable; `flags` and `depth` are
    // home-thread-only; `subject` is taken once, after `left`'s atomic exchange; `sourceFlowControl` is atomic.
    @usableFromInline package let subscription: Subscription
    /// `subscription.home`'s identity, compared with the thread's current scheduler.
    @usableFromInline package let homeIdentity: UnsafeMutableRawPointer
    /// The operator's closures, one reference until `releasedFlag` is set, without ARC traffic per
    /// delivery; nil when the observer is the subscription's own sink (`subscription` holds it).
    @usableFromInline let closures: Unmanaged<ClosureObserver<Value>>?
    /// `terminatedFlag`, `releasedFlag` and `releasePendingFlag` in one byte, so a value is gated by one test.
    @usableFromInline @exclusivity(unchecked) var flags: UInt8 = 0
    /// What the observer takes: `.sink` (the subscription), or the closures' kind.
    @usableFromInline let observerKind: ObserverKind
    /// Deliveries in progress (nested ones count), so teardown inside one waits for it to return.
    @usableFromInline @exclusivity(unchecked) var depth = 0
    /// The `Subject<Value>` this subscriber is registered with, if any: type-erased so unspecialized
    /// teardown looks up no metadata, unmanaged to call it without a retain.
    private var subject: Unmanaged<AnyObject>?
    private let left = Atomic<Bool>(false)
    /// The source's flow control, if any (set once, retained): hops count against it.
    private let sourceFlowControl = Atomic<Unmanaged<FlowControl>?>(nil)

    /// A terminal event passed.
    @usableFromInline static var terminatedFlag: UInt8 { 1 }
    /// The observer was released (teardown).
    @usableFromInline static var releasedFlag: UInt8 { 2 }
    /// Teardown came during a delivery: release when the outermost delivery returns.
    @usableFromInline static var releasePendingFlag: UInt8 { 4 }

    /// A gate for a source's `didSubscribe`, or (with `subject`) a subject's registration.
    @usableFromInline
    package init(observer: __shared Observer<Value>, subscription: Subscription, subject: __shared Subject<Value>? = nil) {
        switch observer {
        case .sink(let sink):
            assert(sink === subscription, "a sink attached outside its own subscription")
            closures = nil
            observerKind = .sink
        case .closures(let closures):
            self.closures = Unmanaged.passRetained(closures)
            observerKind = closures.kind
        }
        self.subscription = subscription
        self.homeIdentity = Unmanaged.passUnretained(subscription.home).toOpaque()
        if let subject { self.subject = Unmanaged.passRetained(subject) }
    }

    deinit {
        if flags & Self.releasedFlag == 0 { closures?.release() }
        subject?.release()
        sourceFlowControl.load(ordering: .acquiring)?.release()
    }

    /// The flow control the source registered, if any.
    /// Thread rule: safe from any thread.
    package var registeredFlowControl: FlowControl? {
        sourceFlowControl.load(ordering: .acquiring)?.takeUnretainedValue()
    }

    /// Registers `control` unless the source registered one already; true when `control` is it now.
    func registerFlowControl(_ control: FlowControl) -> Bool {
        let retained = Unmanaged.passRetained(control)
        guard sourceFlowControl.compareExchange(expected: nil, desired: retained, ordering: .acquiringAndReleasing).exchanged else {
            retained.release()
            return false
        }
        return true
    }

    /// Sends a value.
    ///
    /// Thread rule: safe from any thread.
    @inlinable
    public func sendNext(_ value: Value) {
        sendNext(value, current: ThreadLocals.currentScheduler.value)
    }

    /// Sends an error, ending the subscription.
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

    /// Ends the subscription: with `failure` as its error, or completed when it is nil. Thread rule: safe from any thread.
    @inlinable
    package func sendEnd(failure: (any Error)?) {
        if let failure { sendError(failure) } else { sendCompleted() }
    }

    /// Sends an event.
    ///
    /// Thread rule: safe from any thread.
    @inlinable
    public func send(_ event: Event<Value>) {
        send(event, current: ThreadLocals.currentScheduler.value)
    }

    /// Delivers now when `current` (the calling thread's current scheduler) is the home, else hops there.
    @inlinable
    func send(_ event: Event<Value>, current: UnsafeMutableRawPointer?) {
        if current == homeIdentity {
            deliver(event)
        } else {
            hop(event)
        }
    }

    /// `send(.next(value), current:)`, passing the value as a value.
    @inlinable
    package func sendNext(_ value: Value, current: UnsafeMutableRawPointer?) {
        if current == homeIdentity {
            deliverNext(value)
        } else {
            hop(.next(value))
        }
    }

    /// The gate's rule, written once with `leave`: whether an event may pass now. Home thread only.
    /// Callers call the observer in between rather than pass a closure, which stayed an indirect call.
    @inlinable
    @inline(__always)
    func enter(terminal: Bool) -> Bool {
        guard flags & (Self.terminatedFlag | Self.releasedFlag) == 0, !subscription.isDisposed else { return false }
        if terminal { flags |= Self.terminatedFlag }
        depth &+= 1
        return true
    }

    /// After the observer returned: a teardown that came meanwhile releases the observer (outermost
    /// delivery only); a terminal event disposes the subscription.
    @inlinable
    @inline(__always)
    func leave(terminal: Bool) {
        depth &-= 1
        if flags & Self.releasePendingFlag != 0 { releaseIfOutermost() }
        if terminal { subscription.dispose() }
    }

    /// Delivers an event on the home thread, through the gate.
    @inlinable
    func deliver(_ event: Event<Value>) {
        let terminal = event.isTerminating
        guard enter(terminal: terminal) else { return }
        if let closures {
            closures._withUnsafeGuaranteedRef { $0.event(event) }
        } else {
            ownSink.handle(event)
        }
        leave(terminal: terminal)
    }

    /// The subscription as its own sink (`observerKind == .sink`).
    @inlinable
    var ownSink: SinkSubscription<Value> {
        unsafeDowncast(subscription, to: SinkSubscription<Value>.self)
    }

    /// Delivers a value on the home thread, through the gate (also a source's send that knows it runs there).
    @inlinable
    package func deliverNext(_ value: Value) {
        guard enter(terminal: false) else { return }
        if let closures {
            closures._withUnsafeGuaranteedRef { $0.receiveNext(value) }
        } else {
            ownSink.handleNext(value)
        }
        leave(terminal: false)
    }

    /// Sends `values` in order as one delivery on the home thread (a directory listing's batch): the
    /// gate and its sink's handshake are entered once; a terminal event, teardown or dispose during a
    /// value stops the burst. Off the home thread each value hops as `sendNext` would.
    /// Thread rule: safe from any thread.
    package func sendNexts<Values: Sequence>(_ values: Values) where Values.Element == Value {
        guard ThreadLocals.currentScheduler.value == homeIdentity else {
            for value in values { hop(.next(value)) }
            return
        }
        guard enter(terminal: false) else { return }
        let stopped = Self.terminatedFlag | Self.releasedFlag
        if let closures {
            closures._withUnsafeGuaranteedRef { observer in
                for value in values {
                    if flags & stopped != 0 || subscription.isDisposed { break }
                    observer.receiveNext(value)
                }
            }
        } else {
            let sink = ownSink
            let entry = sink.enterDelivery()
            if entry != .refused {
                for value in values {
                    if flags & stopped != 0 || sink.disposedFlag.load(ordering: .relaxed) { break }
                    sink.handleNextInBurst(value)
                }
                sink.leave(entry)
            }
        }
        leave(terminal: false)
    }

    /// Teardown came during a delivery: release once the outermost one returned.
    @usableFromInline
    func releaseIfOutermost() {
        if depth == 0 { releaseNow() }
    }

    @usableFromInline
    func hop(_ event: Event<Value>) {
        if subscription.isDisposed { return }
        // Two boxes, not a tuple in one: see UncheckedSendable.
        let target = UncheckedSendable(self), payload = UncheckedSendable(event)
        let delivered: Bool
        if let control = registeredFlowControl {
            control.willQueueValue()
            // A home that is gone drops the work, and the count with it.
            delivered = subscription.home.scheduleDroppingIfShutDown {
                target.value.deliver(payload.value)
                control.didDeliverQueuedValue()
            }
        } else {
            delivered = subscription.home.scheduleDroppingIfShutDown { target.value.deliver(payload.value) }
        }
        // The home loop has shut down: stop the source, which would go on sending into refused submissions.
        if !delivered { subscription.dispose() }
    }

    /// Whether the subscription is disposed (or has ended): a long-running producer can stop early.
    ///
    /// Thread rule: safe from any thread.
    @inlinable
    public var isDisposed: Bool { subscription.isDisposed }

    /// The subscription's compound disposable: add what should be torn down with it, on the home
    /// thread (RAC's `didSubscribeWithDisposable:`).
    ///
    /// Thread rule: safe from any thread.
    public var disposable: CompoundDisposable { subscription }

    /// The scheduler whose thread this subscriber's events are delivered on.
    ///
    /// Thread rule: safe from any thread.
    public var homeScheduler: Scheduler { subscription.home }

    /// Takes this subscriber off its subject's list, once (a no-op for a source's subscriber).
    @inline(__always)
    func leaveSubject() {
        guard !left.exchange(true, ordering: .acquiringAndReleasing), let subject = subject.take() else { return }
        subject._withUnsafeGuaranteedRef { unsafeDowncast($0, to: Subject<Value>.self).remove(self) }
        subject.release()
    }

    /// Teardown (home thread): leave the subject, then let go of the observer (after the delivery in
    /// progress, if any).
    @usableFromInline
    package func releaseObserver(of _: Subscription) {
        leaveSubject()
        if flags & Self.releasedFlag != 0 { return }
        if depth > 0 {
            flags |= Self.releasePendingFlag
        } else {
            releaseNow()
        }
    }

    @usableFromInline
    func releaseNow() {
        if flags & Self.releasedFlag != 0 { return }
        flags = (flags | Self.releasedFlag) & ~Self.releasePendingFlag
        closures?.release()
    }
}
