/// Operators that let some values through and drop others, or end the signal early.
///
/// The one-input ones are fused, with no lock; `take(until:)` and `skip(until:)` subscribe their
/// trigger as a child subscription on the same home.
extension Signal {
    /// Sends only the values that pass `isIncluded` (RAC's `-filter:`).
    ///
    /// - Parameter isIncluded: Called with each value on the home thread; true keeps it.
    ///
    /// Thread rule: safe from any thread.
    @inlinable
    public func filter(_ isIncluded: @escaping @Sendable (Value) -> Bool) -> Signal<Value> {
        fuse { downstream, downstreamNext, _ in
            var valueObserver: ((Value) -> Void)?
            if let next = downstreamNext {
                valueObserver = { value in
                    if isIncluded(value) { next(value) }
                }
            }
            return ClosureObserver(
                event: { event in
                    switch event {
                    case .next(let value):
                        if isIncluded(value) { downstream(event) }
                    case .error, .completed:
                        downstream(event)
                    }
                },
                next: valueObserver)
        }.debugNamed("[\(name)] -filter:")
    }

    /// Drops every value and forwards only the terminal event (RAC's `-ignoreValues`).
    ///
    /// - Returns: A signal that only errors or completes.
    ///
    /// Thread rule: safe from any thread.
    @inlinable
    public func ignoreValues() -> Signal<Value> {
        lift { downstream, _ in
            { event in
                if event.isTerminating { downstream(event) }
            }
        }.debugNamed("[\(name)] -ignoreValues")
    }

    /// Sends at most the first `count` values, then completes and disposes the source (RAC's `-take:`).
    ///
    /// `take(0)` (or a negative count) completes at once without subscribing to the source.
    ///
    /// - Parameter count: How many values to let through.
    ///
    /// Thread rule: safe from any thread.
    @inlinable
    public func take(_ count: Int) -> Signal<Value> {
        if count <= 0 { return Signal.empty.debugNamed("[\(name)] -take: \(count)") }
        return lift { downstream, _ in
            let taken = OperatorVar(0)
            return { event in
                if taken.value == count { return }
                switch event {
                case .next:
                    taken.value += 1
                    downstream(event)
                    if taken.value == count { downstream(.completed) }
                case .error, .completed:
                    taken.value = count
                    downstream(event)
                }
            }
        }.debugNamed("[\(name)] -take: \(count)")
    }

    /// Sends the last `count` values when the signal completes, then completes (RAC's `-takeLast:`).
    ///
    /// Keeps at most `count` values per subscription. An error is forwarded and the kept values dropped.
    ///
    /// - Parameter count: How many of the last values to send; 0 or less sends none.
    ///
    /// Thread rule: safe from any thread.
    @inlinable
    public func takeLast(_ count: Int) -> Signal<Value> {
        lift { downstream, _ in
            let kept = OperatorVar(RingBuffer<Value>())
            return { event in
                switch event {
                case .next(let value):
                    if count <= 0 { return }
                    if kept.value.count == count { _ = kept.value.popFirst() }
                    kept.value.append(value)
                case .error:
                    kept.value.removeAll()
                    downstream(event)
                case .completed:
                    while let value = kept.value.popFirst() { downstream(.next(value)) }
                    downstream(.completed)
                }
            }
        }.debugNamed("[\(name)] -takeLast: \(count)")
    }

    /// Drops the first `count` values (RAC's `-skip:`).
    ///
    /// - Parameter count: How many values to drop.
    ///
    /// Thread rule: safe from any thread.
    @inlinable
    public func skip(_ count: Int) -> Signal<Value> {
        lift { downstream, _ in
            let skipped = OperatorVar(0)
            return { event in
                if case .next = event, skipped.value < count {
                    skipped.value += 1
                    return
                }
                downstream(event)
            }
        }.debugNamed("[\(name)] -skip: \(count)")
    }

    /// Sends values while `predicate` holds; the first value that fails it completes the signal (RAC's `-takeWhileBlock:`).
    ///
    /// - Parameter predicate: Called with each value until it returns false.
    ///
    /// Thread rule: safe from any thread.
    @inlinable
    public func take(while predicate: @escaping @Sendable (Value) -> Bool) -> Signal<Value> {
        lift { downstream, _ in
            let ended = OperatorVar(false)
            return { event in
                if ended.value { return }
                switch event {
                case .next(let value):
                    if predicate(value) {
                        downstream(event)
                    } else {
                        ended.value = true
                        downstream(.completed)
                    }
                case .error, .completed:
                    ended.value = true
                    downstream(event)
                }
            }
        }.debugNamed("[\(name)] -takeWhileBlock:")
    }

    /// Drops values while `predicate` holds, then sends every value from the first that fails it (RAC's `-skipWhileBlock:`).
    ///
    /// - Parameter predicate: Called with each value until it returns false.
    ///
    /// Thread rule: safe from any thread.
    @inlinable
    public func skip(while predicate: @escaping @Sendable (Value) -> Bool) -> Signal<Value> {
        lift { downstream, _ in
            let skipping = OperatorVar(true)
            return { event in
                if skipping.value, case .next(let value) = event {
                    if predicate(value) { return }
                    skipping.value = false
                }
                downstream(event)
            }
        }.debugNamed("[\(name)] -skipWhileBlock:")
    }

    /// Sends values until `trigger` sends a value or completes, then completes (RAC's `-takeUntil:`).
    ///
    /// The trigger is subscribed first, so one that fires at once completes the result without
    /// subscribing to this signal. An error from the trigger is ignored, as in RAC.
    ///
    /// - Parameter trigger: The signal whose first value or completion ends this one.
    ///
    /// Thread rule: safe from any thread.
    public func take<Trigger>(until trigger: Signal<Trigger>) -> Signal<Value> {
        operatorSignal { downstream, subscription in
            let state = OperatorState(downstream)
            subscription.attachRoot(state)
            _ = subscription.attachChild(trigger) { event, child in
                subscription.endChild(child)
                if case .error = event { return }
                state.finish(.completed)
            }
            if state.isDone { return }
            _ = subscription.attachChild(self) { event, child in
                if event.isTerminating { subscription.endChild(child) }
                state.forward(event)
            }
        }.debugNamed("[\(name)] -takeUntil: \(trigger.name)")
    }

    /// Drops values until `trigger` sends a value or completes, then sends every value.
    ///
    /// The trigger is subscribed first and disposed once it fired; an error from it is ignored
    /// (values stay dropped). This signal's error and completion are forwarded at any time.
    ///
    /// - Parameter trigger: The signal whose first value or completion opens the gate.
    ///
    /// Thread rule: safe from any thread.
    public func skip<Trigger>(until trigger: Signal<Trigger>) -> Signal<Value> {
        operatorSignal { downstream, subscription in
            let state = OperatorState(downstream)
            subscription.attachRoot(state)
            let gate = Flag()
            _ = subscription.attachChild(trigger) { event, child in
                subscription.endChild(child)
                if case .error = event { return }
                gate.isSet = true
            }
            _ = subscription.attachChild(self) { event, child in
                if case .next = event, !gate.isSet { return }
                if event.isTerminating { subscription.endChild(child) }
                state.forward(event)
            }
        }.debugNamed("[\(name)] -skipUntil: \(trigger.name)")
    }
}

extension Signal where Value: Equatable {
    /// Drops every value equal to `value` (RAC's `-ignore:`). `value` is shared by every
    /// subscription, so this needs `Sendable` values.
    ///
    /// - Parameter value: The value to drop.
    ///
    /// Thread rule: safe from any thread.
    @inlinable
    public func ignore(_ value: Value) -> Signal<Value> where Value: Sendable {
        filter { $0 != value }.debugNamed("[\(name)] -ignore: \(value)")
    }

    /// Drops each value equal to the one sent just before it (RAC's `-distinctUntilChanged`).
    ///
    /// The first value is always sent. `==` runs on the home thread, so it may not be isolated
    /// to an actor (`SendableMetatype`).
    ///
    /// Thread rule: safe from any thread.
    @inlinable
    public func distinctUntilChanged() -> Signal<Value> where Value: SendableMetatype {
        distinctUntilChanged(by: ==)
    }
}

extension Signal {
    /// Drops each value that `isEquivalent` says equals the one sent just before it.
    ///
    /// - Parameter isEquivalent: Compares the previous sent value with the new one.
    ///
    /// Thread rule: safe from any thread.
    @inlinable
    public func distinctUntilChanged(by isEquivalent: @escaping @Sendable (Value, Value) -> Bool) -> Signal<Value> {
        lift { downstream, _ in
            let last = OperatorVar<Value?>(nil)
            return { event in
                if case .next(let value) = event {
                    if let previous = last.value, isEquivalent(previous, value) { return }
                    last.value = value
                }
                downstream(event)
            }
        }.debugNamed("[\(name)] -distinctUntilChanged")
    }
}

/// A mutable flag shared by closures of one subscription (home thread only).
final class Flag {
    // Touched only on the subscription's home thread.
    var isSet = false
}
