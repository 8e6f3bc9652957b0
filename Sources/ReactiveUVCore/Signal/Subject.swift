import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A hot signal you send to by hand: RAC's `RACSubject`.
///
/// Every subscriber gets the events sent after it subscribed, on its own home thread (hopped
/// there in order; a send on that thread is delivered before `sendNext` returns). A disposed
/// subscription gets nothing more. Send non-Sendable values only on the subscribers' loop.
///
/// Unlike RAC's, a subject that has ended sends its terminal event to later subscribers, so
/// nobody waits forever. `ReplaySubject` and `BehaviorSubject` also replay recent values.
///
/// Thread rule: `send*` and subscribing are safe from any thread.
public class Subject<Value>: Signal<Value>, ObserverReleasing, @unchecked Sendable {
    // Sendable: `lockWord` (a spin lock, never held while calling out) guards `registry`, `snapshot`
    // and `replay`; `version` mirrors `registry.version`. The first loop thread to send wins
    // `cacheOwner` (atomic) and alone touches the `cached*`, `cacheDepth` and `retired` vars,
    // reading the list without the lock. `replayCapacity` and `subscriberType` are immutable.
    @usableFromInline let lockWord = Atomic<Bool>(false)
    @usableFromInline @exclusivity(unchecked) final var registry = SubjectRegistry()
    @usableFromInline @exclusivity(unchecked) final var snapshot: SubjectSnapshot<Value>?
    @usableFromInline @exclusivity(unchecked) final var replay: SubjectReplay<Value>
    @usableFromInline let replayCapacity: Int
    @usableFromInline let version = Atomic<UInt64>(0)
    @usableFromInline let cacheOwner = Atomic<UInt>(0)
    @usableFromInline @exclusivity(unchecked) final var cachedVersion: UInt64 = .max
    @usableFromInline @exclusivity(unchecked) final var cachedSnapshot: Unmanaged<SubjectSnapshot<Value>>?
    /// The cached snapshot's only subscriber when it has exactly one, else `.none`.
    @usableFromInline @exclusivity(unchecked) final var cachedSingle = SubjectMember<Value>.none
    @usableFromInline @exclusivity(unchecked) final var cacheDepth = 0
    @usableFromInline @exclusivity(unchecked) final var retired: [Unmanaged<SubjectSnapshot<Value>>] = []
    /// Unregisters `abandonCache` from the owner loop's shutdown; written once, by the owner thread.
    @exclusivity(unchecked) final var ownerShutdownWatch: (any Disposable)?
    /// `cacheOwner` once its loop shut down: no thread is this, so nobody claims the cache again.
    @usableFromInline static var abandonedOwner: UInt { 1 }
    /// Looked up once, so subscribing (unspecialized) does not search the metadata cache.
    private let subscriberType = Subscriber<Value>.self
    /// Tells the gates in the list from the subscriptions registered as their own (`SubjectMember`).
    private var gateType: AnyObject.Type { subscriberType }

    /// Creates a subject with no subscribers.
    ///
    /// Thread rule: safe from any thread.
    public override init() {
        replayCapacity = 0
        replay = SubjectReplay(capacity: 0)
        super.init()
    }

    /// For `ReplaySubject`/`BehaviorSubject`: keeps the last `replayCapacity` values.
    init(replayCapacity: Int, initial: Value?) {
        self.replayCapacity = replayCapacity
        replay = SubjectReplay(capacity: replayCapacity)
        if let initial { replay.record(initial) }
        super.init()
    }

    deinit {
        // Nobody is sending any more (a sender holds a reference), so the owner's cache can go.
        cachedSnapshot?.release()
        for snapshot in retired { snapshot.release() }
        ownerShutdownWatch?.dispose()
    }

    /// Sends a value to every current subscriber; ignored once the subject has ended.
    ///
    /// Thread rule: safe from any thread.
    @inlinable
    public final func sendNext(_ value: Value) {
        // The owner's check; a replaying subject never has an owner.
        let current = ThreadLocals.currentScheduler.value
        if let current, cacheOwner.load(ordering: .relaxed) == UInt(bitPattern: current),
           version.load(ordering: .acquiring) == cachedVersion {
            sendOnOwnerThread(value, current: current)
        } else {
            sendOffOwnerPath(value, current: current)
        }
    }

    /// The owner loop's path: the cached snapshot, current (its version was just checked).
    @inlinable
    final func sendOnOwnerThread(_ value: Value, current: UnsafeMutableRawPointer) {
        // A subscriber may change the list and re-enter: the snapshot being walked is retired, not
        // released, until the outermost send is done.
        if cachedSingle.bits != 0 {
            cacheDepth &+= 1
            cachedSingle.sendNext(value, current: current)
            cacheDepth &-= 1
        } else if let snapshot = cachedSnapshot {
            cacheDepth &+= 1
            snapshot._withUnsafeGuaranteedRef { $0.sendNext(value, current: current) }
            cacheDepth &-= 1
        } else {
            return
        }
        if cacheDepth == 0, !retired.isEmpty { releaseRetired() }
    }

    /// Every send but the owner's with a current cache; out of line, so the owner's path stays small.
    @inlinable
    @inline(never)
    final func sendOffOwnerPath(_ value: Value, current: UnsafeMutableRawPointer?) {
        if let current, cacheOwner.load(ordering: .relaxed) == UInt(bitPattern: current) {
            refreshCache()
            sendOnOwnerThread(value, current: current)
        } else {
            sendLocked(value, current: current)
        }
    }

    /// Any other thread's path (and every send to a replaying subject): the snapshot read under the lock.
    @inlinable
    final func sendLocked(_ value: Value, current: UnsafeMutableRawPointer?) {
        lock()
        if registry.terminated {
            unlock()
            return
        }
        if replayCapacity > 0 { replay.record(value) }
        let snapshot = currentSnapshotLocked()
        unlock()
        if let current, replayCapacity == 0, cacheOwner.load(ordering: .relaxed) == 0,
           cacheOwner.compareExchange(expected: 0, desired: UInt(bitPattern: current), ordering: .relaxed).exchanged {
            // The first loop to send claims the lock-free path.
            watchOwnerShutdown(current)
        }
        snapshot.send(.next(value), current: current)
    }

    /// The owner thread just claimed the cache: let it go when that loop shuts down, or the cached
    /// snapshot would keep departed subscribers (and their loops) alive.
    @usableFromInline
    @inline(never)
    final func watchOwnerShutdown(_ current: UnsafeMutableRawPointer) {
        // A test scheduler's thread owns the cache until the subject goes; only a loop shuts down.
        guard let loop = Unmanaged<Scheduler>.fromOpaque(current).takeUnretainedValue().loopLifecycle,
              !loop.isShared else { return }
        if let watch = loop.addShutdownObserver({ [weak self] in self?.abandonCache() }) {
            ownerShutdownWatch = watch
        } else {
            // The loop already began closing (or never started): nothing fires later.
            abandonCache()
        }
    }

    /// The owner loop is shutting down (its thread): drops the cache for good; sends take the lock from now on.
    final func abandonCache() {
        cacheOwner.store(Self.abandonedOwner, ordering: .relaxed)
        cachedVersion = .max
        cachedSingle = .none
        guard let old = cachedSnapshot else { return }
        cachedSnapshot = nil
        if cacheDepth > 0 { retired.append(old) } else { old.release() }
    }

    /// The snapshot of the registered subscribers, built on first use after a change. Lock held.
    @inlinable
    final func currentSnapshotLocked() -> SubjectSnapshot<Value> {
        if let snapshot { return snapshot }
        return rebuildSnapshotLocked()
    }

    @usableFromInline
    final func rebuildSnapshotLocked() -> SubjectSnapshot<Value> {
        let fresh = SubjectSnapshot<Value>(registry.subscribers, gateType: gateType)
        snapshot = fresh
        return fresh
    }

    @usableFromInline
    final func refreshCache() {
        lock()
        let fresh = registry.terminated ? nil : Unmanaged.passRetained(currentSnapshotLocked())
        let freshVersion = registry.version
        unlock()
        let old = cachedSnapshot
        cachedSnapshot = fresh
        cachedSingle = fresh.flatMap { $0._withUnsafeGuaranteedRef { $0.count == 1 ? $0.elements[0] : nil } } ?? .none
        cachedVersion = freshVersion
        if let old {
            if cacheDepth > 0 { retired.append(old) } else { old.release() }
        }
    }

    @usableFromInline
    final func releaseRetired() {
        let list = retired
        retired = []
        for snapshot in list { snapshot.release() }
    }

    /// Ends the subject with an error: every subscriber gets it, and so will later ones. Ignored once ended.
    ///
    /// Thread rule: safe from any thread.
    public final func sendError(_ error: any Error) {
        terminate(.error(error))
    }

    /// Completes the subject: every subscriber gets completion, and so will later ones. Ignored once ended.
    ///
    /// Thread rule: safe from any thread.
    public final func sendCompleted() {
        terminate(.completed)
    }

    /// Sends any event (`next`, `error` or `completed`).
    ///
    /// Thread rule: safe from any thread.
    @inlinable
    public final func send(_ event: Event<Value>) {
        switch event {
        case .next(let value): sendNext(value)
        case .error(let error): sendError(error)
        case .completed: sendCompleted()
        }
    }

    /// The number of subscriptions currently registered (disposed ones leave at once).
    ///
    /// Thread rule: safe from any thread.
    public final var subscriberCount: Int {
        lock()
        defer { unlock() }
        return registry.subscribers.count
    }

    /// Whether the subject has ended (an error or completion was sent).
    ///
    /// Thread rule: safe from any thread.
    public final var hasTerminated: Bool {
        lock()
        defer { unlock() }
        return registry.terminated
    }

    private func terminate(_ event: Event<Value>) {
        lock()
        if registry.terminated {
            unlock()
            return
        }
        replay.terminal = event
        let subscribers = registry.subscribers
        registry.subscribers = []
        registry.terminated = true
        changedLocked()
        unlock()
        let current = ThreadLocals.currentScheduler.value
        for subscriber in subscribers {
            SubjectMember<Value>(subscriber, gateType: gateType).send(event, current: current)
        }
    }

    /// Registers a gate holding `observer` (an operator's closures), or, for a subscription with
    /// callbacks, the subscription itself as its own gate (the subject is then its root).
    @usableFromInline
    package override final func attach(_ observer: Observer<Value>, to subscription: Subscription) {
        let member: AnyObject
        if observer.kind == .sink {
            // Its sink checks the disposed flag and hops to the home itself: no `Subscriber` needed.
            member = subscription
            subscription.attachRoot(self)
        } else {
            let subscriber = subscriberType.init(observer: observer, subscription: subscription, subject: self)
            subscription.attachRoot(subscriber)
            member = subscriber
        }
        if subscription.isDisposed { return }
        if replayCapacity == 0 {
            lock()
            let ended = registry.terminated
            if !ended {
                registry.subscribers.append(member)
                changedLocked()
            }
            unlock()
            if !ended {
                // Teardown leaves the list; this covers a disposal from a closed home that raced the append.
                if subscription.isDisposed { leave(member) }
                return
            }
        }
        attachReplaying(member, to: subscription)
    }

    /// Registers a subscriber of a replaying (or ended) subject and replays to it.
    private func attachReplaying(_ member: AnyObject, to subscription: Subscription) {
        // Replayed values and registration are taken together: each value is replayed or sent live,
        // never both and never missed.
        lock()
        let values = replay.buffer.elements
        let terminal = replay.terminal
        if terminal == nil {
            registry.subscribers.append(member)
            changedLocked()
        }
        unlock()
        if terminal == nil, subscription.isDisposed {
            // This covers a disposal that raced the append.
            leave(member)
        }
        // On the home thread: delivered now, before any send hopped here from elsewhere.
        let current = ThreadLocals.currentScheduler.value
        let gate = SubjectMember<Value>(member, gateType: gateType)
        for value in values {
            if subscription.isDisposed { return }
            gate.send(.next(value), current: current)
        }
        if let terminal {
            gate.send(terminal, current: current)
        }
    }

    /// Takes `member` off the list, once (its gate's own way, or directly for a subscription).
    private func leave(_ member: AnyObject) {
        if type(of: member) == gateType {
            unsafeDowncast(member, to: Subscriber<Value>.self).leaveSubject()
        } else {
            remove(member)
        }
    }

    final func remove(_ subscriber: AnyObject) {
        lock()
        defer { unlock() }
        // Newest last: a short-lived subscription is usually found at once.
        var index = registry.subscribers.count - 1
        if index >= 0, registry.subscribers[index] === subscriber {
            registry.subscribers.removeLast()
            changedLocked()
            return
        }
        while index >= 0 {
            if registry.subscribers[index] === subscriber {
                registry.subscribers.remove(at: index)
                changedLocked()
                return
            }
            index -= 1
        }
    }

    /// The teardown of a subscription registered as its own gate (whose root this subject is): it leaves the list.
    @usableFromInline
    package final func releaseObserver(of subscription: Subscription) {
        remove(subscription)
    }

    /// Records a change of the subscriber list (or the end) for senders. Lock held.
    private func changedLocked() {
        snapshot = nil
        registry.version &+= 1
        version.store(registry.version, ordering: .releasing)
    }

    /// The latest kept value (for `BehaviorSubject.value`).
    final var latestReplayed: Value? {
        lock()
        defer { unlock() }
        return replay.buffer.last
    }

    /// Takes the spin lock, held only to read or change the list, never while calling out.
    @inlinable
    package final func lock() {
        if !lockWord.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged {
            lockContended()
        }
    }

    @inlinable
    package final func unlock() {
        lockWord.store(false, ordering: .releasing)
    }

    /// The lock is held by another thread, briefly: spin, then yield the CPU.
    @usableFromInline
    final func lockContended() {
        var spins = 0
        while true {
            if !lockWord.load(ordering: .relaxed),
               lockWord.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged {
                return
            }
            spins += 1
            if spins > 32 { sched_yield() }
        }
    }
}
