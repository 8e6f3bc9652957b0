import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The end of a chain: the subscriber's `next`/`error`/`completed` callbacks behind the strict gate.
///
/// The outermost delivery publishes its thread in `delivering` before it
/// checks the disposed flag (both sequentially consistent), and
/// `Subscription.dispose()` sets the flag first. So once `dispose()` has
/// returned no callback starts; from a thread that is no loop's, it also
/// waits while a delivery is in progress, so none is running either (a loop
/// thread never waits for another: see `Subscription`). Nested (re-entrant)
/// deliveries skip the handshake, and a callback disposing its own
/// subscription does not wait for itself.
///
/// On a terminal event the subscription is disposed first and the callback
/// runs after, as RAC's subscriber does; the callbacks are then released.
///
/// A subject keeps the sink itself as its subscriber's observer
/// (`Signal.attach(sink:to:)`), instead of a closure calling it in a box.
@usableFromInline
final class Sink<Value> {
    // All stored vars are touched only on the subscription's home thread.
    /// A `let` so a value is delivered without retaining the closure; it is freed with the sink at teardown.
    @usableFromInline let next: ((Value) -> Void)?
    @usableFromInline @exclusivity(unchecked) var error: ((any Error) -> Void)?
    @usableFromInline @exclusivity(unchecked) var completed: (() -> Void)?
    @usableFromInline let subscription: Subscription
    @usableFromInline @exclusivity(unchecked) var depth = 0

    @inlinable
    init(next: ((Value) -> Void)?, error: ((any Error) -> Void)?, completed: (() -> Void)?, subscription: Subscription) {
        self.next = next
        self.error = error
        self.completed = completed
        self.subscription = subscription
    }

    @inlinable
    func receive(_ event: Event<Value>) {
        if depth == 0 {
            subscription.delivering.store(UInt(pthread_self()), ordering: .sequentiallyConsistent)
            if subscription.disposedFlag.load(ordering: .sequentiallyConsistent) {
                subscription.delivering.store(0, ordering: .releasing)
                return
            }
        } else if subscription.disposedFlag.load(ordering: .relaxed) {
            return
        }
        depth &+= 1
        defer {
            depth &-= 1
            if depth == 0 { subscription.delivering.store(0, ordering: .releasing) }
        }
        switch event {
        case .next(let value):
            next?(value)
        case .error(let failure):
            let handler = error
            releaseCallbacks()
            subscription.dispose()
            handler?(failure)
        case .completed:
            let handler = completed
            releaseCallbacks()
            subscription.dispose()
            handler?()
        }
    }

    /// `receive(.next(value))`, without building the event (the value shortcut of `attach(_:values:to:)`).
    @inlinable
    func receiveNext(_ value: Value) {
        if depth == 0 {
            subscription.delivering.store(UInt(pthread_self()), ordering: .sequentiallyConsistent)
            if subscription.disposedFlag.load(ordering: .sequentiallyConsistent) {
                subscription.delivering.store(0, ordering: .releasing)
                return
            }
        } else if subscription.disposedFlag.load(ordering: .relaxed) {
            return
        }
        depth &+= 1
        next?(value)
        depth &-= 1
        if depth == 0 { subscription.delivering.store(0, ordering: .releasing) }
    }

    @usableFromInline
    func releaseCallbacks() {
        error = nil
        completed = nil
    }
}
