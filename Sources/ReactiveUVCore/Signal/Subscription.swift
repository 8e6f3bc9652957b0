import Synchronization

/// One subscription: its home scheduler, everything it created, and the gate in front of its subscriber.
///
/// This is the compound disposable of the seeds' subscribe path. Every
/// operator fused into a chain shares it; operators that subscribe to other
/// signals make child subscriptions on the same home and add them here.
///
/// Disposal: the flag is set at once (events stop at every gate, so no callback
/// begins after `dispose()` returns), and the teardown (children, the
/// didSubscribe's disposable, the operator closures) runs on the home thread:
/// directly when `dispose()` is called there, else queued to it (a home loop
/// that is shutting down still takes it; one that has closed runs nothing
/// more, and the teardown then runs on the caller's thread).
///
/// `dispose()` never waits, on any thread: once it returned no callback of the
/// subscription begins, and one already running on another thread (the home,
/// disposed from elsewhere, or `deliver(on:)`'s target) may finish there. A
/// caller who must know that callback has finished awaits `disposeAndWait()`,
/// which suspends until it has, without blocking a thread.
///
/// Thread rule: `dispose()`/`disposeAndWait()`/`isDisposed` safe from any thread; the rest home thread only.
@usableFromInline
package final class Subscription: CompoundDisposable, DeliveryHandshake, @unchecked Sendable {
    // `home` is immutable; `delivering` is atomic; `root` is home thread only.
    @usableFromInline package let home: Scheduler
    /// The thread running the subscriber's callbacks, 0 when none (set by the outermost delivery
    /// only: see `DeliveryHandshake`).
    @usableFromInline package let delivering = Atomic<UInt>(0)
    /// The source's subscriber; its observer chain is released at teardown. Set by `attachRoot`.
    private(set) var root: (any ObserverReleasing)?
    /// Whether a root was attached (and not yet released).
    package var hasRoot: Bool { root != nil }
    /// Set by a source that can pause (home thread only); see `FlowControl`. A source on the home
    /// thread may instead name what makes it (`deferFlowControl(to:)`): it is then made on the
    /// first request, so a reader nobody pauses costs no flow-control object.
    package var flowControl: FlowControl? {
        get {
            guard let slot = flowControlSlot else { return nil }
            if let control = slot as? FlowControl { return control }
            flowControlSlot = nil
            // A protocol cast, once per subscription that asks: the slot stays one word for every other.
            let made = (slot as? any FlowControlMaker)?.makeFlowControl(for: self)
            flowControlSlot = made
            return made
        }
        set {
            flowControlSlot = newValue
        }
    }
    /// The flow control once made or set, else the `FlowControlMaker` that makes it when first
    /// asked for, else nil: one word for what were two (16 bytes off every subscription).
    @exclusivity(unchecked) private var flowControlSlot: AnyObject?

    /// The flow control, if one was made or set; unlike `flowControl`, never makes one.
    package var flowControlIfMade: FlowControl? { flowControlSlot as? FlowControl }

    /// Lets `maker` make this subscription's flow control when a consumer first asks for it.
    /// Home thread only, and only for a source that runs on the home thread.
    package func deferFlowControl(to maker: some FlowControlMaker) {
        if flowControlSlot is FlowControl { return }
        flowControlSlot = maker
    }

    @usableFromInline
    package init(home: Scheduler) {
        self.home = home
        super.init()
    }

    /// A subscription whose home is `homeForCallingThread`, with one retain of the home (the
    /// property returns it retained, and the specialized `init(home:)` retains it again).
    @usableFromInline
    init(homeForCallingThread: Void) {
        if let current = ThreadLocals.currentScheduler.value {
            home = Unmanaged<Scheduler>.fromOpaque(current).takeUnretainedValue()
        } else {
            home = Runtime.defaultScheduler
        }
        super.init()
    }

    /// The home scheduler for a subscription made on the calling thread: the
    /// current scheduler, else `EventLoop.shared` (RAC's subscription scheduler).
    @usableFromInline
    package static var homeForCallingThread: Scheduler { Scheduler.current ?? Runtime.defaultScheduler }

    /// Sets the flag (no callback begins after this returns) and tears down on the home thread;
    /// never waits for a callback running elsewhere.
    @usableFromInline
    package override func dispose() {
        guard markDisposed() else { return }
        if home.isCurrent {
            tearDown()
            return
        }
        tearDownOnHome()
    }

    /// `dispose()`, then suspends until a callback running on another thread has returned (at once
    /// when none runs, or when awaited from inside the callback). Also after the subscription ended
    /// by itself: its sink sets the flag before the `completed`/`error` callback runs.
    package override func disposeAndWait() async {
        dispose()
        await waitForDeliveryToEnd(hoppingTo: home.loopLifecycle)
    }

    /// `dispose()` away from the home thread: the teardown is queued to the home (out of line: the
    /// dispose on the home thread, every one-shot signal's end, stays small).
    @inline(never)
    private func tearDownOnHome() {
        let box = UncheckedSendable(self)
        if !home.scheduleDroppingIfShutDown({ box.value.tearDown() }) {
            // The home loop has closed (it runs nothing more); release what is left here. Not
            // reported as a refused submission: disposing after the home's shutdown is no misuse
            // (a program's shutdown order), and nothing is lost.
            tearDown()
        }
    }

    private func tearDown() {
        disposeChildren()
        // Moved out, not copied: no retain and release of the root.
        let root = self.root.take()
        // Tested first: most subscriptions have none, and storing nil still costs a release call.
        if flowControlSlot != nil { flowControlSlot = nil }
        // Consumed by the switch: called through `root?.releaseObserver()`, the opened root was
        // retained for the call, then released twice (a stat's teardown paid both).
        switch consume root {
        case .some(let root): root.releaseObserver()
        case .none: break
        }
    }

    /// Gives the subscription its root (the source's subscriber, or an operator's state), released
    /// at teardown. Home thread only (attaching runs there).
    ///
    /// A subscription already disposed releases the root at once instead: its teardown may have run
    /// already (a child added to a disposed parent is torn down as it is added), and the root holds
    /// this subscription, so a root stored after teardown would keep both alive for ever, with the
    /// subject it is registered with and the home loop.
    /// Inlined: at the caller the root's type is at hand, so no generic metadata is looked up per subscribe.
    @inline(__always)
    package func attachRoot(_ root: some ObserverReleasing) {
        if isDisposed {
            root.releaseObserver()
        } else {
            self.root = root
        }
    }

    /// Makes a subscription on the same home, owned by this one.
    @usableFromInline
    func makeChild() -> Subscription {
        let child = Subscription(home: home)
        add(child)
        return child
    }
}

/// A subscriber that can drop its observer chain when its subscription is torn down.
/// A source that makes its `FlowControl` only when a consumer asks (see `Subscription.deferFlowControl(to:)`).
package protocol FlowControlMaker: AnyObject {
    /// The flow control of the reader whose subscription is `subscription`, registered with that
    /// reader (as `Subscriber.setFlowControl(pause:resume:)` does), or nil when that reader is gone.
    /// Called on the home thread, which is the source's.
    func makeFlowControl(for subscription: Subscription) -> FlowControl?
}

package protocol ObserverReleasing: AnyObject {
    func releaseObserver()
}
