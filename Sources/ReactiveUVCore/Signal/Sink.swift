import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The end of a chain: the user's `next`/`error`/`completed`, behind the dispose handshake.
///
/// The kind of `Observer` that `subscribe` makes. A gate (`Subscriber`) of a
/// subject or a signal made with `Signal { ... }` holds the sink itself and
/// calls it directly; operators call it through the closures it makes
/// (`makeClosures`), which are built only when an operator asks for them.
///
/// The handshake (`DeliveryHandshake.enterDelivery`, written once there): the
/// outermost delivery publishes its thread in `subscription.delivering`
/// before it checks the disposed flag (both sequentially consistent), and
/// `Subscription.dispose()` sets the flag first. So once `dispose()` has
/// returned no callback begins; it never waits for one in progress (that is
/// `disposeAndWait()`, which suspends instead: see `DeliveryHandshake`). A
/// delivery on a thread that already published (a nested, re-entrant one, or
/// one inside a burst an operator opened around many values, as the framing
/// operators do per chunk) only checks the flag, and `disposeAndWait()`
/// awaited from inside a callback does not wait for itself. It sits here, at the end, because
/// the end may run on another thread than the source's gate (`deliver(on:)`,
/// a time operator given a scheduler).
///
/// On a terminal event the subscription is disposed first and the callback
/// runs after, as RAC's subscriber does; the callbacks are then released.
@usableFromInline
package final class Sink<Value>: Observer<Value> {
    // All stored vars are touched only on the thread the chain's end runs on (the home, or the
    // scheduler `deliver(on:)` moved it to); the rest is immutable.
    /// A `let` so a value is delivered without retaining the closure; it is freed with the sink at teardown.
    @usableFromInline let next: ((Value) -> Void)?
    @usableFromInline @exclusivity(unchecked) var error: ((any Error) -> Void)?
    @usableFromInline @exclusivity(unchecked) var completed: (() -> Void)?
    @usableFromInline package let subscription: Subscription
    /// Makes the closures operators call this sink through (with the value shortcut when asked).
    /// A function without captures (storing it allocates nothing), written here so it is
    /// specialized where `subscribe` is, like the closures it makes.
    @usableFromInline let makeClosures: (_ sink: Sink<Value>, _ values: Bool) -> ClosureObserver<Value>

    @inlinable
    package init(next: ((Value) -> Void)?, error: ((any Error) -> Void)?, completed: (() -> Void)?, subscription: Subscription) {
        self.next = next
        self.error = error
        self.completed = completed
        self.subscription = subscription
        makeClosures = { sink, values in
            ClosureObserver(event: { sink.handle($0) }, next: values ? { sink.handleNext($0) } : nil)
        }
        super.init(kind: .sink)
    }

    /// Any event, through the subscription's dispose handshake (`DeliveryHandshake.enterDelivery`).
    @inlinable
    func handle(_ event: Event<Value>) {
        switch event {
        case .next(let value): handleNext(value)
        case .error(let failure): handleError(failure)
        case .completed: handleCompleted()
        }
    }

    /// `handle(.completed)`, without building the event (an `Event` of a large value is copied
    /// about: a stat's is 145 bytes).
    @inlinable
    package func handleCompleted() {
        handleEnd(failure: nil)
    }

    /// `handle(.error(failure))`, without building the event.
    @inlinable
    package func handleError(_ failure: any Error) {
        handleEnd(failure: failure)
    }

    /// The terminal event: the subscription is disposed first, then `error` or `completed` runs.
    @inlinable
    func handleEnd(failure: (any Error)?) {
        let entry = subscription.enterDelivery()
        if entry == .refused { return }
        defer { subscription.leaveDelivery(entry) }
        // Both are moved out (no retain); the one that does not run is released now, the other once it ran.
        var onError = error.take()
        var onCompleted = completed.take()
        if failure == nil { onError = nil } else { onCompleted = nil }
        subscription.dispose()
        if let failure { onError?(failure) } else { onCompleted?() }
    }

    /// `handle(.next(value))`, without building the event: the value's delivery through the dispose handshake.
    @inlinable
    package func handleNext(_ value: Value) {
        let entry = subscription.enterDelivery()
        if entry == .refused { return }
        next?(value)
        subscription.leaveDelivery(entry)
    }

    /// `handleNext(value)` inside a delivery its caller entered on this sink's subscription, on
    /// this thread (`DeliveryHandshake.enterDelivery`, not refused), as an operator does around a burst
    /// of values: the handshake's joined path, so only the disposed flag, then the callback.
    @inlinable
    @inline(__always)
    func handleNextInBurst(_ value: Value) {
        if subscription.disposedFlag.load(ordering: .relaxed) { return }
        next?(value)
    }
}
