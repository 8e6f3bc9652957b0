import Synchronization

/// One subscription: its home scheduler, everything it created, and the gate in front of its subscriber.
///
/// Fused operators share it; operators that subscribe to other signals add children on the same
/// home. `dispose()` sets the flag at once (no callback begins after it returns) and tears down
/// on the home thread (queued there, or on the caller's once the home closed); it never waits.
/// `disposeAndWait()` suspends until a callback already running elsewhere has returned.
/// A `subscribe(next:error:completed:)` makes a `SinkSubscription`, which holds the callbacks too.
/// Thread rule: `dispose()`/`disposeAndWait()`/`isDisposed` safe from any thread; the rest home thread only.
@usableFromInline
package class Subscription: CompoundDisposable, DeliveryHandshake, @unchecked Sendable {
    // Sendable: `home` is immutable; `delivering` is atomic; the rest is home thread only.
    @usableFromInline package let home: Scheduler
    /// The thread running the subscriber's callbacks, 0 when none (see `DeliveryHandshake`).
    @usableFromInline package let delivering = Atomic<UInt>(0)
    /// The source's subscriber, released at teardown; set by `attachRoot`.
    @usableFromInline @exclusivity(unchecked) final var root: (any ObserverReleasing)?
    /// Whether a root was attached (and not yet released).
    package final var hasRoot: Bool { root != nil }
    /// Set by a source that can pause (home thread only), or made on first use through
    /// `deferFlowControl(to:)`, so a reader nobody pauses never makes one.
    package final var flowControl: FlowControl? {
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
    /// The flow control once made or set, else its `FlowControlMaker`, else nil: one word for both.
    @exclusivity(unchecked) private final var flowControlSlot: AnyObject?

    /// The flow control, if one was made or set; unlike `flowControl`, never makes one.
    package final var flowControlIfMade: FlowControl? { flowControlSlot as? FlowControl }

    /// Lets `maker` make the flow control when a consumer first asks. Home thread only, for a source on it.
    package final func deferFlowControl(to maker: some FlowControlMaker) {
        if flowControlSlot is FlowControl { return }
        flowControlSlot = maker
    }

    @usableFromInline
    package init(home: Scheduler) {
        self.home = home
        super.init()
    }

    /// A subscription whose home is `homeForCallingThread`, retaining the home once (not twice).
    @usableFromInline
    init(homeForCallingThread: Void) {
        if let current = ThreadLocals.currentScheduler.value {
            home = Unmanaged<Scheduler>.fromOpaque(current).takeUnretainedValue()
        } else {
            home = Runtime.defaultScheduler
        }
        super.init()
    }

    /// The current scheduler, else `EventLoop.shared` (RAC's subscription scheduler).
    @usableFromInline
    package static var homeForCallingThread: Scheduler { Scheduler.current ?? Runtime.defaultScheduler }

    /// Whether `dispose()` was called (or the subscription ended). Final, so the gate's test inlines.
    @inlinable
    package final override var isDisposed: Bool { disposedFlag.load(ordering: .acquiring) }

    /// Sets the flag (no callback begins after this returns) and tears down on the home thread;
    /// never waits for a callback running elsewhere.
    @usableFromInline
    package final override func dispose() {
        guard markDisposed() else { return }
        if home.isCurrent {
            tearDown()
            return
        }
        tearDownOnHome()
    }

    /// `dispose()`, then suspends until a callback running on another thread has returned (also the
    /// terminal callback of a subscription that ended by itself: its sink sets the flag first).
    package final override func disposeAndWait() async {
        dispose()
        await waitForDeliveryToEnd(hoppingTo: home.loopLifecycle)
    }

    /// `dispose()` off the home thread, out of line so the common dispose stays small.
    @inline(never)
    private func tearDownOnHome() {
        let box = UncheckedSendable(self)
        if !home.scheduleDroppingIfShutDown({ box.value.tearDown() }) {
            // The home has closed: release what is left here (no misuse, not reported).
            tearDown()
        }
    }

    private func tearDown() {
        disposeChildren()
        releaseCallbacks()
        // Moved out and consumed: `root?.releaseObserver(of:)` would retain and release the existential.
        let root = self.root.take()
        // Most have none; storing nil would still call release.
        if flowControlSlot != nil { flowControlSlot = nil }
        switch consume root {
        case .some(let root): root.releaseObserver(of: self)
        case .none: break
        }
    }

    /// Lets go of the callbacks a subclass holds (`SinkSubscription`), at teardown.
    func releaseCallbacks() {}

    /// Gives the subscription its root, released at teardown. Home thread only. On a disposed
    /// subscription (maybe torn down already, a cycle) it is released at once instead.
    @inlinable
    @inline(__always)
    package final func attachRoot(_ root: consuming some ObserverReleasing) {
        if isDisposed {
            root.releaseObserver(of: self)
        } else {
            self.root = root
        }
    }

    /// Makes a subscription on the same home, owned by this one.
    @usableFromInline
    final func makeChild() -> Subscription {
        let child = Subscription(home: home)
        add(child)
        return child
    }

    /// Makes this subscription's flow control the one `child`'s source registers, so a consumer can
    /// still pause a source that an operator subscribed as a child. Home thread only.
    final func passFlowControl(from child: Subscription) {
        deferFlowControl(to: ChildFlowControl(child))
    }
}

/// The flow control of a child subscription's source, asked for on the parent (`passFlowControl(from:)`).
private final class ChildFlowControl: FlowControlMaker {
    // Immutable; the child is asked on the home thread only.
    let child: Subscription
    init(_ child: Subscription) { self.child = child }
    func makeFlowControl(for subscription: Subscription) -> FlowControl? { child.flowControl }
}

/// A source that makes its `FlowControl` only when a consumer asks (see `Subscription.deferFlowControl(to:)`).
package protocol FlowControlMaker: AnyObject {
    /// The flow control of `subscription`'s reader, registered with it, or nil when the reader is
    /// gone. Called on the home thread, the source's.
    func makeFlowControl(for subscription: Subscription) -> FlowControl?
}

/// What a subscription's teardown tells: the root a source (its gate, its operator state, the
/// source itself) or a subject (the subscription is its own gate there) gave it.
@usableFromInline
package protocol ObserverReleasing: AnyObject {
    /// `subscription`, whose root this is, is torn down: let go of its observer chain. Home thread
    /// (or wherever the teardown runs once the home closed).
    func releaseObserver(of subscription: Subscription)
}
