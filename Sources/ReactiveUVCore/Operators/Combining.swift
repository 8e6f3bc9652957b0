/// Operators that combine several signals into one.
///
/// Each input is a child subscription on the result's home, where its events are handled (hopped
/// back if the input delivers elsewhere), so the combining state needs no lock. Disposing the
/// result disposes every input.
extension Signal {
    /// Sends this signal's values, then, once it completed, subscribes to `next` and sends its events (RAC's `-concat:`).
    ///
    /// `next` is subscribed only after this signal completed; an error from this signal ends
    /// the result and `next` is never subscribed.
    ///
    /// - Parameter next: The signal that follows.
    ///
    /// Thread rule: safe from any thread.
    public func concat(_ next: Signal<Value>) -> Signal<Value> {
        followed(by: { next }, values: { $0 }).debugNamed("[\(name)] -concat: \(next.name)")
    }

    /// Ignores this signal's values and, once it completed, sends the events of the signal `next` makes (RAC's `-then:`).
    ///
    /// `next` is called only when this signal completes. An error from this signal is forwarded.
    ///
    /// - Parameter next: Makes the signal that follows.
    ///
    /// Thread rule: safe from any thread.
    public func then<U>(_ next: @escaping @Sendable () -> Signal<U>) -> Signal<U> {
        followed(by: next, values: nil).debugNamed("[\(name)] -then:")
    }

    /// Ignores this signal's values and, once it completed, sends the events of `next` (RAC's `-then:`
    /// given a signal): the same as `then { next }`; `next` is subscribed only then.
    ///
    /// - Parameter next: The signal that follows.
    ///
    /// Thread rule: safe from any thread.
    public func then<U>(_ next: Signal<U>) -> Signal<U> {
        followed(by: { next }, values: nil).debugNamed("[\(name)] -then: \(next.name)")
    }

    private func followed<U>(by makeNext: @escaping @Sendable () -> Signal<U>, values: (@Sendable (Value) -> U)?) -> Signal<U> {
        operatorSignal { downstream, subscription in
            let state = OperatorState(downstream)
            subscription.attachRoot(state)
            _ = subscription.attachChild(self) { event, child in
                switch event {
                case .next(let value):
                    if let values { state.sendNext(values(value)) }
                case .error(let error):
                    subscription.endChild(child)
                    state.finish(.error(error))
                case .completed:
                    subscription.endChild(child)
                    if state.isDone { return }
                    _ = subscription.attachChild(makeNext()) { event, child in
                        if event.isTerminating { subscription.endChild(child) }
                        state.forward(event)
                    }
                }
            }
        }
    }

    /// Pairs this signal's values with `other`'s by index (RAC's `-zipWith:`).
    ///
    /// The n-th values of both sides make the n-th pair, so values wait for their partner. The
    /// result completes as soon as one side has completed with no value left waiting; the other
    /// side's unpaired values are dropped (zipping 1...5 with A...D drops 5). An error from
    /// either side ends the result.
    ///
    /// - Parameter other: The other side.
    /// - Returns: A signal of pairs.
    ///
    /// Thread rule: safe from any thread.
    public func zip<U>(with other: Signal<U>) -> Signal<(Value, U)> {
        Signal<Either<Value, U>>.zip([map(Either.left), other.map(Either.right)])
            .map { pair in (pair[0].left, pair[1].right) }
            .debugNamed("[\(name)] -zipWith: \(other.name)")
    }

    /// Combines the latest value of this signal and of `other` (RAC's `-combineLatestWith:`).
    ///
    /// The first pair is sent once both sides have sent a value; after that, every value of
    /// either side sends a new pair. Completes when both have completed, or as soon as one
    /// completes without a value. An error from either side ends the result.
    ///
    /// - Parameter other: The other side.
    /// - Returns: A signal of pairs.
    ///
    /// Thread rule: safe from any thread.
    public func combineLatest<U>(with other: Signal<U>) -> Signal<(Value, U)> {
        Signal<Either<Value, U>>.combineLatest([map(Either.left), other.map(Either.right)])
            .map { pair in (pair[0].left, pair[1].right) }
            .debugNamed("[\(name)] -combineLatestWith: \(other.name)")
    }

    /// Sends the values of this signal and `other` as they arrive (RAC's `-merge:`).
    ///
    /// Completes when both have completed; an error from either ends the result.
    ///
    /// - Parameter other: The other signal.
    ///
    /// Thread rule: safe from any thread.
    public func merge(with other: Signal<Value>) -> Signal<Value> {
        Signal.merge([self, other]).debugNamed("[\(name)] -merge: \(other.name)")
    }

    /// Pairs each signal's values by index (RAC's `+zip:`).
    ///
    /// The n-th values of every input make the n-th array. Completes as soon as one input has
    /// completed with no value left waiting; unpaired values are dropped. An error from any
    /// input ends the result. No inputs: completes at once.
    ///
    /// - Parameter signals: The inputs, in order.
    /// - Returns: A signal of arrays, one element per input.
    ///
    /// Thread rule: safe from any thread.
    public static func zip(_ signals: [Signal<Value>]) -> Signal<[Value]> {
        combiningIndexed(signals) { ZipState($0, inputs: $1) }.debugNamed("+zip: (\(signals.count) signals)")
    }

    /// Combines the latest value of every signal (RAC's `+combineLatest:`).
    ///
    /// The first array is sent once every input has sent a value; after that, every value of
    /// any input sends a new array. Completes when every input has completed, or as soon as one
    /// completes without a value. An error from any input ends the result. No inputs: completes
    /// at once.
    ///
    /// - Parameter signals: The inputs, in order.
    /// - Returns: A signal of arrays, one element per input.
    ///
    /// Thread rule: safe from any thread.
    public static func combineLatest(_ signals: [Signal<Value>]) -> Signal<[Value]> {
        combiningIndexed(signals) { CombineLatestState($0, inputs: $1) }.debugNamed("+combineLatest: (\(signals.count) signals)")
    }

    /// `zip` and `combineLatest`: each input attached as a child (ended as it terminates), its events
    /// handed to the state with the input's index. No inputs: completes at once.
    private static func combiningIndexed(
        _ signals: [Signal<Value>],
        _ makeState: @escaping @Sendable (@escaping (Event<[Value]>) -> Void, Int) -> IndexedInputsState<Value>
    ) -> Signal<[Value]> {
        if signals.isEmpty { return Signal<[Value]>.empty }
        return OperatorSignal<[Value]> { downstream, subscription in
            let state = makeState(downstream, signals.count)
            subscription.attachRoot(state)
            for (index, signal) in signals.enumerated() {
                if state.isDone { return }
                _ = subscription.attachChild(signal) { event, child in
                    if event.isTerminating { subscription.endChild(child) }
                    state.receive(event, from: index)
                }
            }
        }
    }

    /// Sends the values of every signal as they arrive (RAC's `+merge:`).
    ///
    /// Completes when all have completed; an error from any ends the result. No inputs: completes at once.
    ///
    /// - Parameter signals: The inputs.
    ///
    /// Thread rule: safe from any thread.
    public static func merge(_ signals: [Signal<Value>]) -> Signal<Value> {
        if signals.isEmpty { return Signal.empty }
        return OperatorSignal<Value> { downstream, subscription in
            let state = OperatorState(downstream)
            subscription.attachRoot(state)
            let remaining = Counter(signals.count)
            for signal in signals {
                if state.isDone { return }
                _ = subscription.attachChild(signal) { event, child in
                    switch event {
                    case .next(let value): state.sendNext(value)
                    case .error:
                        subscription.endChild(child)
                        state.finish(event)
                    case .completed:
                        subscription.endChild(child)
                        remaining.value -= 1
                        if remaining.value == 0 { state.finish(.completed) }
                    }
                }
            }
        }.debugNamed("+merge: (\(signals.count) signals)")
    }

    /// Sends this signal's latest value each time `sampler` sends a value (RAC's `-sample:`).
    ///
    /// Nothing is sent for a sampler value before this signal's first value. The result ends
    /// when either signal ends, with its error or completion.
    ///
    /// - Parameter sampler: The signal whose values trigger a sample.
    ///
    /// Thread rule: safe from any thread.
    public func sample<Trigger>(_ sampler: Signal<Trigger>) -> Signal<Value> {
        operatorSignal { downstream, subscription in
            let state = SampleState<Value>(downstream)
            subscription.attachRoot(state)
            _ = subscription.attachChild(self) { event, child in
                switch event {
                case .next(let value): state.latest = value
                case .error, .completed:
                    subscription.endChild(child)
                    state.finish(event)
                }
            }
            if state.isDone { return }
            _ = subscription.attachChild(sampler) { event, child in
                switch event {
                case .next:
                    if let value = state.latest { state.sendNext(value) }
                case .error(let error):
                    subscription.endChild(child)
                    state.finish(.error(error))
                case .completed:
                    subscription.endChild(child)
                    state.finish(.completed)
                }
            }
        }.debugNamed("[\(name)] -sample: \(sampler.name)")
    }
}

extension Signal {
    /// Pairs each value of this signal with the latest value of `other`.
    ///
    /// `other` is subscribed first, so a value it sends at once is there for this signal's first.
    /// A value that comes before `other` sent one is dropped; `other`'s completion only freezes its
    /// latest value. An error from either ends the result; it completes when this signal does.
    ///
    /// RAC: none (`-combineLatestWith:` then `-sample:` comes close;
    /// ReactiveSwift: `withLatest(from:)`); Rx: `withLatestFrom`; Combine:
    /// none (CombineExt's `withLatestFrom`).
    ///
    /// - Parameter other: The signal whose latest value goes with each value.
    /// - Returns: A signal of `(value, latest of other)` pairs.
    ///
    /// Thread rule: safe from any thread.
    public func withLatest<U>(from other: Signal<U>) -> Signal<(Value, U)> {
        operatorSignal { downstream, subscription in
            let state = WithLatestState<Value, U>(downstream)
            subscription.attachRoot(state)
            _ = subscription.attachChild(other) { event, child in
                switch event {
                case .next(let value): state.latest = value
                case .error(let error):
                    subscription.endChild(child)
                    state.finish(.error(error))
                case .completed:
                    subscription.endChild(child)
                }
            }
            if state.isDone { return }
            _ = subscription.attachChild(self) { event, child in
                switch event {
                case .next(let value):
                    if let latest = state.latest { state.sendNext((value, latest)) }
                case .error(let error):
                    subscription.endChild(child)
                    state.finish(.error(error))
                case .completed:
                    subscription.endChild(child)
                    state.finish(.completed)
                }
            }
        }.debugNamed("[\(name)] -withLatestFrom: \(other.name)")
    }
}

/// `withLatest(from:)`'s state: the other signal's latest value.
private final class WithLatestState<Value, Other>: OperatorState<(Value, Other)> {
    // Home thread only.
    var latest: Other?

    override func didFinish() { latest = nil }
}

/// One of two value types, for combining two differently typed signals with the n-ary machinery.
@usableFromInline
enum Either<Left, Right> {
    case left(Left)
    case right(Right)

    var left: Left {
        guard case .left(let value) = self else { preconditionFailure("ReactiveUV: a right value sat in a left slot") }
        return value
    }

    var right: Right {
        guard case .right(let value) = self else { preconditionFailure("ReactiveUV: a left value sat in a right slot") }
        return value
    }
}

/// A counter shared by the closures of one subscription (home thread only).
final class Counter {
    // Touched only on the subscription's home thread.
    package var value: Int
    init(_ value: Int) { self.value = value }
}

/// `sample`'s state: the latest value of the source.
private final class SampleState<Value>: OperatorState<Value> {
    // Home thread only.
    var latest: Value?

    override func didFinish() { latest = nil }
}

/// The state of an operator over indexed inputs (`zip`, `combineLatest`): each input's events, with its index.
private class IndexedInputsState<Value>: OperatorState<[Value]> {
    /// One input's event (home thread); a subclass decides what to send.
    func receive(_ event: Event<Value>, from index: Int) {}
}

/// `zip`'s state: one queue of waiting values per input.
private final class ZipState<Value>: IndexedInputsState<Value> {
    // Home thread only.
    private var queues: [RingBuffer<Value>]
    private var completed: [Bool]

    init(_ downstream: @escaping (Event<[Value]>) -> Void, inputs: Int) {
        queues = Array(repeating: RingBuffer(), count: inputs)
        completed = Array(repeating: false, count: inputs)
        super.init(downstream)
    }

    override func receive(_ event: Event<Value>, from index: Int) {
        if isDone { return }
        switch event {
        case .next(let value):
            queues[index].append(value)
            if queues.allSatisfy({ !$0.isEmpty }) {
                var tuple: [Value] = []
                tuple.reserveCapacity(queues.count)
                for i in queues.indices { tuple.append(queues[i].popFirst()!) }
                sendNext(tuple)
            }
            completeIfExhausted()
        case .error(let error):
            finish(.error(error))
        case .completed:
            completed[index] = true
            completeIfExhausted()
        }
    }

    /// Done once some input has completed and has nothing left to pair.
    private func completeIfExhausted() {
        for i in queues.indices where completed[i] && queues[i].isEmpty {
            finish(.completed)
            return
        }
    }

    override func didFinish() {
        queues = []
    }
}

/// `combineLatest`'s state: the latest value of each input.
private final class CombineLatestState<Value>: IndexedInputsState<Value> {
    // Home thread only.
    private var latest: [Value?]
    private var hasValue: [Bool]
    private var waitingFor: Int
    private var running: Int

    init(_ downstream: @escaping (Event<[Value]>) -> Void, inputs: Int) {
        latest = Array(repeating: nil, count: inputs)
        hasValue = Array(repeating: false, count: inputs)
        waitingFor = inputs
        running = inputs
        super.init(downstream)
    }

    override func receive(_ event: Event<Value>, from index: Int) {
        if isDone { return }
        switch event {
        case .next(let value):
            latest[index] = value
            if !hasValue[index] {
                hasValue[index] = true
                waitingFor -= 1
            }
            if waitingFor == 0 { sendNext(latest.map { $0! }) }
        case .error(let error):
            finish(.error(error))
        case .completed:
            running -= 1
            // An input that ends without a value means no combination can ever be sent.
            if !hasValue[index] || running == 0 { finish(.completed) }
        }
    }

    override func didFinish() {
        latest = []
    }
}
