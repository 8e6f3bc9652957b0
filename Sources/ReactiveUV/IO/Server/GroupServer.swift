import Synchronization

/// A listener that can be one loop's share of a group server (`GroupServer`): it drains on its
/// own loop (`DrainableListener`), is disposed from any thread, and tells its events as `Event`.
///
/// Thread rule: `dispose()` and `isDisposed` are safe from any thread; the rest is the
/// share's loop thread (see `DrainableListener`).
protocol GroupShare: DrainableListener, Disposable {
    /// What the share tells the server's subscriber (`TCPServer.Event`, `UnixSocket.Event`).
    associatedtype Event: GroupServerEvent
}

/// A server event as `GroupServer` needs to know it: the connection an `.accepted` carries,
/// and the event that announces a drain.
///
/// Thread rule: a value type; safe from any thread.
protocol GroupServerEvent: Sendable {
    /// The connection type a server accepts (`TCPConnection`, `UnixConnection`).
    associatedtype Connection
    /// The connection of an `.accepted` event; nil for every other event.
    var acceptedConnection: Connection? { get }
    /// The event that says a drain began and `open` connections are still open.
    static func draining(open: Int) -> Self
}

/// One server subscription served by a share on every loop of a group: the bookkeeping that is
/// the same whatever the transport.
///
/// Every loop's share is kept here, in `state`: what stops the server (dispose, a share's error,
/// a drain, the loops shutting down) reaches them all from one place. The shares share one
/// `ConnectionBudget`, so the connection limit counts across the group. A transport subclasses
/// this and adds only how the shares are made and started: `GroupListener` (TCP: a
/// `SO_REUSEPORT` socket per loop) and `UnixGroupListener` (one socket; the first loop accepts
/// and hands the connections over). See docs/INTERNALS.md, "Serving on a group".
///
/// A drain request goes to every share, each on its own loop, in the subclass's `DrainOrder`;
/// each share drains as a server on one loop does (`DrainableListener`); the server completes
/// when the last share has drained.
///
/// Thread rule: `dispose()` and `isDisposed` are safe from any thread; the subclass's `start()`,
/// and `follow`, run on the coordinator's (the group's first loop's) thread; each share's
/// callbacks run on its own loop's thread.
class GroupServer<Share: GroupShare>: Disposable, @unchecked Sendable {
    // `state` is behind its mutex (the coordinator, every share's loop and `dispose()` touch it);
    // the rest is immutable, atomic, or a `SerialDisposable` (thread-safe). No callback, and no
    // share's method, is called while the mutex is held.

    /// How a drain request reaches the shares.
    enum DrainOrder {
        /// Every share listens on a socket of its own (TCP): the request goes to each at once, on
        /// its loop, and `.draining` is sent once every share has closed its socket (so a client
        /// that connects after the event is refused, and the count includes everyone accepted).
        case everyShareAtOnce
        /// The first share accepts for all and hands connections to the others (Unix sockets):
        /// the request goes to it first, on its loop, where it closes the socket and sends
        /// `.draining`; only then is the request queued to the others, so each receives it after
        /// every connection handed to it (one queue, in order).
        case acceptingShareFirst
    }

    private enum State {
        /// Before the shares exist: the host lookup, while one is pending (TCP).
        case starting(lookup: (any Disposable)?)
        /// Every loop's share; `shutDown` names those its loop's shutdown ended (they will not
        /// drain: a drain must not wait for them).
        case serving(shares: [Share], shutDown: Set<ObjectIdentifier>)
        /// A drain began: the shares whose connections have not all closed yet.
        case draining(shares: [Share], pending: Set<ObjectIdentifier>)
        /// Disposed, failed, drained, or ended by the loops' shutdown.
        case ended
    }

    /// What a drain request does, decided under the mutex and done after it.
    private enum DrainStep {
        /// The first request: every share stops accepting and drains.
        case begin([Share])
        /// `.force` during a drain: every share resets what is left.
        case force([Share])
        /// A request before anything was bound: what was there is stopped, `.draining(open: 0)` is
        /// sent, and the server completes.
        case endBeforeServing(State)
        case nothing
    }

    /// The loops served; the first (the coordinator) starts the server.
    let group: EventLoopGroup
    /// The connections open across the group (and those on their way to a loop), against `maxConnections`.
    let budget: ConnectionBudget
    private let drainOrder: DrainOrder
    private let onAccepted: (@Sendable (Share.Event.Connection) -> Void)?
    /// The subscriber's three ends.
    private let output: GroupServerOutput<Share.Event>
    private let state = LockedValue<State>(.starting(lookup: nil))
    private let disposedFlag = Atomic<Bool>(false)
    /// The subscription to the drain requests (set once by `follow`, on the coordinator's thread).
    private let drainRequests = SerialDisposable()

    /// A server on `group` whose shares count against `maxConnections` together and drain in
    /// `drainOrder`; it tells the subscriber through `onAccepted` and `output` (never under the mutex).
    init(group: EventLoopGroup, maxConnections: Int?, drainOrder: DrainOrder,
         onAccepted: (@Sendable (Share.Event.Connection) -> Void)?, output: GroupServerOutput<Share.Event>) {
        self.group = group
        self.drainOrder = drainOrder
        self.onAccepted = onAccepted
        self.output = output
        budget = ConnectionBudget(limit: maxConnections)
    }

    /// The group's first loop: it starts the server and follows the drain requests.
    var coordinator: EventLoop { group.loops[0] }

    // MARK: - Starting (the subclass's `start()`, on the coordinator's thread)

    /// Fails the server, naming the loop, when a loop of the group is not running or was asked to
    /// shut down; checked at the door, before anything is bound: such a loop could never serve
    /// the clients that would reach its share. Returns whether every loop runs.
    func everyLoopRuns() -> Bool {
        guard let stopped = group.loops.first(where: { $0.shutdownRequested || !$0.acceptsNewHandles }) else {
            return true
        }
        fail(stopped.refusal)
        return false
    }

    /// Keeps the pending host lookup, so that ending the server cancels it. Returns false when
    /// the server ended meanwhile: the caller disposes the lookup.
    func keepLookup(_ lookup: any Disposable) -> Bool {
        state.withLock { state in
            guard case .starting = state else { return false }
            state = .starting(lookup: lookup)
            return true
        }
    }

    /// Moves to serving with `shares`, one per loop, before any starts. Returns false when the
    /// server ended meanwhile: the caller releases what it made for them (no share has started).
    func beginServing(_ shares: [Share]) -> Bool {
        state.withLock { state in
            guard case .starting = state else { return false }
            state = .serving(shares: shares, shutDown: [])
            return true
        }
    }

    // MARK: - What the shares tell (each on its own loop's thread)

    /// Sends a share's event to the subscriber; for `.accepted`, calls `onAccepted` first.
    func send(_ event: Share.Event) {
        if let connection = event.acceptedConnection { onAccepted?(connection) }
        output.event(event)
    }

    /// Ends every share and tells the subscriber `error`, once.
    func fail(_ error: any Error) {
        guard let previous = end() else { return }
        stop(previous)
        output.error(error)
    }

    /// The share on `loop` ended with its loop's shutdown (TCP: each share has a socket of its
    /// own, so the others go on): during a drain it counts as drained; otherwise the last loop's
    /// shutdown ends the server with `EventLoopError.shutDown` naming that loop.
    func shareEndedByLoopShutdown(_ loop: EventLoop) {
        if let share = share(on: loop) { shareDrained(share) }
        let last = state.withLock { state -> Bool in
            guard case .serving(let shares, var shutDown) = state,
                  let share = shares.first(where: { $0.loop === loop }) else { return false }
            shutDown.insert(ObjectIdentifier(share))
            if shutDown.count < shares.count {
                state = .serving(shares: shares, shutDown: shutDown)
                return false
            }
            state = .ended
            return true
        }
        if last { output.error(EventLoopError.shutDown(loop: loop.name)) }
    }

    /// Moves to `.ended`; returns what was there, or nil when it had ended already.
    private func end() -> State? {
        state.withLock { state in
            if case .ended = state { return nil }
            let previous = state
            state = .ended
            return previous
        }
    }

    /// Stops what `previous` holds: the pending lookup, or every share (each on its own loop).
    private func stop(_ previous: State) {
        switch previous {
        case .starting(let lookup): lookup?.dispose()
        case .serving(let shares, _), .draining(let shares, _): for share in shares { share.dispose() }
        case .ended: break
        }
    }

    /// The share living on `loop`.
    private func share(on loop: EventLoop) -> Share? {
        state.withLock { state -> Share? in
            switch state {
            case .serving(let shares, _), .draining(let shares, _): shares.first { $0.loop === loop }
            case .starting, .ended: nil
            }
        }
    }

    // MARK: - Draining

    /// Follows the drain requests.
    ///
    /// Thread rule: the coordinator's loop thread.
    func follow(_ requests: Signal<TCPServer.DrainRequest>) {
        guard !isDisposed else { return }
        drainRequests.inner = requests.subscribeNext { [weak self] request in self?.drain(request) }
    }

    /// Starts (or forces) the drain of every share. Safe from any thread.
    private func drain(_ request: TCPServer.DrainRequest) {
        let step = state.withLock { state -> DrainStep in
            switch state {
            case .serving(let shares, let shutDown):
                // A share its loop's shutdown ended has no connections left and will not drain (its
                // loop may still run the request, while closing, and the share ignores it).
                state = .draining(shares: shares, pending: Set(shares.map(ObjectIdentifier.init)).subtracting(shutDown))
                return .begin(shares)
            case .draining(let shares, _):
                // A later graceful request changes nothing (each share would ignore it too).
                if case .force = request { return .force(shares) }
                return .nothing
            case .starting:
                // Nothing bound yet (TCP resolving its host): the drain is over at once.
                let previous = state
                state = .ended
                return .endBeforeServing(previous)
            case .ended:
                return .nothing
            }
        }
        switch step {
        case .begin(let shares): distribute(request, to: shares, announcing: true)
        case .force(let shares): distribute(request, to: shares, announcing: false)
        case .endBeforeServing(let previous):
            stop(previous)
            // A drain began, as on one loop, with nothing to wait for: said, as every drain says it.
            output.event(.draining(open: 0))
            output.completed()
        case .nothing:
            break
        }
    }

    /// Hands `request` to the shares in `drainOrder`; `announcing` (the first request) has
    /// `.draining` sent once the accepting stopped.
    private func distribute(_ request: TCPServer.DrainRequest, to shares: [Share], announcing: Bool) {
        switch drainOrder {
        case .everyShareAtOnce:
            guard announcing else { return forward(request, to: shares, stoppedAccepting: nil) }
            let closing = Atomic(shares.count)
            forward(request, to: shares, stoppedAccepting: { [self] in
                if closing.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 {
                    output.event(.draining(open: budget.open))
                }
            })
        case .acceptingShareFirst:
            // The accepting share announces at its first request only (a share ignores `announce`
            // once it drains), so a `.force` during a drain passes it too.
            let accepting = shares[0]
            let homing = Array(shares.dropFirst())
            let work: @Sendable () -> Void = { [self] in
                accepting.drain(request, announce: { [self] _ in output.event(.draining(open: budget.open)) },
                                done: { [self] in shareDrained(accepting) })
                forward(request, to: homing, stoppedAccepting: nil)
            }
            if !run(work, on: accepting.loop) {
                // The first loop has shut down (its shutdown ended the server, or its share's
                // connections): the others still get the request.
                forward(request, to: homing, stoppedAccepting: nil)
            }
        }
    }

    /// Hands `request` to each share on its loop; a loop that refuses (it shut down) has no connections
    /// left and no socket, so its share counts as drained. `stoppedAccepting` runs once per share,
    /// when its listening socket is closed.
    ///
    /// A share the drain does not wait for (its loop's shutdown ended it) is not asked: its loop may
    /// still be closing and run the request, but the ended share would ignore it, and with it
    /// `stoppedAccepting`, so `.draining` would never be sent. Such shares are counted first: a
    /// share asked on this thread may drain at once, and the last to drain completes the server,
    /// which must come after `.draining`.
    private func forward(_ request: TCPServer.DrainRequest, to shares: [Share],
                         stoppedAccepting: (@Sendable () -> Void)?) {
        let waitedFor = shares.filter(isPending)
        if let stoppedAccepting {
            for _ in 0..<(shares.count - waitedFor.count) { stoppedAccepting() }
        }
        for share in waitedFor {
            let work: @Sendable () -> Void = { [self] in
                share.drain(request, announce: stoppedAccepting.map { stopped in { _ in stopped() } },
                            done: { [self] in shareDrained(share) })
            }
            if !run(work, on: share.loop) {
                // The loop has shut down: its shutdown ended the share's connections and closed its socket.
                stoppedAccepting?()
                shareDrained(share)
            }
        }
    }

    /// Runs `work` on `loop`'s thread: now when called there, else queued. False when the loop has
    /// shut down and refused it (nothing ran).
    private func run(_ work: @escaping @Sendable () -> Void, on loop: EventLoop) -> Bool {
        if loop.inEventLoop {
            work()
            return true
        }
        return loop.enqueue(work)
    }

    /// Whether the drain under way waits for `share` (false once it drained, or when its loop's shutdown ended it).
    private func isPending(_ share: Share) -> Bool {
        state.withLock { state in
            guard case .draining(_, let pending) = state else { return false }
            return pending.contains(ObjectIdentifier(share))
        }
    }

    /// One share's connections have all closed; the last one completes the server.
    private func shareDrained(_ share: Share) {
        let last = state.withLock { state -> Bool in
            guard case .draining(let shares, var pending) = state,
                  pending.remove(ObjectIdentifier(share)) != nil else { return false }
            if pending.isEmpty {
                state = .ended
                return true
            }
            state = .draining(shares: shares, pending: pending)
            return false
        }
        if last { output.completed() }
    }

    // MARK: - Disposable

    /// Stops the listening and closes every connection the server accepted, on every loop.
    ///
    /// Thread rule: safe from any thread.
    func dispose() {
        guard !disposedFlag.exchange(true, ordering: .acquiringAndReleasing) else { return }
        drainRequests.dispose()
        if let previous = end() { stop(previous) }
    }

    /// Whether `dispose()` has been called.
    ///
    /// Thread rule: safe from any thread.
    var isDisposed: Bool { disposedFlag.load(ordering: .acquiring) }
}

/// Where a group server sends what its shares tell: the subscriber's three ends.
///
/// Thread rule: a value of `@Sendable` closures; safe from any thread.
struct GroupServerOutput<Event>: Sendable {
    let event: @Sendable (Event) -> Void
    let error: @Sendable (any Error) -> Void
    let completed: @Sendable () -> Void

    /// `subscriber`'s ends, each event written to it by `send` (which picks what the server's signal sends).
    init<Value>(_ subscriber: Subscriber<Value>, send: @escaping @Sendable (Event, Subscriber<Value>) -> Void) {
        event = { send($0, subscriber) }
        error = { subscriber.sendError($0) }
        completed = { subscriber.sendCompleted() }
    }
}
