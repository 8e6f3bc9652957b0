import Synchronization

/// One subscription: its home scheduler, everything it created, and the gate in front of its subscriber.
///
/// Every operator fused into a chain shares it; operators that subscribe to other signals add
/// child subscriptions on the same home. `dispose()` sets the flag at once (no callback begins
/// after it returns) and tears down on the home thread: there and then, else queued to it, else
/// (the home has closed) on the caller's thread. It never waits; `disposeAndWait()` suspends
/// until a callback already running elsewhere has returned.
///
/// Thread rule: `dispose()`/`disposeAndWait()`/`isDisposed` safe from any thread; the rest home thread only.
@usableFromInline
package final class Subscription: CompoundDisposable, DeliveryHandshake, @unchecked Sendable {
    // `home` is immutable; `delivering` is atomic; `root` is home thread only.
    @usableFromInline package let home: Scheduler
    /// The thread running the subscriber's callbacks, 0 when none (see `DeliveryHandshake`).
    @usableFromInline package let delivering = Atomic<UInt>(0)
    /// The source's subscriber; its observer chain is released at teardown. Set by `attachRoot`.
    private(set) var root: (any ObserverReleasing)?
    /// Whether a root was attached (and not yet released).
    package var hasRoot: Bool { root != nil }
    /// Set by a source that can pause (home thread only); see `FlowControl`. A source may instead
    /// defer it (`deferFlowControl(to:)`), so that a reader nobody pauses never makes one.
    package var flowControl: FlowControl? {
        get {
            guard let slot = flowControlSlot else { return nil }
            if let control = slot as? FlowControl { return control }
            flowControlSlot = nil
            let made = (slot as? any FlowControlMaker)?.makeFlowControl(for: self)
            flowControlSlot = made
            return made
        }
        set {
            flowControlSlot = newValue
        }
    }
    /// The flow control once made or set, else the `FlowControlMaker` that makes it when first
    /// asked for, else nil: one word for both.
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

    /// A subscription whose home is `homeForCallingThread`, retaining the home once (going through
    /// the property and `init(home:)` retains it twice).
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
    /// when none runs, or from inside the callback). Also waits for the terminal callback of a
    /// subscription that ended by itself: its sink sets the flag before calling it.
    package override func disposeAndWait() async {
        dispose()
        await waitForDeliveryToEnd(hoppingTo: home.loopLifecycle)
    }

    /// `dispose()` away from the home thread, out of line so the common dispose on the home stays small.
    @inline(never)
    private func tearDownOnHome() {
        let box = UncheckedSendable(self)
        if !home.scheduleDroppingIfShutDown({ box.value.tearDown() }) {
            // The home has closed: release what is left here. Disposing after a loop's shutdown is
            // no misuse, so it is not reported.
            tearDown()
        }
    }

    private func tearDown() {
        disposeChildren()
        // Moved out, not copied, and consumed by the switch: `root?.releaseObserver()` retains and
        // releases the opened existential around the call.
        let root = self.root.take()
        // Most subscriptions have none; storing nil would still call release.
        if flowControlSlot != nil { flowControlSlot = nil }
        switch consume root {
        case .some(let root): root.releaseObserver()
        case .none: break
        }
    }

    /// Gives the subscription its root (the source's subscriber, or an operator's state), released
    /// at teardown. Home thread only. A disposed subscription may have torn down already, and a
    /// root stored then would form a cycle with it: it is released at once instead. Inlined so
    /// the root's concrete type is at hand.
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

/// A source that makes its `FlowControl` only when a consumer asks (see `Subscription.deferFlowControl(to:)`).
package protocol FlowControlMaker: AnyObject {
    /// The flow control of `subscription`'s reader, registered with it, or nil when that reader is
    /// gone. Called on the home thread, which is the source's.
    func makeFlowControl(for subscription: Subscription) -> FlowControl?
}

/// A subscriber that can drop its observer chain when its subscription is torn down.
package protocol ObserverReleasing: AnyObject {
    func releaseObserver()
}
