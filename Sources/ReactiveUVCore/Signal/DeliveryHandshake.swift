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
/// - `dispose()` sets `disposedFlag` and returns: it never waits, on any thread. So once it
///   returned no callback *begins*; one that began before may still be running on its thread.
///   A caller blocked there would deadlock with a callback that takes a lock it holds, or hold
///   a cooperative thread of Swift's pool for as long as the callback runs.
/// - `disposeAndWait()` is the form for a caller who must know that callback has finished: after
///   the flag it reads `delivering` and suspends, never blocking a thread, until that delivery
///   has left (`waitForDeliveryToEnd`).
///
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
    /// Whether a delivery may start now.
    ///
    /// The outermost delivery publishes its thread in `delivering`, then checks the disposed flag
    /// (both sequentially consistent, against `dispose()` setting the flag first and then reading
    /// `delivering`). A delivery on a thread that has already published (a `Sink` called from inside
    /// a burst its operator opened with this, or from inside its own callback) joins it: it only
    /// checks the flag, relaxed, as a nested delivery does, and `disposeAndWait()` from another
    /// thread waits for the outermost one to leave. So an operator that sends many values out of one
    /// upstream event (a framer's lines) enters once around them, and the sink pays the
    /// sequentially consistent store once per burst instead of once per value.
    ///
    /// A relaxed load of `delivering` that reads this thread's own id is exact: only this thread
    /// stores its id, and it unpublishes before it stops delivering.
    ///
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
    ///
    /// Thread rule: the thread delivering on this subscription only.
    @inlinable
    @inline(__always)
    package func leaveDelivery(_ entry: DeliveryEntry) {
        if entry == .outermost { delivering.store(0, ordering: .releasing) }
    }

    /// Suspends until the delivery in progress when it was called has left, if it runs on another
    /// thread; returns at once when none runs, or when the caller is inside it (a callback awaiting
    /// its own subscription's end). Call it after setting `disposedFlag`: from then on no delivery
    /// begins, so once the one seen here has left, none is running.
    ///
    /// Never blocks a thread. First it hops to `loop` (the home, where deliveries run unless
    /// `deliver(on:)` moved them): a job queued there runs only after the callback running there
    /// returned. A delivery still seen after that runs on another thread (`deliver(on:)`'s target,
    /// a test scheduler's): it is polled, yielding, then sleeping a little longer each time (up to
    /// `DeliveryWait.longestPause`). The hot path pays nothing for this: a delivery never looks for
    /// a waiter (telling one would need a full fence when every delivery leaves).
    ///
    /// Cancelling the waiting task does not cut the wait short: its caller relies on the callback
    /// having finished.
    ///
    /// Thread rule: any thread or task.
    package func waitForDeliveryToEnd(hoppingTo loop: (any LoopLifecycle)?) async {
        let seen = delivering.load(ordering: .sequentiallyConsistent)
        if seen == 0 || seen == UInt(pthread_self()) { return }
        if let loop {
            // Refused only when that loop has closed or is not being run: then polling alone decides.
            await loop.afterRunningCallback()
        }
        var polls = 0
        // A delivery other than `seen` is one refused after the flag (it publishes, reads the flag, leaves).
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

    /// The pause before look number `polls + 1`: a few yields (a callback that is about to
    /// return), then sleeps of 50 µs doubling up to `longestPause`.
    ///
    /// The sleep runs in a task of its own, so the waiting task's cancellation does not end it early
    /// (a cancelled `Task.sleep` returns at once, and the wait would spin).
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
