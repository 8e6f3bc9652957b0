import Synchronization

/// A subject's registration of one subscription, without its value type.
///
/// The subject's list holds these, so adding and removing are plain
/// (non-generic) array operations. Disposing it (the subscription does, when
/// it is disposed) takes it off the subject's list.
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
    // `subject`, `subscription`, `homeIdentity` and `observer` (the pointer) are immutable; `terminated`,
    // `released`, `releasePending` and `depth` are touched only on the subscription's home thread
    // (deliveries run there, sends from elsewhere are hopped there, and teardown runs there).
    let subject: Subject<Value>
    @usableFromInline let subscription: Subscription
    /// `subscription.home`'s identity, compared with the calling thread's current scheduler.
    @usableFromInline let homeIdentity: UnsafeMutableRawPointer
    /// Holds one reference to the box until `released`.
    @usableFromInline let observer: Unmanaged<ObserverBox<Value>>
    @usableFromInline @exclusivity(unchecked) var terminated = false
    @usableFromInline @exclusivity(unchecked) var released = false
    @usableFromInline @exclusivity(unchecked) var releasePending = false
    @usableFromInline @exclusivity(unchecked) var depth = 0

    init(subject: Subject<Value>, observer: @escaping (Event<Value>) -> Void, subscription: Subscription) {
        self.subject = subject
        self.observer = Unmanaged.passRetained(subject.observerBoxType.init(observer))
        self.subscription = subscription
        self.homeIdentity = Unmanaged.passUnretained(subscription.home).toOpaque()
        super.init()
    }

    deinit {
        if !released { observer.release() }
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

    @inlinable
    func deliver(_ event: Event<Value>) {
        guard !terminated, !released, !subscription.isDisposed else { return }
        if event.isTerminating { terminated = true }
        depth += 1
        observer._withUnsafeGuaranteedRef { $0.observer(event) }
        depth -= 1
        if releasePending, depth == 0 { releaseNow() }
        if terminated { subscription.dispose() }
    }

    @usableFromInline
    func hop(_ event: Event<Value>) {
        if subscription.isDisposed { return }
        // Two boxes, not a tuple in one: see UncheckedSendable.
        let target = UncheckedSendable(self), payload = UncheckedSendable(event)
        _ = subscription.home.schedule { target.value.deliver(payload.value) }
    }

    override func leaveSubject() {
        subject.remove(self)
    }

    /// Teardown (home thread): drop the observer chain, after the delivery in progress if there is one.
    func releaseObserver() {
        if released { return }
        if depth > 0 {
            releasePending = true
        } else {
            releaseNow()
        }
    }

    @usableFromInline
    func releaseNow() {
        if released { return }
        released = true
        releasePending = false
        observer.release()
    }
}

/// A subscriber's observer, in a box the subscriber references without ARC traffic per delivery.
@usableFromInline
final class ObserverBox<Value> {
    // Immutable.
    @usableFromInline let observer: (Event<Value>) -> Void

    init(_ observer: @escaping (Event<Value>) -> Void) {
        self.observer = observer
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
}

