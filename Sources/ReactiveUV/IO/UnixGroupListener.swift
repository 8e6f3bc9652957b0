import Synchronization

/// One Unix-socket server subscription served on every loop of a group (`UnixSocket.serve(on: group)`).
///
/// `SO_REUSEPORT` does not exist for `AF_UNIX`, so one socket is bound, and the group's first
/// loop accepts: its `UnixListener` (the listening share) hands each connection to the next
/// share in turn, itself included, skipping loops that are shutting down; every other loop has a
/// `UnixListener` with no socket (a homing share) that opens the connections handed to it. The
/// shares share one `ConnectionBudget`, taken by the listening share at the accept, so the
/// limit counts across the group and a refusal needs no hop. Every share is kept here, in
/// `state`: what stops the server (dispose, an error, a drain) reaches them all from one place.
///
/// A drain request goes first to the listening share, on its loop: it closes the socket, says
/// `.draining`, and only then queues the request to the other shares, so each receives it after
/// every connection handed to it (one queue, in order). Each share then drains as a server on
/// one loop does (`DrainableListener`); the server completes when the last share has drained.
/// The first loop's shutdown ends the server (nothing accepts any more); another loop's ends
/// only the connections homed there. See docs/INTERNALS.md, "Serving on a group".
///
/// Thread rule: `dispose()` and `isDisposed` are safe from any thread; `start()` runs on the
/// first loop's thread; each share's callbacks run on its own loop's thread.
final class UnixGroupListener: Disposable, @unchecked Sendable {
    // `state` is behind its lock (the first loop, every share's loop and `dispose()` touch it);
    // the rest is immutable. No callback is called while the lock is held.

    private enum State {
        /// Not started yet.
        case starting
        /// Every loop's share; the first listens.
        case serving(shares: [UnixListener])
        /// A drain began: the shares whose connections have not all closed yet.
        case draining(shares: [UnixListener], pending: Set<ObjectIdentifier>)
        /// Disposed, failed, drained, or the first loop shut down.
        case ended
    }

    private let group: EventLoopGroup
    private let path: String
    private let backlog: Int32
    private let options: UnixSocketOptions
    private let onAccepted: (@Sendable (UnixConnection) -> Void)?
    private let onEvent: @Sendable (UnixSocket.Event) -> Void
    private let onError: @Sendable (any Error) -> Void
    private let onCompleted: @Sendable () -> Void
    /// The connections open across the group (and those on their way to a loop), against `options.maxConnections`.
    private let budget: ConnectionBudget
    private let state = LockedValue<State>(.starting)
    private let disposedFlag = Atomic<Bool>(false)
    /// The subscription to the drain requests (set once by `follow`, on the first loop's thread).
    private let drainRequests = SerialDisposable()

    init(group: EventLoopGroup, path: String, backlog: Int32, options: UnixSocketOptions,
         onAccepted: (@Sendable (UnixConnection) -> Void)?,
         onEvent: @escaping @Sendable (UnixSocket.Event) -> Void,
         onError: @escaping @Sendable (any Error) -> Void,
         onCompleted: @escaping @Sendable () -> Void) {
        self.group = group
        self.path = path
        self.backlog = backlog
        self.options = options
        self.onAccepted = onAccepted
        self.onEvent = onEvent
        self.onError = onError
        self.onCompleted = onCompleted
        budget = ConnectionBudget(limit: options.maxConnections)
    }

    /// Checks the loops, makes a share per loop, and starts the listening one (bind, listen, `.listening`).
    ///
    /// Thread rule: the group's first loop's thread.
    func start() {
        let loops = group.loops
        loops[0].assertInEventLoop("UnixGroupListener.start")
        // Checked at the door, before anything is bound: a loop that is not running could never
        // serve the connections handed to it.
        if let stopped = loops.first(where: { $0.shutdownRequested || !$0.acceptsNewHandles }) {
            fail(stopped.refusal)
            return
        }
        let shares = loops.indices.map { index in
            UnixListener(loop: loops[index], role: index == 0 ? .listens : .homes, path: path, backlog: backlog,
                         options: options, budget: budget, inGroup: true, callbacks: callbacks())
        }
        let serving = state.withLock { state in
            guard case .starting = state else { return false }
            state = .serving(shares: shares)
            return true
        }
        guard serving else { return }
        shares[0].homes = shares
        shares[0].start("UnixSocket.serve(on: group)")
    }

    /// What a share tells: its events go to the subscriber (after `onAccepted`, on the
    /// connection's loop); its error (a bind error, the first loop's shutdown) ends the server.
    private func callbacks() -> UnixListener.Callbacks {
        UnixListener.Callbacks(
            onEvent: { [self] event in
                if case .accepted(let connection) = event { onAccepted?(connection) }
                onEvent(event)
            },
            onError: { [self] error in fail(error) })
    }

    /// Ends every share and tells the subscriber `error`, once.
    private func fail(_ error: any Error) {
        guard let previous = end() else { return }
        stop(previous)
        onError(error)
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

    /// Stops every share in `previous`, each on its own loop.
    private func stop(_ previous: State) {
        switch previous {
        case .serving(let shares), .draining(let shares, _): for share in shares { share.dispose() }
        case .starting, .ended: break
        }
    }

    /// Follows the drain requests.
    ///
    /// Thread rule: the first loop's thread.
    func follow(_ requests: Signal<UnixSocket.DrainRequest>) {
        guard !isDisposed else { return }
        drainRequests.inner = requests.subscribeNext { [weak self] request in self?.drain(request) }
    }

    /// Starts (or forces) the drain: the listening share first, then the others. Safe from any thread.
    private func drain(_ request: UnixSocket.DrainRequest) {
        let shares = state.withLock { state -> [UnixListener]? in
            switch state {
            case .serving(let shares):
                state = .draining(shares: shares, pending: Set(shares.map(ObjectIdentifier.init)))
                return shares
            case .draining(let shares, _):
                return shares
            case .starting, .ended:
                return nil
            }
        }
        guard let shares else { return }
        let listening = shares[0]
        let homing = Array(shares.dropFirst())
        let work: @Sendable () -> Void = { [self] in
            listening.drain(request, announce: { [self] _ in onEvent(.draining(open: budget.open)) },
                            done: { [self] in shareDrained(listening) })
            forward(request, to: homing)
        }
        if listening.loop.inEventLoop {
            work()
        } else if !listening.loop.enqueue(work) {
            // The first loop has shut down (its shutdown ended the server, or its share's
            // connections): the others still get the request.
            forward(request, to: homing)
        }
    }

    /// Queues `request` to each share on its loop; a loop that refuses (it shut down) has no
    /// connections left, so its share counts as drained.
    private func forward(_ request: UnixSocket.DrainRequest, to shares: [UnixListener]) {
        for share in shares {
            let work: @Sendable () -> Void = { [self] in
                share.drain(request, announce: nil, done: { [self] in shareDrained(share) })
            }
            if share.loop.inEventLoop {
                work()
            } else if !share.loop.enqueue(work) {
                shareDrained(share)
            }
        }
    }

    /// One share's connections have all closed; the last one completes the server.
    private func shareDrained(_ share: UnixListener) {
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
        if last { onCompleted() }
    }

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
