import Synchronization

/// A subject's registration of one subscription, without its value type.
///
/// The subject's list holds these, so adding and removing are plain
/// (non-generic) array operations. Disposing it (the subscription's teardown
/// does, through `releaseObserver`) takes it off the subject's list.
@usableFromInline
class SubjectSubscriberBase: Disposable, @unchecked Sendable {
    // `disposed` is atomic; subclasses document their own state.
    private let disposed = Atomic<Bool>(false)

    init() {}

    @usableFromInline
    final func dispose() {
        guard !disposed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        leaveSubject()
    }

    @usableFromInline
    final var isDisposed: Bool { disposed.load(ordering: .acquiring) }

    func leaveSubject() {}
}

/// The gate between a subject and one subscription: `Subscriber`'s rules for a subscriber the subject owns.
///
/// Same contract as `Subscriber`: drops everything after a terminal event or
/// disposal; delivers on the subscription's home thread, hopping sends made
/// elsewhere there, in order; releases the observer chain at teardown (even
/// while a sender still holds this object). The observer is kept in a box
/// referenced without ARC, so a delivery costs no retain: the box is
/// released at teardown, or, when teardown happens inside a delivery, as
/// that delivery returns.
@usableFromInline
final class SubjectSubscriber<Value>: SubjectSubscriberBase, ObserverReleasing, @unchecked Sendable {
    // `subscription`, `homeIdentity`, `observer` (the pointer) are immutable; `subject` is set in
    // init and taken once by `leaveSubject` (after `dispose`'s atomic exchange); `flags` and
    // `depth` are touched only on the subscription's home thread (deliveries run there, sends from
    // elsewhere are hopped there, and teardown runs there).
    /// Let go of on leaving: a sending loop's cached snapshot may list this subscriber until
    /// that loop sends again, which may be never; holding the subject too would be a cycle.
    private var subject: Subject<Value>?
    @usableFromInline let subscription: Subscription
    /// `subscription.home`'s identity, compared with the calling thread's current scheduler.
    @usableFromInline let homeIdentity: UnsafeMutableRawPointer
    /// Holds one reference to the observer until `released`: an `ObserverBox<Value>`, or a
    /// `Sink<Value>` when `sinkFlag` is set (`subscribe` on a subject: the sink itself, no closure or box).
    @usableFromInline let observer: Unmanaged<AnyObject>
    /// `terminatedFlag`, `releasedFlag`, `releasePendingFlag` and `sinkFlag`: one byte, so a value is gated by one test.
    @usableFromInline @exclusivity(unchecked) var flags: UInt8 = 0
    @usableFromInline @exclusivity(unchecked) var depth = 0

    /// A terminal event was delivered.
    @usableFromInline static var terminatedFlag: UInt8 { 1 }
    /// The observer chain was released (teardown).
    @usableFromInline static var releasedFlag: UInt8 { 2 }
    /// Teardown came during a delivery: release when the outermost delivery returns.
    @usableFromInline static var releasePendingFlag: UInt8 { 4 }
    /// Set for life when `observer` is a `Sink<Value>` (else an `ObserverBox<Value>`).
    @usableFromInline static var sinkFlag: UInt8 { 8 }

    init(subject: Subject<Value>, observer: @escaping (Event<Value>) -> Void, next: ((Value) -> Void)?, subscription: Subscription) {
        self.subject = subject
        self.observer = Unmanaged.passRetained(subject.observerBoxType.init(observer, next: next))
        self.subscription = subscription
        self.homeIdentity = Unmanaged.passUnretained(subscription.home).toOpaque()
        super.init()
    }

    /// A subscriber whose observer is `subscribe`'s sink, kept as it is (no closure, no box).
    init(subject: Subject<Value>, sink: Sink<Value>, subscription: Subscription) {
        self.subject = subject
        self.observer = Unmanaged.passRetained(sink)
        self.subscription = subscription
        self.homeIdentity = Unmanaged.passUnretained(subscription.home).toOpaque()
        super.init()
        flags = Self.sinkFlag
    }

    deinit {
        if flags & Self.releasedFlag == 0 { observer.release() }
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

    /// `send(.next(value), current:)`, with the value path's shorter gate.
    @inlinable
    func sendNext(_ value: Value, current: UnsafeMutableRawPointer?) {
        if current == homeIdentity {
            deliverNext(value)
        } else {
            hop(.next(value))
        }
    }

    @inlinable
    func deliver(_ event: Event<Value>) {
        guard flags & (Self.terminatedFlag | Self.releasedFlag) == 0, !subscription.isDisposed else { return }
        if event.isTerminating { flags |= Self.terminatedFlag }
        depth &+= 1
        if flags & Self.sinkFlag != 0 {
            observer._withUnsafeGuaranteedRef { unsafeDowncast($0, to: Sink<Value>.self).receive(event) }
        } else {
            observer._withUnsafeGuaranteedRef { unsafeDowncast($0, to: ObserverBox<Value>.self).observer(event) }
        }
        depth &-= 1
        if flags & Self.releasePendingFlag != 0 { releaseIfOutermost() }
        if flags & Self.terminatedFlag != 0 { subscription.dispose() }
    }

    /// A value on the home thread. A terminal event delivered from inside the observer
    /// (re-entrantly) disposed the subscription already, so unlike `deliver` there is
    /// nothing to end afterwards.
    @inlinable
    func deliverNext(_ value: Value) {
        // No flag set: a box observer, live, no release pending. Testing the whole byte keeps the
        // box path (operator chains) as short as before sinks were kept; the rest is out of line.
        guard flags == 0 else {
            deliverNextFlagged(value)
            return
        }
        guard !subscription.isDisposed else { return }
        depth &+= 1
        observer._withUnsafeGuaranteedRef { object in
            let box = unsafeDowncast(object, to: ObserverBox<Value>.self)
            // Not `if let next = box.next`: binding the closure would retain and release it per value.
            if box.hasNext {
                box.next?(value)
            } else {
                box.observer(.next(value))
            }
        }
        depth &-= 1
        if flags & Self.releasePendingFlag != 0 { releaseIfOutermost() }
    }

    /// `deliverNext` when a flag is set: a sink observer, an ended subscriber, or a release pending.
    @inlinable
    @inline(never)
    func deliverNextFlagged(_ value: Value) {
        guard flags & (Self.terminatedFlag | Self.releasedFlag) == 0, !subscription.isDisposed else { return }
        depth &+= 1
        if flags & Self.sinkFlag != 0 {
            observer._withUnsafeGuaranteedRef { unsafeDowncast($0, to: Sink<Value>.self).receiveNext(value) }
        } else {
            observer._withUnsafeGuaranteedRef { object in
                let box = unsafeDowncast(object, to: ObserverBox<Value>.self)
                if box.hasNext {
                    box.next?(value)
                } else {
                    box.observer(.next(value))
                }
            }
        }
        depth &-= 1
        if flags & Self.releasePendingFlag != 0 { releaseIfOutermost() }
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
        _ = subscription.home.schedule { target.value.deliver(payload.value) }
    }

    override func leaveSubject() {
        subject.take()?.remove(self)
    }

    /// Teardown (home thread): leave the subject, then drop the observer chain (after the
    /// delivery in progress if there is one). The subscriber is the subscription's root, not
    /// one of its children, so this is the one place it leaves.
    func releaseObserver() {
        dispose()
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
        observer.release()
    }
}

/// A subscriber's observer (and its value shortcut, if any), in a box the subscriber references without ARC traffic per delivery.
@usableFromInline
final class ObserverBox<Value> {
    // Immutable.
    @usableFromInline let observer: (Event<Value>) -> Void
    /// Does what `observer(.next(value))` does, without building the event (see `Signal.attach(_:values:to:)`).
    @usableFromInline let next: ((Value) -> Void)?
    /// `next != nil`, tested without copying the closure.
    @usableFromInline let hasNext: Bool

    init(_ observer: @escaping (Event<Value>) -> Void, next: ((Value) -> Void)?) {
        self.observer = observer
        self.next = next
        hasNext = next != nil
    }
}

/// An immutable copy of a subject's subscriber list, walked by senders without retaining each subscriber.
///
/// Built under the subject's lock after the list changed; it holds one
/// reference to each subscriber for as long as it lives.
@usableFromInline
final class SubjectSnapshot<Value> {
    // Immutable after init; freed (releasing the subscribers) when the last sender lets go.
    @usableFromInline let count: Int
    @usableFromInline let elements: UnsafeMutablePointer<Unmanaged<SubjectSubscriber<Value>>>

    init(_ subscribers: ContiguousArray<SubjectSubscriberBase>) {
        count = subscribers.count
        elements = .allocate(capacity: max(1, count))
        for (index, subscriber) in subscribers.enumerated() {
            (elements + index).initialize(to: Unmanaged.passRetained(unsafeDowncast(subscriber, to: SubjectSubscriber<Value>.self)))
        }
    }

    deinit {
        for index in 0..<count { elements[index].release() }
        elements.deallocate()
    }

    @inlinable
    func send(_ event: Event<Value>, current: UnsafeMutableRawPointer?) {
        var index = 0
        while index < count {
            elements[index]._withUnsafeGuaranteedRef { $0.send(event, current: current) }
            index += 1
        }
    }

    @inlinable
    func sendNext(_ value: Value, current: UnsafeMutableRawPointer?) {
        var index = 0
        while index < count {
            elements[index]._withUnsafeGuaranteedRef { $0.sendNext(value, current: current) }
            index &+= 1
        }
    }
}

