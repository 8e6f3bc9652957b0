internal import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A stream's ends: the half-close (`shutdown()`), the graceful close that flushes first
/// (`close()`), the immediate end (`reset()`, a failure, the owner's disposal, the loop's
/// shutdown), and what the close callback releases.
///
/// Thread rule: loop thread only.
extension StreamConnection {
    /// Half-closes: sends FIN after the queued writes; reading goes on.
    final func shutdownWrites(outcome: WriteOutcome?) {
        assertInEventLoop()
        if isHandleOpen, fileSends?.holdIfSending({ [self] in shutdownWrites(outcome: outcome) }) == true { return }
        guard isHandleOpen, !bits.writesShutDown else {
            outcome?.finish(UVError(code: UV_ENOTCONN.rawValue,
                                    message: isHandleOpen ? "the connection was already shut down for writing" : "the connection is closed",
                                    context: "shutdown of \(peerDescription)"))
            return
        }
        if let error = requestFIN(outcome: outcome) { outcome?.finish(error) }
    }

    /// Stops accepting writes and starts the `uv_shutdown` that sends FIN after the queued ones.
    ///
    /// - Returns: libuv's refusal, or nil when the request is in flight (`outcome` learns its end).
    private func requestFIN(outcome: WriteOutcome?) -> UVError? {
        // A TLS session says it is done (close_notify) before the FIN.
        if bits.tls { sendCloseNotify() }
        bits.writesShutDown = true
        // The gathered writes go before the FIN (libuv sends it after the requests it holds).
        if bits.coalescing {
            startBatch(extras)
            guard isHandleOpen else { return closedError("shutdown") }
        }
        do {
            try io.shutdown(ShutdownRequest(loop: loop, owner: self, outcome: outcome))
        } catch {
            return error
        }
        bits.shutdownPending = true
        return nil
    }

    final func shutdownDidFinish(_ request: ShutdownRequest, status: Int32) {
        bits.shutdownPending = false
        let failure = status == 0 ? nil : UVError(code: status, context: "shutdown of \(peerDescription)")
        request.outcome?.finish(failure)
        guard bits.closesWhenFlushed, isHandleOpen else { return }
        if let failure {
            end(.failed(failure))
        } else {
            endGracefulClose()
        }
    }

    /// The graceful close behind `TCPConnection.close()`: reading stops now (the reader
    /// completes), no write is accepted any more, the queued writes are flushed, FIN is
    /// sent after them, and then the socket closes. `outcome` learns how it ended.
    ///
    /// A connection already closed (or ending) answers at once: nil when it was closed,
    /// the error when it failed.
    final func closeWhenFlushed(outcome: WriteOutcome?) {
        assertInEventLoop()
        if isHandleOpen, fileSends?.holdIfSending({ [self] in closeWhenFlushed(outcome: outcome) }) == true { return }
        guard isHandleOpen else {
            switch endReason {
            case .failed(let error)?: outcome?.finish(error)
            case .shutDown?: outcome?.finish(EventLoopError.shutDown(loop: loop.name))
            case .closed?, nil: outcome?.finish(nil)
            }
            return
        }
        if let outcome { extras.closeWaiters.append(outcome) }
        guard !bits.closesWhenFlushed else { return }
        bits.closesWhenFlushed = true
        // Nothing more is read: the reader ends now, as with an immediate close.
        if bits.input == .reading { io.stopReading() }
        bits.input = .ended
        readers.take()?.sendCompleted(from: self)
        guard isHandleOpen else { return }  // the reader's completion may have closed the connection
        if bits.shutdownPending { return }  // `shutdown()` already asked for FIN: close when it is sent
        if bits.writesShutDown || closesAtOnce {
            // FIN went out already (after an earlier `shutdown()`), or nothing is left to flush.
            endGracefulClose()
            return
        }
        if let error = requestFIN(outcome: nil) { end(.failed(error)) }
    }

    /// Whether a graceful close can skip `uv_shutdown` and close now: the peer's EOF was read (so
    /// no unread byte is left in the socket, and closing it sends FIN, not RST) and no write is
    /// queued or waiting for its callback (every byte is the kernel's, which sends them before the
    /// FIN; each write's completion has come before the close's, as it would after a shutdown).
    /// Not an IPC pipe: its descriptor-passing writes are counted apart; not TLS: close_notify goes first. A `uv_shutdown` first would
    /// cost a request, a system call and a loop turn to send the same FIN.
    private var closesAtOnce: Bool {
        bits.peerEnded && !ipc && !bits.tls && queuedWriteCost == 0 && io.queuedByteCount == 0
    }

    /// The graceful close is done: the socket closes first, then its waiters hear of it,
    /// so a waiter (on any thread) finds the connection closed (`isOpen` false).
    private func endGracefulClose() {
        let waiters = takeCloseWaiters()
        end(.closed)
        for waiter in waiters { waiter.finish(nil) }
    }

    /// Tells everyone waiting for the graceful close how it ended.
    private func finishCloseWaiters(_ error: (any Error)?) {
        for waiter in takeCloseWaiters() { waiter.finish(error) }
    }

    /// Empties the list of graceful-close waiters (kept in the extras; none made: none waits).
    private func takeCloseWaiters() -> [WriteOutcome] {
        guard let extras = extrasIfMade, !extras.closeWaiters.isEmpty else { return [] }
        let waiters = extras.closeWaiters
        extras.closeWaiters = []
        return waiters
    }

    // MARK: - ending

    /// Closes the handle and tells the reader and the owner why. Idempotent.
    ///
    /// - Parameters:
    ///   - reason: Why; the reader completes for `.closed` and fails otherwise.
    ///   - reset: Send RST instead of FIN (`SO_LINGER` 0), dropping unsent data.
    final func end(_ reason: EndReason, reset: Bool = false) {
        assertInEventLoop()
        guard isHandleOpen else { return }
        recordEnd(reason)
        let reader = readers.take()
        let owner = self.owner
        ownerLink = nil
        if reset, transport == .tcp { io.lingerForReset() }
        if bits.simulated { closeSimulated() } else { closeHandle() }
        fileSends?.streamEnded(reason)
        endWritableWatchers()
        switch reason {
        case .closed: reader?.sendCompleted(from: self)
        case .failed(let error): reader?.sendError(error, from: self)
        case .shutDown: reader?.sendError(EventLoopError.shutDown(loop: loop.name), from: self)
        }
        if let extras = extrasIfMade, !extras.closeWaiters.isEmpty {
            // A graceful close that had not flushed yet: its waiters learn that the bytes were not all sent.
            switch reason {
            case .closed:
                finishCloseWaiters(UVError(code: UV_ECANCELED.rawValue,
                                           message: "the connection was closed at once (reset() or its owner's disposal) before the queued bytes were flushed",
                                           context: "close of \(peerDescription)"))
            case .failed(let error): finishCloseWaiters(error)
            case .shutDown: finishCloseWaiters(EventLoopError.shutDown(loop: loop.name))
            }
        }
        owner?.streamDidEnd(self, reason: reason)
    }
}
