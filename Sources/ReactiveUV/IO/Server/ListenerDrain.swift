/// Where a listener's drain stands. Loop thread only (the listener's).
enum DrainState {
    /// Accepting (no drain asked yet).
    case serving
    /// Not accepting; waiting for the open connections to close, until the deadline timer forces them.
    case draining(deadline: (any Disposable)?, done: () -> Void)
    /// Every connection closed (or the listener ended otherwise): nothing more to do.
    case drained
}

/// The steps of a drain (see `TCPServer.DrainRequest`) on the listener's loop, the same for every
/// transport, on one loop or as a group's share.
extension Listener {
    /// Follows a single-loop server's drain requests: each is handled on the loop thread.
    ///
    /// Loop thread only.
    func follow(_ requests: Signal<TCPServer.DrainRequest>, announce: @escaping (Int) -> Void,
                done: @escaping () -> Void) {
        guard !isDisposed, case .serving = drainState else { return }
        // Like a signal's callbacks, the closures are handed to this loop's thread and only run there.
        let box = UncheckedSendable((announce, done))
        drainRequests = requests.subscribeNext { [weak self] request in
            guard let self else { return }
            if loop.inEventLoop {
                drain(request, announce: box.value.0, done: box.value.1)
            } else {
                loop.execute { self.drain(request, announce: box.value.0, done: box.value.1) }
            }
        }
    }

    /// Handles one drain request.
    ///
    /// `.graceful(timeout:closingIdle:)` (the first request only): stops accepting at once (the
    /// socket closes), calls `announce` with the connections still open, tells each of them
    /// (`StreamConnection.draining`), closes the idle ones when `closingIdle` is set, then calls
    /// `done` once the last of them closed, or once `timeout` passed and the rest were reset.
    /// `.force`: the same with no wait (the rest are reset now), also during a graceful drain. A
    /// later graceful request with `closingIdle` closes the idle connections then. A request after
    /// the drain finished does nothing.
    ///
    /// Loop thread only.
    func drain(_ request: TCPServer.DrainRequest, announce: ((Int) -> Void)?, done: @escaping () -> Void) {
        loop.assertInEventLoop("Listener.drain")
        switch drainState {
        case .drained:
            return
        case .draining:
            switch request {
            case .force: forceDrain()
            case .graceful(_, let closingIdle): if closingIdle { accepted.beginDraining(closingIdle: true) }
            }
            return
        case .serving:
            break
        }
        let timeout: Duration
        let closingIdle: Bool
        switch request {
        case .graceful(let wait, let closesIdle):
            timeout = max(wait, .zero)
            closingIdle = closesIdle
        case .force:
            timeout = .zero
            closingIdle = false
        }
        socket.close()
        announce?(accepted.count)
        let deadline = timeout > .zero ? loop.schedule(after: timeout) { [weak self] in self?.forceDrain() } : nil
        drainState = .draining(deadline: deadline, done: done)
        accepted.whenEmpty { [weak self] in self?.finishDrain() }
        // Told before a reset, so a handler learns why its connection goes.
        accepted.beginDraining(closingIdle: closingIdle && timeout > .zero)
        if timeout == .zero { forceDrain() }
    }

    /// Ends any drain for good, as the listener shuts down: its deadline is cancelled, its requests are no
    /// longer followed, and its `done` is not called (the listener's end is reported instead).
    func abandonDrain() {
        if case .draining(let deadline, _) = drainState { deadline?.dispose() }
        drainState = .drained
        drainRequests?.dispose()
        drainRequests = nil
    }

    /// Resets every connection still open (the drain's deadline, or `.force`).
    private func forceDrain() {
        guard case .draining = drainState else { return }
        accepted.endAll(.closed, reset: true)
    }

    /// The last connection closed: stop the deadline and the idle check, and say so.
    private func finishDrain() {
        guard case .draining(let deadline, let done) = drainState else { return }
        drainState = .drained
        deadline?.dispose()
        idleTimer?.dispose()
        idleTimer = nil
        done()
    }
}
