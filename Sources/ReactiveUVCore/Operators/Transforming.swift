/// Operators that turn each value (or the whole sequence) into something else.
///
/// All are fused (`lift`, or `fuse` for those that pass plain values): each adds a direct call
/// to the subscription's chain and keeps its state per subscription, with no lock.
extension Signal {
    /// Transforms each value (RAC's `-map:`).
    ///
    /// - Parameter transform: Applied to each value, on the subscription's home thread.
    /// - Returns: A signal of the transformed values; errors and completion pass through.
    ///
    /// Thread rule: safe from any thread.
    @inlinable
    public func map<U>(_ transform: @escaping @Sendable (Value) -> U) -> Signal<U> {
        fuse { downstream, downstreamNext, _ in
            // `if let`, not `Optional.map`, which would reabstract the closure into thunks per value.
            var valueObserver: ((Value) -> Void)?
            if let next = downstreamNext {
                valueObserver = { value in next(transform(value)) }
            }
            return ClosureObserver(
                event: { event in
                    switch event {
                    case .next(let value): downstream(.next(transform(value)))
                    case .error(let error): downstream(.error(error))
                    case .completed: downstream(.completed)
                    }
                },
                next: valueObserver)
        }.debugNamed("[\(name)] -map:")
    }

    /// Transforms each value and drops those the transform turns into nil.
    ///
    /// RAC: `-filter:` then `-map:`; ReactiveSwift, RxSwift: `compactMap`; Combine: `compactMap(_:)`.
    ///
    /// - Parameter transform: Applied to each value, on the subscription's home thread; nil drops the value.
    /// - Returns: A signal of the non-nil results; errors and completion pass through.
    ///
    /// Thread rule: safe from any thread.
    @inlinable
    public func compactMap<U>(_ transform: @escaping @Sendable (Value) -> U?) -> Signal<U> {
        fuse { downstream, downstreamNext, _ in
            var valueObserver: ((Value) -> Void)?
            if let next = downstreamNext {
                valueObserver = { value in
                    if let result = transform(value) { next(result) }
                }
            }
            return ClosureObserver(
                event: { event in
                    switch event {
                    case .next(let value):
                        if let result = transform(value) { downstream(.next(result)) }
                    case .error(let error): downstream(.error(error))
                    case .completed: downstream(.completed)
                    }
                },
                next: valueObserver)
        }.debugNamed("[\(name)] -compactMap:")
    }

    /// Replaces each value with the same constant (RAC's `-mapReplace:`).
    ///
    /// The constant is `Sendable`: every subscription sends it, possibly on several loops at once.
    ///
    /// - Parameter replacement: The value sent for every value of this signal.
    ///
    /// Thread rule: safe from any thread.
    @inlinable
    public func mapReplace<U: Sendable>(_ replacement: U) -> Signal<U> {
        map { _ in replacement }.debugNamed("[\(name)] -mapReplace: \(replacement)")
    }

    /// Transforms each value with a function that may throw; a thrown error ends the signal with that error.
    ///
    /// After the error nothing more is sent, and the source is disposed.
    ///
    /// - Parameter transform: Applied to each value; throw to fail the signal.
    /// - Returns: The signal of transformed values.
    ///
    /// Thread rule: safe from any thread.
    @inlinable
    public func tryMap<U>(_ transform: @escaping @Sendable (Value) throws -> U) -> Signal<U> {
        lift { downstream, _ in
            let failed = OperatorVar(false)
            return { event in
                if failed.value { return }
                switch event {
                case .next(let value):
                    let result: U
                    do {
                        result = try transform(value)
                    } catch {
                        failed.value = true
                        downstream(.error(error))
                        return
                    }
                    downstream(.next(result))
                case .error(let error): downstream(.error(error))
                case .completed: downstream(.completed)
                }
            }
        }.debugNamed("[\(name)] -tryMap:")
    }

    /// Sends a running combination of the values, starting from `start` (RAC's `-scanWithStart:reduce:`).
    ///
    /// For values v1, v2, ... it sends combine(start, v1), combine(that, v2), ..., with a running
    /// state per subscription. `start` is `Sendable`: subscriptions on several loops share it.
    ///
    /// - Parameters:
    ///   - start: The state before the first value.
    ///   - combine: Makes the next state from the running state and a value.
    /// - Returns: The signal of running states.
    ///
    /// Thread rule: safe from any thread.
    @inlinable
    public func scan<State: Sendable>(_ start: State, _ combine: @escaping @Sendable (State, Value) -> State) -> Signal<State> {
        fuse { downstream, downstreamNext, _ in
            let running = OperatorVar(start)
            var valueObserver: ((Value) -> Void)?
            if let next = downstreamNext {
                valueObserver = { value in
                    running.value = combine(running.value, value)
                    next(running.value)
                }
            }
            return ClosureObserver(
                event: { event in
                    switch event {
                    case .next(let value):
                        running.value = combine(running.value, value)
                        downstream(.next(running.value))
                    case .error(let error): downstream(.error(error))
                    case .completed: downstream(.completed)
                    }
                },
                next: valueObserver)
        }.debugNamed("[\(name)] -scanWithStart:reduce:")
    }

    /// Sends each value paired with the one before it; the first value is paired with `start`
    /// (RAC's `-combinePreviousWithStart:reduce:`, returning the pair). `start` is shared by every
    /// subscription, so this needs `Sendable` values.
    ///
    /// - Parameter start: The "previous" value for the first value.
    /// - Returns: A signal of `(previous, current)` pairs.
    ///
    /// Thread rule: safe from any thread.
    @inlinable
    public func combinePrevious(_ start: Value) -> Signal<(Value, Value)> where Value: Sendable {
        lift { downstream, _ in
            let previous = OperatorVar(start)
            return { event in
                switch event {
                case .next(let value):
                    let pair = (previous.value, value)
                    previous.value = value
                    downstream(.next(pair))
                case .error(let error): downstream(.error(error))
                case .completed: downstream(.completed)
                }
            }
        }.debugNamed("[\(name)] -combinePreviousWithStart: \(start)")
    }

    /// Folds every value into one result sent when the signal completes (RAC's `-aggregateWithStart:reduce:`).
    ///
    /// An empty signal sends `start`. An error is forwarded and nothing is sent for the values
    /// before it. `start` is `Sendable`: subscriptions on several loops share it.
    ///
    /// - Parameters:
    ///   - start: The initial result.
    ///   - combine: Folds a value into the running result.
    /// - Returns: A signal of one value, then completion.
    ///
    /// Thread rule: safe from any thread.
    @inlinable
    public func aggregate<State: Sendable>(_ start: State, _ combine: @escaping @Sendable (State, Value) -> State) -> Signal<State> {
        lift { downstream, _ in
            let running = OperatorVar(start)
            return { event in
                switch event {
                case .next(let value): running.value = combine(running.value, value)
                case .error(let error): downstream(.error(error))
                case .completed:
                    downstream(.next(running.value))
                    downstream(.completed)
                }
            }
        }.debugNamed("[\(name)] -aggregateWithStart:reduce:")
    }

    /// Collects every value into one array sent when the signal completes (RAC's `-collect`).
    ///
    /// An empty signal sends `[]`. An error is forwarded and the collected values are dropped.
    ///
    /// - Returns: A signal of one array, then completion.
    ///
    /// Thread rule: safe from any thread.
    @inlinable
    public func collect() -> Signal<[Value]> {
        // Not `aggregate([])`: the array is made per subscription, so values need not be Sendable.
        lift { downstream, _ in
            let collected = OperatorVar([Value]())
            return { event in
                switch event {
                case .next(let value): collected.value.append(value)
                case .error(let error): downstream(.error(error))
                case .completed:
                    downstream(.next(collected.value))
                    downstream(.completed)
                }
            }
        }.debugNamed("[\(name)] -collect")
    }

    /// Sends `value` first, then this signal's events (RAC's `-startWith:`).
    ///
    /// - Parameter value: The value sent at once on subscription.
    ///
    /// Thread rule: safe from any thread.
    public func startWith(_ value: Value) -> Signal<Value> {
        Signal.return(value).concat(self).debugNamed("[\(name)] -startWith: \(value)")
    }

    /// Turns every event into a value: `next(v)` becomes `next(.next(v))`, and a
    /// terminal event becomes a value followed by completion (RAC's `-materialize`).
    ///
    /// - Returns: A signal of events that never fails.
    ///
    /// Thread rule: safe from any thread.
    @inlinable
    public func materialize() -> Signal<Event<Value>> {
        lift { downstream, _ in
            { event in
                downstream(.next(event))
                if event.isTerminating { downstream(.completed) }
            }
        }.debugNamed("[\(name)] -materialize")
    }

    /// Turns materialized events back into events (RAC's `-dematerialize`).
    ///
    /// A `.next(.error(e))` value ends the signal with `e`; `.next(.completed)` completes it.
    ///
    /// - Returns: The signal the events describe.
    ///
    /// Thread rule: safe from any thread.
    @inlinable
    public func dematerialize<U>() -> Signal<U> where Value == Event<U> {
        lift { downstream, _ in
            let ended = OperatorVar(false)
            return { event in
                if ended.value { return }
                switch event {
                case .next(let inner):
                    if inner.isTerminating { ended.value = true }
                    downstream(inner)
                case .error(let error): downstream(.error(error))
                case .completed: downstream(.completed)
                }
            }
        }.debugNamed("[\(name)] -dematerialize")
    }
}
