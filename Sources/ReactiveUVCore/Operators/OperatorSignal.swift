/// A signal whose subscribers run `body`: the building block of operators with several inputs.
///
/// `body` runs once per subscription, on its home thread. It subscribes its inputs as children
/// (`Subscription.attachChild`), whose events come to the home thread, so its `OperatorState`
/// needs no lock.
@usableFromInline
final class OperatorSignal<Value>: Signal<Value>, @unchecked Sendable {
    // `body` is immutable.
    let body: @Sendable (_ downstream: @escaping (Event<Value>) -> Void, _ subscription: Subscription) -> Void

    init(_ body: @escaping @Sendable (_ downstream: @escaping (Event<Value>) -> Void, _ subscription: Subscription) -> Void) {
        self.body = body
        super.init()
    }

    @usableFromInline
    package override func attach(_ observer: Observer<Value>, to subscription: Subscription) {
        // As the base signal's attach: a subscription disposed before it attached subscribes no input.
        if subscription.isDisposed { return }
        body(observer.closures(values: false).event, subscription)
    }
}

/// The per-subscription state of an operator with several inputs or its own timers.
///
/// Forwards to the downstream until the first terminal event, then drops it, so a finished
/// pipeline frees its closures. As the subscription's `root`, teardown releases it too.
class OperatorState<Value>: ObserverReleasing {
    // Every stored var is touched only on the subscription's home thread
    // (inputs arriving elsewhere are hopped there by `attachChild`).
    private var downstream: ((Event<Value>) -> Void)?
    /// Whether a terminal event was sent (or the subscription was torn down).
    private(set) var isDone = false

    init(_ downstream: @escaping (Event<Value>) -> Void) {
        self.downstream = downstream
    }

    /// Forwards a value unless a terminal event went out already.
    package final func sendNext(_ value: Value) {
        if isDone { return }
        downstream?(.next(value))
    }

    /// Forwards a terminal event once, releasing the downstream and the state's resources.
    final func finish(_ event: Event<Value>) {
        if isDone { return }
        isDone = true
        let target = downstream
        downstream = nil
        didFinish()
        target?(event)
    }

    /// Forwards any event (`finish` for terminal events).
    final func forward(_ event: Event<Value>) {
        switch event {
        case .next(let value): sendNext(value)
        case .error, .completed: finish(event)
        }
    }

    /// Called once when the operator ends (terminal event or teardown): drop queues and captured closures here.
    func didFinish() {}

    @usableFromInline
    package final func releaseObserver(of _: Subscription) {
        if isDone { return }
        isDone = true
        downstream = nil
        didFinish()
    }
}

extension Subscription {
    /// Subscribes `signal` in a new child subscription of this one; `observer` gets its events on this home thread.
    ///
    /// Events arriving on another thread (after `deliver(on:)`) are hopped back to the home, in
    /// order, so the operator's state stays on one thread. The observer gets the child, to
    /// `endChild` it when the input ends.
    ///
    /// Home thread only.
    func attachChild<Input>(_ signal: Signal<Input>, _ observer: @escaping (Event<Input>, Subscription) -> Void) -> Subscription {
        let child = makeChild()
        let home = self.home
        signal.attach(ClosureObserver(event: { event in
            if home.isCurrent {
                observer(event, child)
            } else {
                // Three boxes, not a tuple in one: see UncheckedSendable.
                let handler = UncheckedSendable(observer), payload = UncheckedSendable(event), target = UncheckedSendable(child)
                _ = home.schedule {
                    if !target.value.isDisposed { handler.value(payload.value, target.value) }
                }
            }
        }), to: child)
        return child
    }

    /// Ends a child that terminated (or is no longer wanted): forgets it, so a long-lived parent
    /// does not grow, then disposes it.
    func endChild(_ child: Subscription) {
        remove(child)
        child.dispose()
    }
}

extension Signal {
    /// Subscribes this signal as a child of `subscription`: its terminal event ends only the child, so
    /// what the operator still holds (a pending value, an event hopping to another scheduler) outlives
    /// the source's end. A consumer's flow control reaches the source. Home thread only.
    func attachAsChild(of subscription: Subscription, _ receive: @escaping (Event<Value>) -> Void) {
        let source = subscription.makeChild()
        subscription.passFlowControl(from: source)
        attach(ClosureObserver(event: { event in
            if event.isTerminating { subscription.endChild(source) }
            receive(event)
        }), to: source)
    }

    /// A signal whose subscribers run `body` (for operators with several inputs or their own timers).
    func operatorSignal<U>(
        _ body: @escaping @Sendable (_ downstream: @escaping (Event<U>) -> Void, _ subscription: Subscription) -> Void
    ) -> Signal<U> {
        OperatorSignal(body)
    }
}

/// The mutable state of one fused operator in one subscription (a running total, a count).
///
/// A class with an unchecked property rather than a captured `var`, which would take a dynamic
/// exclusivity check on every access.
@usableFromInline
final class OperatorVar<Value> {
    // Touched only by the closure that owns it, which runs for one event at a time
    // (on the subscription's home thread, or the thread a hop moved the events to).
    @usableFromInline @exclusivity(unchecked) package var value: Value

    @inlinable
    init(_ value: Value) { self.value = value }
}

/// A first-in first-out queue on a ring of storage: O(1) append and removal at the front.
///
/// Used by `takeLast`, `zip`, queued `flatten` and `ReplaySubject`.
@usableFromInline
struct RingBuffer<Element> {
    // A value type; its owner documents what guards it.
    @usableFromInline var storage: [Element?] = []
    @usableFromInline var head = 0
    @usableFromInline var count = 0

    @usableFromInline
    init() {}

    @usableFromInline
    var isEmpty: Bool { count == 0 }

    @usableFromInline
    mutating func append(_ element: Element) {
        if count == storage.count {
            grow()
        }
        storage[(head + count) % storage.count] = element
        count += 1
    }

    @usableFromInline
    mutating func popFirst() -> Element? {
        if count == 0 { return nil }
        let element = storage[head]
        storage[head] = nil
        head = (head + 1) % storage.count
        count -= 1
        return element
    }

    @usableFromInline
    var first: Element? { count == 0 ? nil : storage[head] }

    @usableFromInline
    var last: Element? { count == 0 ? nil : storage[(head + count - 1) % storage.count] }

    @usableFromInline
    mutating func removeAll() {
        storage = []
        head = 0
        count = 0
    }

    /// The elements, oldest first.
    @usableFromInline
    var elements: [Element] {
        var result: [Element] = []
        result.reserveCapacity(count)
        for offset in 0..<count {
            result.append(storage[(head + offset) % storage.count]!)
        }
        return result
    }

    private mutating func grow() {
        let old = elements
        storage = Array(repeating: nil, count: Swift.max(8, storage.count * 2))
        for (index, element) in old.enumerated() { storage[index] = element }
        head = 0
    }
}

extension Signal {
    /// A signal that fails at once with `EINVAL`: what an operator given a bad argument (a count or interval that is not positive) returns.
    static func invalidArgument(_ message: String, in operation: String) -> Signal<Value> {
        Signal.error(Runtime.provider.invalidArgument(message: message, context: operation))
    }
}
