import Synchronization

/// A hot signal you send to by hand: RAC's `RACSubject`.
///
/// Every subscriber gets the events sent after it subscribed. Sends are safe
/// from any thread: each subscriber receives them on its own subscription's
/// home thread (a send made on another thread is hopped there, in order), so
/// one subscriber never sees two events at once. A disposed subscription
/// leaves the subject at once and gets nothing more.
///
/// Unlike RAC's subject, one that has ended remembers its terminal event and
/// sends it to later subscribers (so nobody waits forever on a finished subject).
///
/// `ReplaySubject` and `BehaviorSubject` are subjects that also replay recent values.
///
/// The send path takes one short lock to read the subscriber list (a
/// snapshot, no copy and no allocation) and calls each subscriber outside it.
///
/// Thread rule: `send*` and subscribing are safe from any thread.
public class Subject<Value>: Signal<Value>, @unchecked Sendable {
    // `state` is protected by its mutex; subscribers are always called outside it.
    @usableFromInline let state: Mutex<SubjectState<Value>>

    /// Creates a subject with no subscribers.
    ///
    /// - Returns: A subject.
    ///
    /// Thread rule: safe from any thread.
    public override init() {
        state = Mutex(SubjectState(replayCapacity: 0))
        super.init()
    }

    /// For `ReplaySubject`/`BehaviorSubject`: a subject that keeps the last `replayCapacity` values.
    init(replayCapacity: Int, initial: Value?) {
        var initialState = SubjectState<Value>(replayCapacity: replayCapacity)
        if let initial { initialState.record(initial) }
        state = Mutex(initialState)
        super.init()
    }

    /// Sends a value to every current subscriber.
    ///
    /// Ignored once the subject has ended.
    ///
    /// - Parameter value: The value.
    ///
    /// Thread rule: safe from any thread.
    @inlinable
    public final func sendNext(_ value: Value) {
        let subscribers = state.withLock { state -> ContiguousArray<Subscriber<Value>> in
            if state.terminal != nil { return [] }
            if state.replayCapacity > 0 { state.record(value) }
            return state.subscribers
        }
        for subscriber in subscribers {
            subscriber.send(.next(value))
        }
    }

    /// Ends the subject with an error: every subscriber gets it, and so will later ones.
    ///
    /// Ignored once the subject has ended.
    ///
    /// - Parameter error: The error.
    ///
    /// Thread rule: safe from any thread.
    public final func sendError(_ error: any Error) {
        terminate(.error(error))
    }

    /// Completes the subject: every subscriber gets completion, and so will later ones.
    ///
    /// Ignored once the subject has ended.
    ///
    /// Thread rule: safe from any thread.
    public final func sendCompleted() {
        terminate(.completed)
    }

    /// Sends any event (`next`, `error` or `completed`).
    ///
    /// - Parameter event: The event.
    ///
    /// Thread rule: safe from any thread.
    @inlinable
    public final func send(_ event: Event<Value>) {
        switch event {
        case .next(let value): sendNext(value)
        case .error(let error): sendError(error)
        case .completed: sendCompleted()
        }
    }

    /// The number of subscriptions currently registered (disposed ones leave at once).
    ///
    /// Thread rule: safe from any thread.
    public final var subscriberCount: Int {
        state.withLock { $0.subscribers.count }
    }

    /// Whether the subject has ended (an error or completion was sent).
    ///
    /// Thread rule: safe from any thread.
    public final var hasTerminated: Bool {
        state.withLock { $0.terminal != nil }
    }

    private func terminate(_ event: Event<Value>) {
        let subscribers = state.withLock { state -> ContiguousArray<Subscriber<Value>> in
            if state.terminal != nil { return [] }
            state.terminal = event
            let all = state.subscribers
            state.subscribers = []
            return all
        }
        for subscriber in subscribers {
            subscriber.send(event)
        }
    }

    @usableFromInline
    override final func attach(_ observer: @escaping (Event<Value>) -> Void, to subscription: Subscription) {
        let subscriber = Subscriber(observer: observer, subscription: subscription)
        subscription.root = subscriber
        if subscription.isDisposed { return }
        // Replayed values and registration are taken together, so each value is
        // either replayed or sent live, never both and never missed.
        let snapshot = state.withLock { state -> ReplaySnapshot<Value> in
            let values = state.replayCapacity > 0 ? state.replay.elements : []
            if let terminal = state.terminal { return ReplaySnapshot(values: values, terminal: terminal) }
            state.subscribers.append(subscriber)
            return ReplaySnapshot(values: values, terminal: nil)
        }
        if snapshot.terminal == nil {
            subscription.add(SubjectRegistration(subject: self, subscriber: subscriber))
        }
        // On the home thread, so these are delivered now, before any send hopped here from elsewhere.
        for value in snapshot.values {
            if subscription.isDisposed { return }
            subscriber.send(.next(value))
        }
        if let terminal = snapshot.terminal {
            subscriber.send(terminal)
        }
    }

    final func remove(_ subscriber: Subscriber<Value>) {
        state.withLock { state in
            if let index = state.subscribers.firstIndex(where: { $0 === subscriber }) {
                state.subscribers.remove(at: index)
            }
        }
    }

    /// The latest kept value (for `BehaviorSubject.value`).
    final var latestReplayed: Value? {
        state.withLock { state in state.replay.last }
    }
}

/// A subject's subscribers, terminal event and replay buffer.
@usableFromInline
struct SubjectState<Value>: @unchecked Sendable {
    // Lives inside the subject's mutex and is only touched under it; values and
    // subscribers taken out of it are handed to the subscribers' home threads.
    @usableFromInline var subscribers: ContiguousArray<Subscriber<Value>> = []
    @usableFromInline var terminal: Event<Value>?
    /// How many values to keep for new subscribers: 0 for a plain subject, `Int.max` for unbounded replay.
    @usableFromInline let replayCapacity: Int
    @usableFromInline var replay = RingBuffer<Value>()

    init(replayCapacity: Int) {
        self.replayCapacity = replayCapacity
    }

    @usableFromInline
    mutating func record(_ value: Value) {
        if replayCapacity == 0 { return }
        if replay.count >= replayCapacity { _ = replay.popFirst() }
        replay.append(value)
    }
}

/// What a new subscriber must be sent before live events.
struct ReplaySnapshot<Value> {
    let values: [Value]
    let terminal: Event<Value>?
}

/// Removes one subscriber from its subject when its subscription is disposed.
final class SubjectRegistration<Value>: Disposable, @unchecked Sendable {
    // `subject` and `subscriber` are immutable; `disposed` is atomic.
    private let subject: Subject<Value>
    private let subscriber: Subscriber<Value>
    private let disposed = Atomic<Bool>(false)

    init(subject: Subject<Value>, subscriber: Subscriber<Value>) {
        self.subject = subject
        self.subscriber = subscriber
    }

    func dispose() {
        guard !disposed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        subject.remove(subscriber)
    }

    var isDisposed: Bool { disposed.load(ordering: .acquiring) }
}
