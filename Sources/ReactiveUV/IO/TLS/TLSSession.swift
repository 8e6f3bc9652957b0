internal import COpenSSL
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One connection's TLS record layer: an `SSL` between two memory BIOs. Ciphertext read from the
/// socket is written into `readBIO`; what OpenSSL has to send collects in `writeBIO` and is
/// written to the socket by the stream (`StreamConnection+TLS.swift`). Nothing here touches the
/// socket, so no OpenSSL call ever blocks the loop.
///
/// Thread rule: loop thread only (the stream's); kept in its extras.
final class TLSSession {
    // Loop thread only: every field is read and written by the stream's loop.
    /// Made by `makeRecordLayer()`: at once for a client, at the client's first bytes for a server
    /// (a client that never sends costs no `SSL`); nil before.
    private(set) var ssl: OpaquePointer!
    /// Owned by `ssl` (`SSL_set_bio`).
    private(set) var readBIO: OpaquePointer!
    private(set) var writeBIO: OpaquePointer!
    let server: Bool
    /// Keeps the `SSL_CTX` alive while the session uses it.
    let context: TLSContext
    /// Where the session stands: handshaking, then open for records both ways, then (after
    /// `close()` or `shutdown()`) closed for writing. Changed only by `handshakeFinished()` and
    /// `closingForWrites()`.
    enum Phase {
        case handshaking
        case open
        case sentCloseNotify
    }

    private(set) var phase = Phase.handshaking
    /// The socket's EOF was read: what is left in `readBIO` is all there will be.
    var socketEnded = false
    /// A pump of buffered records is queued on the loop (after a reader resumed).
    var pumpQueued = false
    /// Who waits for the handshake (cleared when told).
    var handshakeCompletion: ((TLSError?) -> Void)?
    /// The handshake's deadline.
    var handshakeTimer: (any Disposable)?
    /// A client's server, as its context's session cache knows it ("name@host:port"); nil: no resumption.
    private(set) var resumptionKey: String?

    init(context: TLSContext, server: Bool) {
        self.context = context
        self.server = server
    }

    deinit { if let ssl { SSL_free(ssl) } }

    /// Makes the `SSL` and its BIOs if not made yet; false when OpenSSL could not.
    func makeRecordLayer() -> Bool {
        if ssl != nil { return true }
        guard let ssl = SSL_new(context.pointer) else { return false }
        guard let readBIO = ruv_bio_new_memory() else {
            SSL_free(ssl)
            return false
        }
        guard let writeBIO = ruv_bio_new_memory() else {
            BIO_free(readBIO)
            SSL_free(ssl)
            return false
        }
        SSL_set_bio(ssl, readBIO, writeBIO)
        if server { SSL_set_accept_state(ssl) } else { SSL_set_connect_state(ssl) }
        self.ssl = ssl
        self.readBIO = readBIO
        self.writeBIO = writeBIO
        return true
    }

    /// The handshake finished: records carry the application's bytes from now on.
    var handshakeDone: Bool { phase != .handshaking }

    func handshakeFinished() {
        if phase == .handshaking { phase = .open }
    }

    /// Moves to `sentCloseNotify`; false when close_notify cannot or need not be sent (still
    /// handshaking, or sent already).
    func closingForWrites() -> Bool {
        guard phase == .open else { return false }
        phase = .sentCloseNotify
        return true
    }

    /// Client side: checks the server's certificate chain, and its name unless `verifiesHostname` is off;
    /// sends `name` as SNI unless it is an IP address.
    func expectServer(named name: String, verifiesHostname: Bool) -> Bool {
        SSL_set_verify(ssl, SSL_VERIFY_PEER, nil)
        let isAddress = TLSSession.isIPAddress(name)
        if !isAddress, ruv_ssl_set_server_name(ssl, name) != 1 { return false }
        guard verifiesHostname else { return true }
        if isAddress { return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name) == 1 }
        return SSL_set1_host(ssl, name) == 1
    }

    /// Client side: offers the session kept for `server`, if any, and keeps the ones the server sends for it.
    func resume(server: String) {
        guard let cache = context.sessionCache else { return }
        resumptionKey = server
        // Unretained: the `SSL` is freed in this object's `deinit`, so it never outlives it.
        SSL_set_ex_data(ssl, 0, Unmanaged.passUnretained(self).toOpaque())
        guard let kept = cache.take(for: server) else { return }
        _ = SSL_set_session(ssl, kept)
        SSL_SESSION_free(kept)
    }

    /// Client side, the handshake done: a resumed TLS 1.2 session is kept again (no new one is
    /// sent for it); TLS 1.3 servers send new tickets, which `clientSessionArrived` keeps.
    func keepResumedSession() {
        guard let key = resumptionKey, let cache = context.sessionCache, SSL_session_reused(ssl) == 1,
              SSL_version(ssl) != TLS1_3_VERSION, let session = SSL_get1_session(ssl) else { return }
        cache.store(session, for: key)
    }

    /// The bytes OpenSSL has queued to send, taken out of `writeBIO` (empty when none).
    func takeOutput() -> [UInt8] {
        guard let writeBIO else { return [] }
        let pending = ruv_bio_pending(writeBIO)
        guard pending > 0 else { return [] }
        return [UInt8](unsafeUninitializedCapacity: pending) { buffer, count in
            let read = BIO_read(writeBIO, buffer.baseAddress, Int32(pending))
            count = max(0, Int(read))
        }
    }

    /// Ciphertext not yet turned into records (in the BIO, or part of a record in OpenSSL's
    /// buffer), or plaintext OpenSSL decrypted and holds.
    var hasBufferedInput: Bool { ssl != nil && (ruv_bio_pending(readBIO) > 0 || SSL_has_pending(ssl) == 1) }

    /// What the handshake agreed on and the verified peer certificate's names.
    func info() -> TLSSessionInfo {
        let version = SSL_get_version(ssl).map { String(cString: $0) } ?? "unknown"
        let cipher = SSL_CIPHER_get_name(SSL_get_current_cipher(ssl)).map { String(cString: $0) } ?? "unknown"
        var protocolData: UnsafePointer<UInt8>?
        var protocolLength: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &protocolData, &protocolLength)
        let alpn = protocolData.map { String(decoding: UnsafeBufferPointer(start: $0, count: Int(protocolLength)), as: UTF8.self) }
        var subject: String?
        var commonName: String?
        if let certificate = SSL_get1_peer_certificate(ssl) {
            defer { X509_free(certificate) }
            if let name = X509_get_subject_name(certificate) {
                subject = TLSSession.oneLine(name)
                var buffer = [CChar](repeating: 0, count: 256)
                let length = X509_NAME_get_text_by_NID(name, NID_commonName, &buffer, Int32(buffer.count))
                if length >= 0 { commonName = String(decoding: buffer.prefix(Int(length)).map { UInt8(bitPattern: $0) }, as: UTF8.self) }
            }
        }
        return TLSSessionInfo(protocolVersion: version, cipher: cipher, applicationProtocol: alpn,
                              peerSubject: subject, peerCommonName: commonName, resumed: SSL_session_reused(ssl) == 1)
    }

    /// "CN=client,O=Example" (RFC 2253 order and escaping).
    private static func oneLine(_ name: OpaquePointer) -> String? {
        guard let bio = ruv_bio_new_memory() else { return nil }
        defer { BIO_free(bio) }
        guard X509_NAME_print_ex(bio, name, 0, ruv_name_flags_rfc2253()) >= 0 else { return nil }
        let pending = ruv_bio_pending(bio)
        let bytes = [UInt8](unsafeUninitializedCapacity: pending) { buffer, count in
            count = max(0, Int(BIO_read(bio, buffer.baseAddress, Int32(pending))))
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    static func isIPAddress(_ name: String) -> Bool {
        var storage = in6_addr()
        return inet_pton(AF_INET, name, &storage) == 1 || inet_pton(AF_INET6, name, &storage) == 1
    }
}
