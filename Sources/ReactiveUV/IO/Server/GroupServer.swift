import Synchronization

/// One server subscription served by a share (a `Listener`) on every loop of a group, whatever the
/// transport.
///
/// Every share is kept in `state`, so what stops the server (dispose, a share's error, a drain, the
/// loops shutting down) reaches them all from one place; they count against one `ConnectionBudget`.
/// The transport makes and starts the shares (`start(_:)`'s closure); all the rest needs to know is
/// which of them accept (`ListeningSocket.accepts`): a loop's shutdown ends only its share, and the
/// server once no share accepts any more, and a drain reaches the accepting shares first
/// (GroupServer+Drain.swift). See docs/INTERNALS.md, "Serving on a group".
///
/// Thread rule: `dispose()` and `isDisposed` are safe from any thread; `start(_:)` and `follow(_:)`
/// run on the coordinator's (the group's first loop's) thread; each share's callbacks run on its own
/// loop's thread.
final class GroupServer<Socket: ListeningSocket>: Disposable, @unchecked Sendable {
    // `state` is behind its mutex (the coordinator, every share's loop and `dispose()` touch it); the rest
    // is immutable, atomic, or a `SerialDisposable` (thread-safe). No callback, and no share's method,
    // is called while the mutex is held.

    typealias Share = Listener<Socket>

    enum State {
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

    /// The loops served; the first (the coordinator) starts the server.
    let group: EventLoopGroup
    /// What the server was given, for the shares.
    let options: Socket.Options
    let backlog: ListenBacklog
    /// What a refusal of the options names.
    private let context: String
    /// The connections open across the group (and those on their way to a loop), against `maxConnections`.
    let budget: ConnectionBudget
    private let onAccepted: (@Sendable (Socket.Event.Connection) -> Void)?
    /// The subscriber's three ends.
    let output: GroupServerOutput<Socket.Event>
    let state = LockedValue<State>(.starting(lookup: nil))
    private let disposedFlag = Atomic<Bool>(false)
    /// The subscription to the drain requests (set once by `follow`, on the coordinator's thread).
    let drainRequests = SerialDisposable()

    /// A server on `group`; it tells the subscriber through `onAccepted` and `output` (never under the mutex).
    init(group: EventLoopGroup, options: Socket.Options, backlog: ListenBacklog, context: String,
         onAccepted: (@Sendable (Socket.Event.Connection) -> Void)?, output: GroupServerOutput<Socket.Event>) {
        self.group = group
        self.options = options
        self.backlog = backlog
        self.context = context
        self.onAccepted = onAccepted
        self.output = output
        budget = ConnectionBudget(limit: options.common.maxConnections)
    }

    /// The group's first loop: it starts the server and follows the drain requests.
    var coordinator: EventLoop { group.loops[0] }

    // MARK: - Starting (on the coordinator's thread)

    /// Checks every loop and the options, then has the transport make and start the shares.
    ///
    /// A loop that is not running or was asked to shut down fails the server, naming it, before
    /// anything is bound: it could never serve the clients that would reach its share.
    func start(_ startShares: (GroupServer) -> Void) {
        coordinator.assertInEventLoop("GroupServer.start")
        if let stopped = group.loops.first(where: { $0.shutdownRequested || !$0.acceptsNewHandles }) {
            fail(stopped.refusal)
            return
        }
        if let refusal = Share.refusal(of: options, backlog: backlog, context: context) {
            fail(refusal)
            return
        }
        startShares(self)
    }

    /// A share on `socket`'s loop, counting against the group's budget and telling the group.
    func makeShare(_ socket: Socket) -> Share {
        let loop = socket.loop
        return Share(socket: socket, budget: budget, callbacks: Share.Callbacks(
            onEvent: { [self] event in send(event) },
            onError: { [self] error in fail(error) },
            onLoopShutdown: { [self] in shareEndedByLoopShutdown(loop) }))
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

    /// Starts `share` on its loop: now when called there, else queued. A loop that has shut down
    /// since the check refuses it: `refused` releases what the share was given, and the share ends
    /// as a loop's shutdown ends it.
    func start(_ share: Share, refused: () -> Void) {
        if share.loop.inEventLoop {
            share.start()
            return
        }
        do {
            try share.loop.tryExecute { share.start() }
        } catch {
            refused()
            shareEndedByLoopShutdown(share.loop)
        }
    }

    // MARK: - What the shares tell (each on its own loop's thread)

    /// Sends a share's event to the subscriber; for `.accepted`, calls `onAccepted` first.
    func send(_ event: Socket.Event) {
        if let connection = event.acceptedConnection { onAccepted?(connection) }
        output.event(event)
    }

    /// Ends every share and tells the subscriber `error`, once.
    func fail(_ error: any Error) {
        guard let previous = end() else { return }
        stop(previous)
        output.error(error)
    }

    /// The share on `loop` ended with its loop's shutdown: during a drain it counts as drained;
    /// otherwise the server goes on while another share accepts, and else ends with
    /// `EventLoopError.shutDown` naming that loop (every share stops).
    func shareEndedByLoopShutdown(_ loop: EventLoop) {
        if let share = share(on: loop) { shareDrained(share) }
        let ended = state.withLock { state -> State? in
            guard case .serving(let shares, var shutDown) = state,
                  let share = shares.first(where: { $0.loop === loop }) else { return nil }
            shutDown.insert(ObjectIdentifier(share))
            if shares.contains(where: { $0.socket.accepts && !shutDown.contains(ObjectIdentifier($0)) }) {
                state = .serving(shares: shares, shutDown: shutDown)
                return nil
            }
            let previous = state
            state = .ended
            return previous
        }
        guard let ended else { return }
        stop(ended)
        output.error(EventLoopError.shutDown(loop: loop.name))
    }

    /// Moves to `.ended`; returns what was there, or nil when it had ended already.
    func end() -> State? {
        state.withLock { state in
            if case .ended = state { return nil }
            let previous = state
            state = .ended
            return previous
        }
    }

    /// Stops what `previous` holds: the pending lookup, or every share (each on its own loop).
    func stop(_ previous: State) {
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

extension EventLoop {
    /// Whether `shutdown()` was asked of this loop (or it has shut down): a hint when read off its thread.
    ///
    /// Thread rule: safe from any thread.
    var shutdownRequested: Bool { state.load(ordering: .relaxed).rawValue >= LoopState.closeRequested.rawValue }
}
