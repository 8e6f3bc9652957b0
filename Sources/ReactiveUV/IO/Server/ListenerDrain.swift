/// A listener that drains (see `TCPServer.DrainRequest`): the steps of a drain on the listener's
/// loop, written once for any listener that keeps its connections in `AcceptedStreams`.
///
/// `TCPListener` and `UnixListener` (every share of a group server too) drain through these.
///
/// Thread rule: loop thread only (the conformer's), except `follow`'s request callback, which hops there.
protocol DrainableListener: AnyObject, Sendable {
    /// The loop whose thread runs the drain.
    var loop: EventLoop { get }
    /// The connections the drain waits for.
    var accepted: AcceptedStreams { get }
    /// Where the drain stands.
    var drainState: DrainState { get set }
    /// The subscription to a single-loop server's drain requests (nil for a group's share).
    var drainRequests: (any Disposable)? { get set }
    /// Whether the listener was disposed.
    var isDisposed: Bool { get }
    /// Stops accepting: closes the listening socket (the object and its connections stay).
    func stopAccepting()
    /// The drain finished (its last connection closed): release what only served the open connections.
    func didFinishDrain()
}

/// Where a listener's drain stands. Loop thread only (the listener's).
enum DrainState {
    /// Accepting (no drain asked yet).
    case serving
    /// Not accepting; waiting for the open connections to close, until the deadline timer forces them.
    case draining(deadline: (any Disposable)?, done: () -> Void)
    /// Every connection closed (or the listener ended otherwise): nothing more to do.
    case drained
}

extension DrainableListener {
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
            let loop = self.loop
            if loop.inEventLoop {
                drain(request, announce: box.value.0, done: box.value.1)
            } else {
                loop.execute { self.drain(request, announce: box.value.0, done: box.value.1) }
            }
        }
    }

    /// Nothing to release by default.
    func didFinishDrain() {}

    /// Handles one drain request on the loop thread.
    ///
    /// `.graceful(timeout:)` (the first request only): stops accepting at once (a TCP listener's
    /// clients connecting from now on are refused, and those queued in the kernel and not yet
    /// accepted are reset; a Unix socket's file is removed), calls
    /// `announce` with the connections still open, then calls `done` once the last of them
    /// closed, or once `timeout` passed and the rest were reset. `.force`: the same with no
    /// wait (the rest are reset now), also during a graceful drain. A request after the
    /// drain finished does nothing.
    ///
    /// Loop thread only.
    func drain(_ request: TCPServer.DrainRequest, announce: ((Int) -> Void)?, done: @escaping () -> Void) {
        loop.assertInEventLoop("DrainableListener.drain")
        switch drainState {
        case .drained:
            return
        case .draining:
            if case .force = request { forceDrain() }
            return
        case .serving:
            break
        }
        let timeout: Duration
        switch request {
        case .graceful(let wait): timeout = max(wait, .zero)
        case .force: timeout = .zero
        }
        stopAccepting()
        announce?(accepted.count)
        let deadline = timeout > .zero ? loop.schedule(after: timeout) { [weak self] in self?.forceDrain() } : nil
        drainState = .draining(deadline: deadline, done: done)
        accepted.whenEmpty { [weak self] in self?.finishDrain() }
        if timeout == .zero { forceDrain() }
    }

    /// Resets every connection still open (the drain's deadline, or `.force`).
    /// Ends any drain for good, as the listener shuts down: its deadline is cancelled, its requests are no
    /// longer followed, and its `done` is not called (the listener's end is reported instead).
    func abandonDrain() {
        if case .draining(let deadline, _) = drainState { deadline?.dispose() }
        drainState = .drained
        drainRequests?.dispose()
        drainRequests = nil
    }

    private func forceDrain() {
        guard case .draining = drainState else { return }
        accepted.endAll(.closed, reset: true)
    }

    /// The last connection closed: stop the deadline and say so.
    private func finishDrain() {
        guard case .draining(let deadline, let done) = drainState else { return }
        drainState = .drained
        deadline?.dispose()
        didFinishDrain()
        done()
    }
}
