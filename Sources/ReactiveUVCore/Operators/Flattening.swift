/// Operators that turn values into signals and flatten them: `bind`, `flatMap`,
/// `flatten(maxConcurrent:)`, `concat()`, `switchToLatest()`.
///
/// The outer and inner signals are child subscriptions on the result's home; a finished inner
/// is removed at once, so a long-lived flatMap does not grow. Inners that complete synchronously
/// are drained in a loop, not by recursion, so the stack stays flat.
extension Signal {
    /// RAC's `-bind:`, the primitive the other flattening operators are built on.
    ///
    /// The six rules:
    /// 1. subscribing the result subscribes this signal (and calls `makeBinding` once, for this subscription);
    /// 2. each value is transformed by the binding into a signal;
    /// 3. that signal is subscribed at once and its values are forwarded;
    /// 4. the binding can stop: by setting its `stop` argument to true, or by
    ///    returning nil; this signal is then disposed (a signal returned along
    ///    with `stop` still runs);
    /// 5. the result completes when this signal has completed (or was stopped)
    ///    and every inner signal has completed;
    /// 6. an error from this signal or any inner signal is forwarded at once and ends everything.
    ///
    /// - Parameter makeBinding: Called once per subscription; returns the binding
    ///   `(value, &stop) -> Signal<U>?`.
    ///
    /// Thread rule: safe from any thread; the binding runs on the subscription's home thread.
    public func bind<U>(_ makeBinding: @escaping @Sendable () -> (Value, inout Bool) -> Signal<U>?) -> Signal<U> {
        operatorSignal { downstream, subscription in
            let binding = makeBinding()
            let state = FlattenState<U>(downstream, subscription: subscription, maxConcurrent: 0)
            subscription.attachRoot(state)
            state.start(outer: self) { value, outer in
                var stop = false
                let inner = binding(value, &stop)
                if let inner { state.add(inner) }
                if inner == nil || stop { state.stopOuter(outer) }
            }
        }.debugNamed("[\(name)] -bind:")
    }

    /// Maps each value to a signal and merges their values (RAC's `-flattenMap:`).
    ///
    /// Every inner signal runs at once; the result completes when this signal and every inner
    /// have completed. An error from any ends it.
    ///
    /// - Parameter transform: Makes the inner signal for a value.
    /// - Returns: The merged signal of inner values.
    ///
    /// Thread rule: safe from any thread.
    public func flatMap<U>(_ transform: @escaping @Sendable (Value) -> Signal<U>) -> Signal<U> {
        flattening(maxConcurrent: 0, transform).debugNamed("[\(name)] -flattenMap:")
    }

    /// Maps each value to a signal, running at most `maxConcurrent` at a time and queueing the rest.
    ///
    /// - Parameters:
    ///   - maxConcurrent: How many inner signals may run at once; 0 (or less) means no limit.
    ///   - transform: Makes the inner signal for a value.
    ///
    /// Thread rule: safe from any thread.
    public func flatMap<U>(maxConcurrent: Int, _ transform: @escaping @Sendable (Value) -> Signal<U>) -> Signal<U> {
        flattening(maxConcurrent: max(0, maxConcurrent), transform).debugNamed("[\(name)] -flattenMap: (max \(maxConcurrent))")
    }

    func flattening<U>(maxConcurrent: Int, _ transform: @escaping @Sendable (Value) -> Signal<U>) -> Signal<U> {
        operatorSignal { downstream, subscription in
            let state = FlattenState<U>(downstream, subscription: subscription, maxConcurrent: maxConcurrent)
            subscription.attachRoot(state)
            state.start(outer: self) { value, _ in state.add(transform(value)) }
        }
    }

    /// Maps each value to a signal; each new inner signal replaces (disposes) the previous one.
    ///
    /// - Parameter transform: Makes the inner signal for a value.
    /// - Returns: The signal of the latest inner signal's values.
    ///
    /// Thread rule: safe from any thread.
    public func flatMapLatest<U>(_ transform: @escaping @Sendable (Value) -> Signal<U>) -> Signal<U> {
        map(transform).switchToLatest()
    }
}

extension Signal {
    /// Merges the signals this signal sends, at most `maxConcurrent` at a time (RAC's `-flatten:`).
    ///
    /// Inner signals beyond the limit wait in arrival order and start as running ones complete.
    /// Completes when this signal and every inner have completed; an error from any ends it.
    ///
    /// - Parameter maxConcurrent: How many inner signals may run at once; 0 (the default) means no limit.
    ///
    /// Thread rule: safe from any thread.
    public func flatten<U>(maxConcurrent: Int = 0) -> Signal<U> where Value == Signal<U> {
        flattening(maxConcurrent: max(0, maxConcurrent)) { $0 }.debugNamed("[\(name)] -flatten: \(maxConcurrent)")
    }

    /// Sends the events of each signal this signal sends, one after the other (RAC's `-concat` on a signal of signals).
    ///
    /// The next inner signal is subscribed only when the previous one completed.
    ///
    /// Thread rule: safe from any thread.
    public func concat<U>() -> Signal<U> where Value == Signal<U> {
        flattening(maxConcurrent: 1) { $0 }.debugNamed("[\(name)] -concat")
    }

    /// Sends the events of the latest signal this signal sent, disposing the previous one (RAC's `-switchToLatest`).
    ///
    /// Completes when this signal and the latest inner have completed; an error from either ends it.
    ///
    /// Thread rule: safe from any thread.
    public func switchToLatest<U>() -> Signal<U> where Value == Signal<U> {
        operatorSignal { downstream, subscription in
            let state = SwitchState<U>(downstream)
            subscription.attachRoot(state)
            _ = subscription.attachChild(self) { event, outer in
                switch event {
                case .next(let inner):
                    state.switchTo(inner, in: subscription)
                case .error(let error):
                    subscription.endChild(outer)
                    state.finish(.error(error))
                case .completed:
                    subscription.endChild(outer)
                    state.outerCompleted = true
                    if !state.innerRunning { state.finish(.completed) }
                }
            }
        }.debugNamed("[\(name)] -switchToLatest")
    }
}

/// The state of one `bind`/`flatMap`/`flatten` subscription.
final class FlattenState<Inner>: OperatorState<Inner> {
    // Home thread only (every input is hopped there by `attachChild`).
    private let subscription: Subscription
    private let maxConcurrent: Int
    private var queued = RingBuffer<Signal<Inner>>()
    private var running = 0
    private var outerDone = false
    private var draining = false

    init(_ downstream: @escaping (Event<Inner>) -> Void, subscription: Subscription, maxConcurrent: Int) {
        self.subscription = subscription
        self.maxConcurrent = maxConcurrent
        super.init(downstream)
    }

    /// Subscribes the outer signal; `onValue` gets each value and the outer child (to stop it).
    package func start<Outer>(outer signal: Signal<Outer>, onValue: @escaping (Outer, Subscription) -> Void) {
        _ = subscription.attachChild(signal) { [self] event, outer in
            switch event {
            case .next(let value):
                if !isDone { onValue(value, outer) }
            case .error(let error):
                subscription.endChild(outer)
                finish(.error(error))
            case .completed:
                stopOuter(outer)
            }
        }
    }

    /// Ends the outer signal (completed, or stopped by the binding); the result completes once the inners have.
    func stopOuter(_ outer: Subscription) {
        subscription.endChild(outer)
        outerDone = true
        completeIfFinished()
    }

    /// Queues an inner signal and starts as many queued ones as the limit allows.
    func add(_ inner: Signal<Inner>) {
        if isDone { return }
        queued.append(inner)
        drain()
    }

    private func drain() {
        // Inners that complete synchronously call back in here: the loop picks up the next instead.
        if draining { return }
        draining = true
        while !isDone, maxConcurrent == 0 || running < maxConcurrent, let next = queued.popFirst() {
            subscribeInner(next)
        }
        draining = false
        completeIfFinished()
    }

    private func subscribeInner(_ inner: Signal<Inner>) {
        running += 1
        _ = subscription.attachChild(inner) { [self] event, child in
            switch event {
            case .next(let value):
                sendNext(value)
            case .error(let error):
                subscription.endChild(child)
                finish(.error(error))
            case .completed:
                subscription.endChild(child)
                running -= 1
                drain()
            }
        }
    }

    private func completeIfFinished() {
        if outerDone, running == 0, queued.isEmpty, !draining { finish(.completed) }
    }

    override func didFinish() {
        queued.removeAll()
    }
}

/// The state of one `switchToLatest` subscription.
final class SwitchState<Inner>: OperatorState<Inner> {
    // Home thread only.
    private var current: Subscription?
    private var generation = 0
    private(set) var innerRunning = false
    var outerCompleted = false

    func switchTo(_ inner: Signal<Inner>, in subscription: Subscription) {
        if isDone { return }
        if let previous = current {
            current = nil
            subscription.endChild(previous)
        }
        generation += 1
        let mine = generation
        innerRunning = true
        let child = subscription.attachChild(inner) { [self] event, child in
            switch event {
            case .next(let value):
                if mine == generation { sendNext(value) }
            case .error(let error):
                subscription.endChild(child)
                finish(.error(error))
            case .completed:
                subscription.endChild(child)
                guard mine == generation else { return }
                innerRunning = false
                current = nil
                if outerCompleted { finish(.completed) }
            }
        }
        // An inner that completed synchronously has already ended its child.
        if mine == generation, innerRunning { current = child }
    }

    override func didFinish() {
        current = nil
    }
}
