import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The end of a chain: the user's `next`/`error`/`completed`, behind the dispose handshake.
///
/// The handshake sits here, at the end, which may run on another thread than the source's gate
/// (`deliver(on:)`). On a terminal event the subscription is disposed first, as in RAC.
@usableFromInline
package final class Sink<Value>: Observer<Value> {
    // Stored vars are touched only on the thread the chain's end runs on; the rest is immutable.
    /// A `let`, so a value is delivered without retaining the closure.
    @usableFromInline let next: ((Value) -> Void)?
    @usableFromInline @exclusivity(unchecked) var error: ((any Error) -> Void)?
    @usableFromInline @exclusivity(unchecked) var completed: (() -> Void)?
    @usableFromInline package let subscription: Subscription
    /// Makes the closures operators call this sink through; built here so it is specialized where `subscribe` is.
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

    /// Any event, through the subscription's dispose handshake.
    @inlinable
    func handle(_ event: Event<Value>) {
        switch event {
        case .next(let value): handleNext(value)
        case .error(let failure): handleError(failure)
        case .completed: handleCompleted()
        }
    }

    /// `handle(.completed)`, without building an `Event`.
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
        // Moved out (no retain); the one that does not run is released now.
        var onError = error.take()
        var onCompleted = completed.take()
        if failure == nil { onError = nil } else { onCompleted = nil }
        subscription.dispose()
        if let failure { onError?(failure) } else { onCompleted?() }
    }

    /// `handle(.next(value))`, without building the event.
    @inlinable
    package func handleNext(_ value: Value) {
        let entry = subscription.enterDelivery()
        if entry == .refused { return }
        next?(value)
        subscription.leaveDelivery(entry)
    }

    /// `handleNext(value)` inside a delivery the caller entered on this subscription and thread
    /// (a burst): only the disposed flag is checked.
    @inlinable
    @inline(__always)
    func handleNextInBurst(_ value: Value) {
        if subscription.disposedFlag.load(ordering: .relaxed) { return }
        next?(value)
    }
}
