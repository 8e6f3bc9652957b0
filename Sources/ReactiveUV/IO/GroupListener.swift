import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One server subscription served on every loop of a group (`TCPServer.serve(on: group)`).
///
/// The group's first loop (the coordinator) checks that every loop runs, resolves the host,
/// and binds one `SO_REUSEPORT` socket per loop (`ReusePortSocket`), all listening before
/// `.listening` is sent; each loop then adopts its socket in a `TCPListener` of its own (its
/// share), through that loop's queue, and accepts and homes the connections the kernel
/// hashes onto it. The shares share one `ConnectionBudget`, so the limit counts across the
/// group. Every loop's share is kept here, in `state`: what stops the server (dispose, an
/// error, a drain) reaches them all from one place. A drain request goes to every share on
/// its own loop (each stops accepting, waits for its connections, forces them at the
/// deadline); the server completes when the last share has drained.
///
/// Why one socket per loop rather than one accepting loop handing descriptors to the others:
/// see docs/INTERNALS.md, "Serving on a group".
///
/// Thread rule: `dispose()` and `isDisposed` are safe from any thread; `start()` runs on the
/// coordinator's thread; each share's callbacks run on its own loop's thread.
final class GroupListener: Disposable, @unchecked Sendable {
    // `state` is behind its mutex (the coordinator, every share's loop and `dispose()` touch it);
    // the rest is immutable. No callback is called while the mutex is held.

    private enum State {
        /// The coordinator is resolving the host (the lookup, when it is pending).
        case starting(lookup: (any Disposable)?)
        /// Every loop's share; `live` counts those not ended by their loop's shutdown.
        case serving(shares: [TCPListener], live: Int)
        /// A drain began: the shares whose connections have not all closed yet.
        case draining(shares: [TCPListener], pending: Set<ObjectIdentifier>)
        /// Disposed, failed, or every loop shut down.
        case ended
    }

    private let group: EventLoopGroup
    private let host: String
    private let port: Int
    private let backlog: Int32
    private let options: TCPOptions
    private let onAccepted: (@Sendable (TCPConnection) -> Void)?
    private let onEvent: @Sendable (TCPServer.Event) -> Void
    private let onError: @Sendable (any Error) -> Void
    private let onCompleted: @Sendable () -> Void
    /// The connections open across the group, against `options.maxConnections`.
    private let budget: ConnectionBudget
    private let state = LockedValue<State>(.starting(lookup: nil))
    private let disposedFlag = Atomic<Bool>(false)
    /// The subscription to the drain requests (set once by `follow`, on the coordinator's thread).
    private let drainRequests = SerialDisposable()

    init(group: EventLoopGroup, host: String, port: Int, backlog: Int32, options: TCPOptions,
         onAccepted: (@Sendable (TCPConnection) -> Void)?,
         onEvent: @escaping @Sendable (TCPServer.Event) -> Void,
         onError: @escaping @Sendable (any Error) -> Void,
         onCompleted: @escaping @Sendable () -> Void) {
        self.group = group
        self.host = host
        self.port = port
        self.backlog = backlog
        self.options = options
        self.onAccepted = onAccepted
        self.onEvent = onEvent
        self.onError = onError
        self.onCompleted = onCompleted
        budget = ConnectionBudget(limit: options.maxConnections)
    }

    private var coordinator: EventLoop { group.loops[0] }

    /// Checks the loops, then resolves the host (at once when numeric) and starts every share.
    ///
    /// Thread rule: the coordinator's loop thread.
    func start() {
        coordinator.assertInEventLoop("GroupListener.start")
        // Checked at the door, before anything is bound: a loop that is not running could
        // never serve its share of the clients the kernel would hash onto its socket.
        if let stopped = group.loops.first(where: { !$0.acceptsNewHandles }) {
            fail(stopped.refusal)
            return
        }
        if let refusal = TCPListener.optionsRefusal(options, origin: "TCPServer.serve(on: group)") {
            fail(refusal)
            return
        }
        let lookup = HostResolution.resolve(host, port: port, socketType: SOCK_STREAM_VALUE, on: coordinator) { [self] result in
            switch result {
            case .success(let addresses): bindAll(addresses[0])
            case .failure(let error): fail(error)
            }
        }
        guard let lookup else { return }
        let keep = state.withLock { state in
            guard case .starting = state else { return false }
            state = .starting(lookup: lookup)
            return true
        }
        if !keep { lookup.dispose() }
    }

    /// Binds a socket per loop, says `.listening`, and hands each loop its socket.
    private func bindAll(_ address: SocketAddress) {
        let loops = group.loops
        let descriptors: [Int32]
        let bound: SocketAddress
        do {
            (descriptors, bound) = try ReusePortSocket.bindAll(count: loops.count, to: address, backlog: backlog)
        } catch {
            fail(error)
            return
        }
        let shares = loops.indices.map { index in
            TCPListener(loop: loops[index], source: .descriptor(descriptors[index], bound), backlog: backlog,
                        options: options, budget: budget, callbacks: callbacks(for: loops[index]))
        }
        let serving = state.withLock { state in
            guard case .starting = state else { return false }
            state = .serving(shares: shares, live: shares.count)
            return true
        }
        guard serving else {
            for descriptor in descriptors { Glibc.close(descriptor) }
            return
        }
        // Sent before any loop adopts its socket, so it reaches the subscriber before any
        // `.accepted` (which a loop sends only after its start, queued after this send).
        // Every socket listens already: a client connecting now is queued, not refused.
        onEvent(.listening(bound))
        for (share, descriptor) in zip(shares, descriptors) {
            if share.loop.inEventLoop {
                share.start()
                continue
            }
            do {
                try share.loop.tryExecute { share.start() }
            } catch {
                // The loop shut down since the check: its socket is closed here, its share
                // ends as a loop's shutdown ends it.
                Glibc.close(descriptor)
                shareEndedByLoopShutdown(share.loop)
            }
        }
    }

    /// What a share tells: its events go to the subscriber (after `onAccepted`, on the share's
    /// loop); its error ends the whole server; its loop's shutdown ends only the share.
    private func callbacks(for loop: EventLoop) -> TCPListener.Callbacks {
        TCPListener.Callbacks(
            onEvent: { [self] event in
                if case .accepted(let connection) = event { onAccepted?(connection) }
                onEvent(event)
            },
            onError: { [self] error in fail(error) },
            onLoopShutdown: { [self] in shareEndedByLoopShutdown(loop) })
    }

    private func shareEndedByLoopShutdown(_ loop: EventLoop) {
        if let share = share(on: loop) { shareDrained(share) }
        let last = state.withLock { state -> Bool in
            if case .draining = state { return false }
            guard case .serving(let shares, let live) = state else { return false }
            if live > 1 {
                state = .serving(shares: shares, live: live - 1)
                return false
            }
            state = .ended
            return true
        }
        if last { onError(EventLoopError.shutDown(loop: loop.name)) }
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

    /// Stops what `previous` holds: the pending lookup, or every share (each on its own loop).
    private func stop(_ previous: State) {
        switch previous {
        case .starting(let lookup): lookup?.dispose()
        case .serving(let shares, _), .draining(let shares, _): for share in shares { share.dispose() }
        case .ended: break
        }
    }

    /// Follows the drain requests: each goes to every share, on its own loop.
    ///
    /// Thread rule: the coordinator's loop thread.
    func follow(_ requests: Signal<TCPServer.DrainRequest>) {
        guard !isDisposed else { return }
        drainRequests.inner = requests.subscribeNext { [weak self] request in self?.drain(request) }
    }

    /// Starts (or forces) the drain of every share. Safe from any thread.
    private func drain(_ request: TCPServer.DrainRequest) {
        enum Step { case begin([TCPListener]), force([TCPListener]), endBeforeServing(State), nothing }
        let step = state.withLock { state -> Step in
            switch state {
            case .serving(let shares, _):
                state = .draining(shares: shares, pending: Set(shares.map(ObjectIdentifier.init)))
                return .begin(shares)
            case .draining(let shares, _):
                if case .force = request { return .force(shares) }
                return .nothing
            case .starting:
                // Nothing bound yet: the drain is over at once.
                let previous = state
                state = .ended
                return .endBeforeServing(previous)
            case .ended:
                return .nothing
            }
        }
        switch step {
        case .begin(let shares):
            // `.draining` goes out once every share has closed its listening socket, so a client
            // that connects after the event is refused (and its count includes everyone accepted).
            let closing = Atomic(shares.count)
            forward(request, to: shares, stoppedAccepting: { [self] in
                if closing.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 {
                    onEvent(.draining(open: budget.open))
                }
            })
        case .force(let shares):
            forward(request, to: shares, stoppedAccepting: nil)
        case .endBeforeServing(let previous):
            stop(previous)
            onCompleted()
        case .nothing:
            break
        }
    }

    /// Hands `request` to each share on its loop; a loop that refuses (it shut down) has no connections
    /// left and no socket. `stoppedAccepting` runs once per share, when its listening socket is closed.
    private func forward(_ request: TCPServer.DrainRequest, to shares: [TCPListener],
                         stoppedAccepting: (@Sendable () -> Void)?) {
        for share in shares {
            let work: @Sendable () -> Void = { [self] in
                share.drain(request, announce: stoppedAccepting.map { stopped in { _ in stopped() } },
                            done: { [self] in shareDrained(share) })
            }
            if share.loop.inEventLoop {
                work()
            } else if !share.loop.enqueue(work) {
                // The loop has shut down: its shutdown ended the share's connections and closed its socket.
                stoppedAccepting?()
                shareDrained(share)
            }
        }
    }

    /// One share's connections have all closed; the last one completes the server.
    private func shareDrained(_ share: TCPListener) {
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

    /// The share living on `loop`.
    private func share(on loop: EventLoop) -> TCPListener? {
        state.withLock { state -> TCPListener? in
            switch state {
            case .serving(let shares, _), .draining(let shares, _): shares.first { $0.loop === loop }
            case .starting, .ended: nil
            }
        }
    }

    /// Stops every loop's listening and closes every connection the server accepted.
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
