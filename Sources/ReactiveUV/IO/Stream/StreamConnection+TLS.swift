internal import CLibUV
internal import COpenSSL

// The TLS lane: a stream whose `tls` bit is set reads ciphertext into its session's read BIO and
// hands the reader the plaintext OpenSSL makes of it; its writes are sealed into records before
// they join the write queue (`sendSealedOnLoop`). The lane is chosen once, when the handshake starts;
// a plain stream pays one test of the bit per read start and per write.
extension StreamConnection {
    /// What the TLS handshake agreed on and who the peer proved to be; nil for a plain connection.
    ///
    /// Thread rule: safe from any thread once the connection is handed out (set before that).
    public final var tls: TLSSessionInfo? { extrasIfMade?.tlsInfo }

    /// Puts the stream in the TLS lane and starts the handshake; `completion` hears once, on the
    /// loop thread, that it finished (nil) or why it failed (the stream is then ended).
    ///
    /// A client with a `resumptionKey` (its server) offers the session kept for it, if any.
    ///
    /// Called on the loop thread, on an open stream nobody reads yet.
    final func startTLS(_ context: TLSContext, server: Bool, serverName: String?, verifiesHostname: Bool, resumptionKey: String? = nil,
                        timeout: Duration, completion: @escaping (TLSError?) -> Void) {
        assertInEventLoop()
        guard isHandleOpen else {
            completion(TLSError(.handshakeTruncated, message: "the connection closed before the handshake", peer: peerDescription))
            return
        }
        let session = TLSSession(context: context, server: server)
        guard server || (session.makeRecordLayer() && session.expectServer(named: serverName ?? "", verifiesHostname: verifiesHostname)) else {
            let error = TLSError.fromOpenSSL(verifyResult: Int(X509_V_OK), peer: peerDescription, fallback: .configuration)
            completion(error)
            end(.failed(error))
            return
        }
        if let resumptionKey { session.resume(server: resumptionKey) }
        extras.tlsSession = session
        bits.tls = true
        session.handshakeCompletion = completion
        session.handshakeTimer = loop.schedule(after: timeout) { [self] in
            guard isHandleOpen, let session = extrasIfMade?.tlsSession, !session.handshakeDone else { return }
            failTLSHandshake(session, TLSError(.handshakeTimeout, message: "the handshake did not finish within \(timeout)", peer: peerDescription))
        }
        if let error = io.startReading(ipc: false, tls: true) {
            failTLSHandshake(session, TLSError(.handshakeTruncated, message: "cannot read: \(error)", peer: peerDescription))
            return
        }
        // A server makes its `SSL` when the ClientHello comes: a client that never sends costs none.
        if !server { continueTLSHandshake(session) }
    }

    /// libuv read `count` bytes of ciphertext into `buffer`, or reports EOF or an error (the lane's `didRead`).
    final func tlsDidRead(_ count: Int, in buffer: UnsafePointer<uv_buf_t>?) {
        guard isHandleOpen, let session = extrasIfMade?.tlsSession else { return }
        if count > 0 || count == endOfFileCode, !session.makeRecordLayer() {
            failTLSHandshake(session, TLSError.fromOpenSSL(verifyResult: Int(X509_V_OK), peer: peerDescription, fallback: .configuration))
            return
        }
        if count > 0, let base = buffer?.pointee.base {
            noteActivityIfTracked()
            // A memory BIO grows to take it all; reading stops when the reader pauses, which bounds it.
            _ = BIO_write(session.readBIO, base, Int32(count))
        } else if count == endOfFileCode {
            session.socketEnded = true
            io.stopReading()
        } else if count < 0 {
            let error = UVError(code: Int32(count), context: "reading from \(peerDescription)")
            if session.handshakeDone {
                end(.failed(error))
            } else {
                failTLSHandshake(session, TLSError(.handshakeTruncated, message: "the connection failed during the handshake: \(error)", peer: peerDescription))
            }
            return
        } else {
            return
        }
        if session.handshakeDone { pumpTLSPlaintext(session) } else { continueTLSHandshake(session) }
    }

    private func continueTLSHandshake(_ session: TLSSession) {
        ERR_clear_error()
        let result = SSL_do_handshake(session.ssl)
        let failure = result == 1 ? 0 : SSL_get_error(session.ssl, result)
        flushTLSOutput(session)
        guard isHandleOpen else { return }
        if result == 1 {
            session.handshakeFinished()
            session.handshakeTimer?.dispose()
            session.handshakeTimer = nil
            extras.tlsInfo = session.info()
            session.keepResumedSession()
            // Reading resumes when a reader comes (what was read past the handshake stays buffered).
            io.stopReading()
            let completion = session.handshakeCompletion
            session.handshakeCompletion = nil
            completion?(nil)
            return
        }
        if failure == SSL_ERROR_WANT_READ {
            if session.socketEnded {
                failTLSHandshake(session, TLSError(.handshakeTruncated, message: "the peer closed the connection during the handshake", peer: peerDescription))
            }
            return
        }
        let verifyResult = SSL_get_verify_result(session.ssl)
        failTLSHandshake(session, TLSError.fromOpenSSL(verifyResult: verifyResult, peer: peerDescription, fallback: .badRecord))
    }

    /// Tells the handshake's waiter why it failed and ends the stream (the alert queued first).
    private func failTLSHandshake(_ session: TLSSession, _ error: TLSError) {
        session.handshakeTimer?.dispose()
        session.handshakeTimer = nil
        let completion = session.handshakeCompletion
        session.handshakeCompletion = nil
        // The waiter hears first: the stream's end would otherwise complete a client's connect signal.
        if isHandleOpen { flushTLSOutput(session) }
        completion?(error)
        end(.failed(error))
    }

    /// Hands the reader the plaintext of every whole record buffered, while it reads; then the
    /// end: close_notify or the socket's EOF (a record cut short by it fails as `badRecord`).
    private func pumpTLSPlaintext(_ session: TLSSession) {
        // One record opens at most 16 KiB. It is opened into an array of that size: a record that
        // fills half of it goes to the reader in that array (no copy, what bulk transfers get); a
        // shorter one is copied out and the array opens the next (kept only for this pass).
        let size = min(readChunkLimit, 16_384)
        var spare: [UInt8]?
        while isHandleOpen, bits.input == .reading {
            ERR_clear_error()
            var record = spare.take() ?? [UInt8](unsafeUninitializedCapacity: size) { _, initialized in initialized = size }
            var count = 0
            let result = record.withUnsafeMutableBytes { SSL_read_ex(session.ssl, $0.baseAddress, $0.count, &count) }
            if result == 1 {
                bits.busy = true
                let chunk: [UInt8]
                if count * 2 >= size {
                    record.removeLast(size - count)
                    chunk = record
                } else {
                    chunk = record.withUnsafeBytes { ReadBuffer.copy($0.baseAddress, count: count) }
                    spare = record
                }
                readers.reader?.deliver(chunk, from: self, home: bits.readerIsHome)
                continue
            }
            let failure = SSL_get_error(session.ssl, result)
            // Post-handshake messages (a key update's answer) may have left bytes to send.
            flushTLSOutput(session)
            guard isHandleOpen else { return }
            switch failure {
            case SSL_ERROR_WANT_READ:
                guard session.socketEnded else { return }
                // A record begun and not finished: in the BIO, or already in OpenSSL's buffer.
                if session.hasBufferedInput {
                    end(.failed(TLSError(.badRecord, message: "the peer closed the connection in the middle of a record", peer: peerDescription)))
                } else {
                    // EOF without close_notify: an end all the same (most HTTPS peers close so).
                    didRead(endOfFileCode, at: nil)
                }
            case SSL_ERROR_ZERO_RETURN:
                didRead(endOfFileCode, at: nil)
            default:
                end(.failed(TLSError.fromOpenSSL(verifyResult: Int(X509_V_OK), peer: peerDescription, fallback: .badRecord)))
            }
            return
        }
    }

    /// Reading resumed (a reader came, or unpaused): records buffered meanwhile are handed over on the next turn.
    final func tlsReadingResumed() {
        guard let session = extrasIfMade?.tlsSession, session.handshakeDone, !session.pumpQueued,
              session.hasBufferedInput || session.socketEnded else { return }
        session.pumpQueued = true
        loop.execute { [self] in
            guard let session = extrasIfMade?.tlsSession else { return }
            session.pumpQueued = false
            pumpTLSPlaintext(session)
        }
    }

    /// The lane's `sendOnLoop` (open and not shut down for writing): the same checks, then `bytes`
    /// sealed into records and queued.
    final func sendSealedOnLoop(_ bytes: [UInt8], completion: (((any Error)?) -> Void)?) {
        guard admitSend(bytes, completion: completion) != nil else { return }
        sealAndQueue(bytes, completion: completion)
    }

    /// Seals `bytes` (not empty) into records and queues them, admitted already: by `admitSend`, or
    /// as a chunk of a file going out (`SealedFileSend`, which later sends wait behind).
    final func sealAndQueue(_ bytes: [UInt8], completion: (((any Error)?) -> Void)?) {
        guard let session = extrasIfMade?.tlsSession, session.phase == .open else {
            completion?(UVError(code: UV_EPIPE.rawValue, message: "the TLS session is closed for writing", context: "write to \(peerDescription)"))
            return
        }
        ERR_clear_error()
        var written = 0
        let result = bytes.withUnsafeBytes { SSL_write_ex(session.ssl, $0.baseAddress, $0.count, &written) }
        guard result == 1 else {
            let error = TLSError.fromOpenSSL(verifyResult: Int(X509_V_OK), peer: peerDescription, fallback: .badRecord)
            if let completion { completion(error) } else { end(.failed(error)) }
            return
        }
        let sealed = session.takeOutput()
        queueWrite(sealed, cost: sealed.count + StreamConnection.perWriteOverhead, completion: completion)
    }

    /// Writes what OpenSSL queued to send (handshake messages, alerts, close_notify) to the socket.
    private func flushTLSOutput(_ session: TLSSession) {
        let output = session.takeOutput()
        guard !output.isEmpty, isHandleOpen else { return }
        queueWrite(output, cost: output.count + StreamConnection.perWriteOverhead, completion: nil)
    }

    /// Seals close_notify (once), before the FIN of `close()` or `shutdown()`.
    final func sendCloseNotify() {
        guard let session = extrasIfMade?.tlsSession, session.closingForWrites() else { return }
        ERR_clear_error()
        _ = SSL_shutdown(session.ssl)
        ERR_clear_error()
        flushTLSOutput(session)
    }

    /// The handle closed: a handshake still waiting learns why, and the session is freed.
    final func tlsDidClose() {
        guard let extras = extrasIfMade, let session = extras.tlsSession else { return }
        extras.tlsSession = nil
        session.handshakeTimer?.dispose()
        session.handshakeTimer = nil
        let completion = session.handshakeCompletion
        session.handshakeCompletion = nil
        completion?(TLSError(.handshakeTruncated, message: "the connection closed during the handshake", peer: peerDescription))
    }
}
