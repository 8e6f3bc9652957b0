import Synchronization

/// A group server's drain: the request goes to every share, each on its own loop, where it drains as
/// a server on one loop does (`Listener.drain`); the server completes when the last share has drained.
///
/// The accepting shares get it first. Once all of them have closed their sockets, `.draining` is sent
/// (so a client connecting after the event is refused, and the count includes everyone accepted), and
/// the request passes on to the shares that only home connections, from the last accepting share's
/// thread: each receives it after every connection handed to it (one queue, in order), so no
/// connection reaches a share that has drained.
extension GroupServer {
    /// What a drain request does, decided under the mutex and done after it.
    private enum DrainStep {
        /// The first request: every share stops accepting and drains.
        case begin([Share])
        /// `.force` during a drain: every share resets what is left; or a graceful request that closes
        /// idle connections: every share closes its idle ones.
        case again([Share])
        /// A request before anything was bound: what was there is stopped, `.draining(open: 0)` is
        /// sent, and the server completes.
        case endBeforeServing(State)
        case nothing
    }

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
                // A later graceful request changes nothing (each share would ignore it too), unless it closes idle connections.
                switch request {
                case .force, .graceful(_, closingIdle: true): return .again(shares)
                case .graceful: return .nothing
                }
            case .starting:
                // Nothing bound yet (a host still resolving): the drain is over at once.
                let previous = state
                state = .ended
                return .endBeforeServing(previous)
            case .ended:
                return .nothing
            }
        }
        switch step {
        case .begin(let shares): distribute(request, to: shares, announcing: true)
        case .again(let shares): distribute(request, to: shares, announcing: false)
        case .endBeforeServing(let previous):
            stop(previous)
            // A drain began, as on one loop, with nothing to wait for: said, as every drain says it.
            output.event(.draining(open: 0))
            output.completed()
        case .nothing:
            break
        }
    }

    /// Hands `request` to the accepting shares, then (once each has handled it) to the others;
    /// `announcing` (the first request) has `.draining` sent in between.
    private func distribute(_ request: TCPServer.DrainRequest, to shares: [Share], announcing: Bool) {
        let accepting = shares.filter { $0.socket.accepts }
        let homing = shares.filter { !$0.socket.accepts }
        let left = Atomic(max(accepting.count, 1))
        let accepted: @Sendable () -> Void = { [self] in
            guard left.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 else { return }
            if announcing { output.event(.draining(open: budget.open)) }
            forward(request, to: homing, announcing: false, handled: nil)
        }
        if accepting.isEmpty { accepted() }
        forward(request, to: accepting, announcing: announcing, handled: accepted)
    }

    /// Hands `request` to each share on its loop. `handled` runs once per share: on the first request
    /// once its socket is closed (before its drain can finish), else once the share has run it.
    ///
    /// A loop that refuses (it shut down) has no connections left and no socket, so its share counts
    /// as drained. A share the drain does not wait for (its loop's shutdown ended it) is not asked: its
    /// loop may still be closing and run the request, but the ended share would ignore it, and with it
    /// `handled`. Such shares are counted first: a share asked on this thread may drain at once, and
    /// the last to drain completes the server, which must come after `.draining`.
    private func forward(_ request: TCPServer.DrainRequest, to shares: [Share], announcing: Bool,
                         handled: (@Sendable () -> Void)?) {
        let waitedFor = shares.filter(isPending)
        if let handled {
            for _ in 0..<(shares.count - waitedFor.count) { handled() }
        }
        for share in waitedFor {
            let work: @Sendable () -> Void = { [self] in
                // A share that stops accepting now says so before its drain can finish; one that had
                // ended already (its loop shutting down meanwhile) says so after.
                var told = false
                let announce: ((Int) -> Void)? = announcing ? { _ in
                    told = true
                    handled?()
                } : nil
                share.drain(request, announce: announce, done: { [self] in shareDrained(share) })
                if !told { handled?() }
            }
            if !run(work, on: share.loop) {
                handled?()
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
    func shareDrained(_ share: Share) {
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
}
