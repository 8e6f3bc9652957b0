import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// How `DeliveryHandshake.enterDelivery()` let a delivery in.
@usableFromInline
package enum DeliveryEntry {
    /// The subscription is disposed: no callback may start.
    case refused
    /// This delivery published its thread in `delivering`; `leaveDelivery` unpublishes it.
    case outermost
    /// Inside a delivery this thread already published (a burst, or a nested send).
    case joined
}

/// The dispose handshake between a subscription's callbacks and its `dispose()`.
///
/// A delivery publishes its thread in `delivering`, then checks `disposedFlag` (both sequentially
/// consistent). `dispose()` sets the flag and returns without waiting (a wait could deadlock on a
/// lock the caller holds): once it returned no callback *begins*. `disposeAndWait()` then
/// suspends, blocking no thread, until a delivery it saw has left.
/// Thread rule: `enterDelivery`/`leaveDelivery` on the delivering thread only;
/// `waitForDeliveryToEnd` from any task, after the flag was set.
@usableFromInline
package protocol DeliveryHandshake: AnyObject {
    /// The thread running the subscriber's callbacks, 0 when none (set by the outermost delivery only).
    var delivering: Atomic<UInt> { get }
    /// Set by the first `dispose()` (or the subscription's own end); never cleared.
    var disposedFlag: Atomic<Bool> { get }
}

extension DeliveryHandshake {
    /// Whether a delivery may start now; one on a thread that already published joins it and only
    /// checks the flag (a relaxed load of this thread's own id is exact).
    /// Thread rule: the thread delivering on this subscription only.
    @inlinable
    @inline(__always)
    package func enterDelivery() -> DeliveryEntry {
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
    /// Thread rule: the thread delivering on this subscription only.
    @inlinable
    @inline(__always)
    package func leaveDelivery(_ entry: DeliveryEntry) {
        if entry == .outermost { delivering.store(0, ordering: .releasing) }
    }

    /// Suspends until the delivery in progress when called has left, if it runs on another thread.
    /// Call after setting `disposedFlag`.
    ///
    /// It hops to `loop` first (a queued job runs after the running callback); a delivery elsewhere
    /// is polled with growing pauses, so deliveries never look for a waiter. Cancellation does not
    /// cut the wait short: the caller relies on the callback having finished.
    /// Thread rule: any thread or task.
    package func waitForDeliveryToEnd(hoppingTo loop: (any LoopLifecycle)?) async {
        let seen = delivering.load(ordering: .sequentiallyConsistent)
        if seen == 0 || seen == UInt(pthread_self()) { return }
        if let loop {
            // Refused only when that loop has closed or is not being run: then polling alone decides.
            await loop.afterRunningCallback()
        }
        var polls = 0
        // Another delivery than `seen` is one refused after the flag.
        while delivering.load(ordering: .sequentiallyConsistent) == seen {
            polls += 1
            await DeliveryWait.pause(after: polls)
        }
    }
}

/// How `waitForDeliveryToEnd` waits for a delivery on a thread it cannot hop to.
enum DeliveryWait {
    /// The longest pause between two looks at a delivery still in progress.
    static let longestPause = Duration.milliseconds(5)

    /// The pause before look `polls + 1`: a few yields, then sleeps doubling up to `longestPause`, in
    /// a task of their own (a cancelled `Task.sleep` returns at once and would spin).
    static func pause(after polls: Int) async {
        if polls <= 8 {
            await Task.yield()
            return
        }
        let doublings = min(polls - 9, 7)
        let pause = min(Duration.microseconds(50) * (1 << doublings), longestPause)
        await Task.detached { try? await Task.sleep(for: pause) }.value
    }
}
