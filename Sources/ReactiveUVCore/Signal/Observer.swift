/// What a signal delivers events to: the one observer type of the core.
///
/// Every `Signal.attach(_:to:)` takes one, and every gate (`Subscriber`) holds
/// one. It comes in two kinds, each a final subclass:
/// - `Sink`: the end of `subscribe`, the user's `next`/`error`/`completed`
///   (and the dispose handshake in front of them);
/// - `ClosureObserver`: an operator's closures, `event` for every event and,
///   for fused operators (`map`, `filter`, `scan`), `next`, the value
///   shortcut, which does what `event(.next(value))` does without building
///   the event.
///
/// `receive` and `receiveNext` pick the subclass by `kind` and call it
/// directly instead of overriding: both are `@inlinable`, so a client (or an
/// I/O source of a concrete type) specializes the whole delivery; an override
/// of a generic class's method, called through the base class, would run its
/// unspecialized body (Swift does not specialize vtable entries per instance).
///
/// Home thread only (or the thread `deliver(on:)` and time operators with a
/// scheduler move the events to), one event at a time.
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
    /// and the observer has one. A sink makes them now (`Sink.makeClosures`); a closure observer is
    /// that already.
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

/// An operator's observer: the closures it made for one subscription.
///
/// Made on the home thread when the operator is attached; the closures share
/// the operator's state for that subscription (`OperatorVar`) and must treat a
/// value alike.
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
