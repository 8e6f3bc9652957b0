import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// How `DeliveryHandshake.enterDelivery()` let a delivery in.
@usableFromInline
enum DeliveryEntry {
    /// The subscription is disposed: no callback may start.
    case refused
    /// This delivery published its thread in `delivering`; `leaveDelivery` unpublishes it.
    case outermost
    /// Inside a delivery this thread already published (a burst, or a nested send): nothing to unpublish.
    case joined
}

/// The dispose handshake between a subscription's callbacks and its `dispose()`, written once.
///
/// Two kinds of subscription hold it: `Subscription` (with its `Sink`, the end of every chain) and
/// `FileSystemCall` (a one-request file-system signal subscribed with callbacks on its loop, which
/// is its own subscription). Each keeps the two atomics; the rules live here:
/// - a delivery publishes its thread in `delivering`, then checks `disposedFlag` (both
///   sequentially consistent), and unpublishes when the callback returned;
/// - `dispose()` sets `disposedFlag` first, then, on a thread that is no loop's, waits here until
///   no delivery is in progress (`waitForDeliveryInProgress`). So once it returned no callback
///   starts, and none is running. A loop thread never waits: it could be waiting for a loop that
///   waits for it.
///
/// Thread rule: `enterDelivery`/`leaveDelivery` on the delivering thread only;
/// `waitForDeliveryInProgress` from the disposing thread.
@usableFromInline
protocol DeliveryHandshake: AnyObject {
    /// The thread running the subscriber's callbacks, 0 when none (set by the outermost delivery only).
    var delivering: Atomic<UInt> { get }
    /// Set by the first `dispose()` (or the subscription's own end); never cleared.
    var disposedFlag: Atomic<Bool> { get }
}

extension DeliveryHandshake {
    /// Whether a delivery may start now.
    ///
    /// The outermost delivery publishes its thread in `delivering`, then checks the disposed flag
    /// (both sequentially consistent, against `dispose()` setting the flag first and then reading
    /// `delivering`). A delivery on a thread that has already published (a `Sink` called from inside
    /// a burst its operator opened with this, or from inside its own callback) joins it: it only
    /// checks the flag, relaxed, as a nested delivery does, and `dispose()` from another thread
    /// waits for the outermost one to leave. So an operator that sends many values out of one
    /// upstream event (a framer's lines) enters once around them, and the sink pays the
    /// sequentially consistent store once per burst instead of once per value.
    ///
    /// A relaxed load of `delivering` that reads this thread's own id is exact: only this thread
    /// stores its id, and it unpublishes before it stops delivering.
    ///
    /// Thread rule: the thread delivering on this subscription only.
    @inlinable
    @inline(__always)
    func enterDelivery() -> DeliveryEntry {
        let me = UInt(pthread_self())
        if delivering.load(ordering: .relaxed) == me {
            return disposedFlag.load(ordering: .relaxed) ? .refused : .joined
        }
        delivering.store(me, ordering: .sequentiallyConsistent)
        if disposedFlag.load(ordering: .sequentiallyConsistent) {
            delivering.store(0, ordering: .releasing)
            return .refused
        }
        return .outermost
    }

    /// The end of a delivery that `enterDelivery` let in: the outermost one unpublishes its thread.
    ///
    /// Thread rule: the thread delivering on this subscription only.
    @inlinable
    @inline(__always)
    func leaveDelivery(_ entry: DeliveryEntry) {
        if entry == .outermost { delivering.store(0, ordering: .releasing) }
    }

    /// Waits until no callback runs on another thread (`dispose()` off loop threads, after setting
    /// the flag). A callback disposing its own subscription, on whatever thread, does not wait for itself.
    ///
    /// Thread rule: a thread that is no loop's (a loop thread never waits for another).
    func waitForDeliveryInProgress() {
        let me = UInt(pthread_self())
        var spins = 0
        while true {
            let thread = delivering.load(ordering: .sequentiallyConsistent)
            if thread == 0 || thread == me { return }
            spins += 1
            if spins < 64 {
                sched_yield()
            } else {
                var pause = timespec(tv_sec: 0, tv_nsec: 50_000)
                nanosleep(&pause, nil)
            }
        }
    }
}
