/// What a signal delivers events to: a `Sink` (the end of `subscribe`) or a `ClosureObserver`
/// (an operator's closures, with a value shortcut for fused operators).
///
/// `receive` and `receiveNext` switch on `kind` instead of overriding: an override of a generic
/// class's method runs unspecialized, while these inline into a client that knows the types.
///
/// Home thread only (or the thread `deliver(on:)` moved the events to), one event at a time.
@usableFromInline
package class Observer<Value> {
    // `kind` is immutable; subclasses document their own state.
    /// Which subclass this is.
    @usableFromInline package let kind: ObserverKind

    @usableFromInline
    init(kind: ObserverKind) {
        self.kind = kind
    }

    /// Receives any event.
    @inlinable
    final func receive(_ event: Event<Value>) {
        if kind == .sink {
            unsafeDowncast(self, to: Sink<Value>.self).handle(event)
        } else {
            unsafeDowncast(self, to: ClosureObserver<Value>.self).event(event)
        }
    }

    /// Receives a value: `receive(.next(value))`, without building the event where the observer can take the value itself.
    @inlinable
    final func receiveNext(_ value: Value) {
        switch kind {
        case .values:
            // `next?(value)`, not `if let`: binding the closure would retain and release it per value.
            unsafeDowncast(self, to: ClosureObserver<Value>.self).next?(value)
        case .sink:
            unsafeDowncast(self, to: Sink<Value>.self).handleNext(value)
        case .events:
            unsafeDowncast(self, to: ClosureObserver<Value>.self).event(.next(value))
        }
    }

    /// This observer as an operator's downstream: closures, with the value shortcut if `values`
    /// and the observer has one.
    @inlinable
    final func closures(values: Bool) -> ClosureObserver<Value> {
        if kind == .sink {
            let sink = unsafeDowncast(self, to: Sink<Value>.self)
            return sink.makeClosures(sink, values)
        }
        return unsafeDowncast(self, to: ClosureObserver<Value>.self)
    }
}

/// The kinds of `Observer`.
@usableFromInline
package enum ObserverKind: UInt8 {
    /// A `ClosureObserver` with a value shortcut (a fused operator, or a sink's handlers).
    case values
    /// A `ClosureObserver` that takes every event through `event` (other operators).
    case events
    /// A `Sink`.
    case sink
}

/// An operator's observer: the closures it made for one subscription, on its home thread. They
/// share the operator's state (`OperatorVar`) and must treat a value alike.
@usableFromInline
final class ClosureObserver<Value>: Observer<Value> {
    // Immutable.
    /// Takes every event.
    @usableFromInline let event: (Event<Value>) -> Void
    /// Does what `event(.next(value))` does (fused operators only).
    @usableFromInline let next: ((Value) -> Void)?

    @inlinable
    init(event: @escaping (Event<Value>) -> Void, next: ((Value) -> Void)? = nil) {
        self.event = event
        self.next = next
        super.init(kind: next == nil ? .events : .values)
    }
}
