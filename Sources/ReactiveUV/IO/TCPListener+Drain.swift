internal import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Where a listener's drain stands. Loop thread only (a `TCPListener`'s).
enum DrainState {
    /// Accepting (no drain asked yet).
    case serving
    /// Not accepting; waiting for the open connections to close, until the deadline timer forces them.
    case draining(deadline: (any Disposable)?, done: () -> Void)
    /// Every connection closed (or the listener ended otherwise): nothing more to do.
    case drained
}

extension TCPListener {
    /// Follows a single-loop server's drain requests: each is handled on the loop thread.
    ///
    /// Loop thread only.
    func follow(_ requests: Signal<TCPServer.DrainRequest>, announce: @escaping (Int) -> Void,
                done: @escaping () -> Void) {
        guard !isDisposed, case .serving = drainState else { return }
        // Like a signal's callbacks, the closures are handed to this loop's thread and only run there.
        let box = UncheckedSendable((announce, done))
        let subscription = requests.subscribeNext { [weak self] request in
            guard let self else { return }
            let loop = self.loop
            if loop.inEventLoop {
                drain(request, announce: box.value.0, done: box.value.1)
            } else {
                loop.execute { self.drain(request, announce: box.value.0, done: box.value.1) }
            }
        }
        drainRequests = subscription
    }

    /// Handles one drain request on the loop thread.
    ///
    /// `.graceful(timeout:)` (the first request only): closes the listening socket at once
    /// (clients connecting from now on are refused, and those queued in the kernel and not
    /// yet accepted are reset), calls `announce` with the connections still open, then
    /// calls `done` once the last of them closed, or once `timeout` passed and the rest were
    /// reset. `.force`: the same with no wait (the rest are reset now), also during a
    /// graceful drain. A request after the drain finished does nothing.
    ///
    /// Loop thread only.
    func drain(_ request: TCPServer.DrainRequest, announce: ((Int) -> Void)?, done: @escaping () -> Void) {
        assertInEventLoop("TCPListener.drain")
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
        // Stop accepting at once: the listening socket closes (the object and its connections stay).
        lookup?.dispose()
        lookup = nil
        close()
        announce?(accepted.count)
        let deadline = timeout > .zero ? loop.schedule(after: timeout) { [weak self] in self?.forceDrain() } : nil
        drainState = .draining(deadline: deadline, done: done)
        accepted.whenEmpty { [weak self] in self?.finishDrain() }
        if timeout == .zero { forceDrain() }
    }

    /// Resets every connection still open (the drain's deadline, or `.force`).
    private func forceDrain() {
        guard case .draining = drainState else { return }
        accepted.endAll(.closed, reset: true)
    }

    /// The last connection closed: stop the deadline and the idle timer, and say so.
    private func finishDrain() {
        guard case .draining(let deadline, let done) = drainState else { return }
        drainState = .drained
        deadline?.dispose()
        idleTimer?.dispose()
        idleTimer = nil
        done()
    }
}

extension TCPListener {
    /// How long since the connection last received or sent a byte, by the kernel's record
    /// (`TCP_INFO`), in milliseconds; nil when it cannot be read.
    ///
    /// Loop thread only.
    static func idleMilliseconds(of stream: StreamHandle) -> UInt32? {
        var descriptor = uv_os_fd_t()
        guard stream.isOpen, uv_fileno(stream.handle, &descriptor) == 0 else { return nil }
        var info = tcp_info()
        var length = socklen_t(MemoryLayout<tcp_info>.size)
        guard getsockopt(descriptor, Int32(IPPROTO_TCP), TCP_INFO, &info, &length) == 0 else { return nil }
        return min(info.tcpi_last_data_recv, info.tcpi_last_data_sent)
    }

    /// The error for server options that cannot be served (a zero or negative idle timeout), or nil.
    static func optionsRefusal(_ options: TCPOptions, origin: String) -> UVError? {
        guard let idleTimeout = options.idleTimeout, idleTimeout <= .zero else { return nil }
        return UVError(code: UVError.invalidArgumentCode,
                       message: "TCPOptions.idleTimeout must be positive (got \(idleTimeout))", context: origin)
    }

    /// `timeout` in whole milliseconds, clamped to what `TCP_INFO` can report (2^32 - 1 ms).
    static func clampedMilliseconds(_ timeout: Duration) -> UInt32 {
        let (seconds, attoseconds) = timeout.components
        guard seconds >= 0 else { return 0 }
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1000)
        guard !overflow else { return .max }
        let total = whole + attoseconds / 1_000_000_000_000_000
        return UInt32(exactly: total) ?? .max
    }
}
