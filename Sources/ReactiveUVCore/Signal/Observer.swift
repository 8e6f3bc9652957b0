/// What a signal delivers events to: a `Sink` (the end of `subscribe`) or a `ClosureObserver`
/// (an operator's closures, with a value shortcut for fused operators).
///
/// `receive` and `receiveNext` switch on `kind` rather than overriding: an override of a generic
/// class's method runs unspecialized, these inline. Home thread only, one event at a time.
@usableFromInline
package class Observer<Value> {
    @usableFromInline package let kind: ObserverKind

    @usableFromInline
    init(kind: ObserverKind) {
        self.kind = kind
    }

    @inlinable
    final func receive(_ event: Event<Value>) {
        if kind == .sink {
            unsafeDowncast(self, to: Sink<Value>.self).handle(event)
        } else {
            unsafeDowncast(self, to: ClosureObserver<Value>.self).event(event)
        }
    }

    /// `receive(.next(value))`, without building the event where the observer takes the value itself.
    @inlinable
    final func receiveNext(_ value: Value) {
        switch kind {
        case .values:
            // Not `if let`: binding the closure would retain and release it per value.
            unsafeDowncast(self, to: ClosureObserver<Value>.self).next?(value)
        case .sink:
            unsafeDowncast(self, to: Sink<Value>.self).handleNext(value)
        case .events:
            unsafeDowncast(self, to: ClosureObserver<Value>.self).event(.next(value))
        }
    }

    /// This observer as an operator's downstream: closures, with the value shortcut if `values`.
    @inlinable
    final func closures(values: Bool) -> ClosureObserver<Value> {
        if kind == .sink {
            let sink = unsafeDowncast(self, to: Sink<Value>.self)
            return sink.makeClosures(sink, values)
        }
        return unsafeDowncast(self, to: ClosureObserver<Value>.self)
    }
}

@usableFromInline
package enum ObserverKind: UInt8 {
    /// A `ClosureObserver` with a value shortcut (a fused operator, or a sink's handlers).
    case values
    /// A `ClosureObserver` that takes every event through `event` (other operators).
    case events
    case sink
}

/// An operator's closures for one subscription, on its home thread; they share the operator's
/// state (`OperatorVar`) and must treat a value alike.
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
