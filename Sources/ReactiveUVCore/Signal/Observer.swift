/// What a signal delivers events to: the subscription's own sink (`subscribe(next:error:completed:)`,
/// a `SinkSubscription`), or an operator's closures (`ClosureObserver`, with a value shortcut for fused operators).
///
/// An enum of two references, one word: a switch, not an override (an override of a generic class's
/// method runs unspecialized). A `.sink` travels only with its own subscription: operators that
/// subscribe elsewhere (a child, another home) attach closures. Home thread only, one event at a time.
@usableFromInline
package enum Observer<Value> {
    /// The subscription itself, which holds the callbacks.
    case sink(SinkSubscription<Value>)
    case closures(ClosureObserver<Value>)

    /// What the gate in front of this observer does with a value.
    @inlinable
    package var kind: ObserverKind {
        switch self {
        case .sink: .sink
        case .closures(let closures): closures.kind
        }
    }

    /// The subscription's own sink, if this is it.
    @inlinable
    package var sink: SinkSubscription<Value>? {
        if case .sink(let sink) = self { return sink }
        return nil
    }

    @inlinable
    func receive(_ event: Event<Value>) {
        switch self {
        case .sink(let sink): sink.handle(event)
        case .closures(let closures): closures.event(event)
        }
    }

    /// `receive(.next(value))`, without building the event where the observer takes the value itself.
    @inlinable
    func receiveNext(_ value: Value) {
        switch self {
        case .sink(let sink): sink.handleNext(value)
        case .closures(let closures): closures.receiveNext(value)
        }
    }

    /// This observer as an operator's downstream: closures, with the value shortcut if `values`. A
    /// sink hands its callbacks over to a `Sink` the closures call (see `SinkSubscription.makeEnd`).
    @inlinable
    func closures(values: Bool) -> ClosureObserver<Value> {
        switch self {
        case .sink(let sink): sink.makeClosures(sink, values)
        case .closures(let closures): closures
        }
    }
}

@usableFromInline
package enum ObserverKind: UInt8 {
    /// A `ClosureObserver` with a value shortcut (a fused operator, or a sink's handlers).
    case values
    /// A `ClosureObserver` that takes every event through `event` (other operators).
    case events
    /// The subscription's own sink.
    case sink
}

/// An operator's closures for one subscription, on its home thread; they share the operator's
/// state (`OperatorVar`) and must treat a value alike.
@usableFromInline
package final class ClosureObserver<Value> {
    // Immutable.
    /// Takes every event.
    @usableFromInline let event: (Event<Value>) -> Void
    /// Does what `event(.next(value))` does (fused operators only).
    @usableFromInline let next: ((Value) -> Void)?
    /// `.values` when `next` is set, else `.events`.
    @usableFromInline let kind: ObserverKind

    @inlinable
    init(event: @escaping (Event<Value>) -> Void, next: ((Value) -> Void)? = nil) {
        self.event = event
        self.next = next
        kind = next == nil ? .events : .values
    }

    /// `event(.next(value))`, through the value shortcut when there is one.
    @inlinable
    final func receiveNext(_ value: Value) {
        if kind == .values {
            // Not `if let`: binding the closure would retain and release it per value.
            next?(value)
        } else {
            event(.next(value))
        }
    }
}
