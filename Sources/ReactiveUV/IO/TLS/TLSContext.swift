internal import COpenSSL

/// One `SSL_CTX`: the versions, trust, certificates and ALPN list that every session made from it shares.
///
/// Made once by a configuration's initializer (where a bad file or a key that does not match
/// its certificate is refused), then only read: OpenSSL makes sessions from a context on any
/// thread once it is set up.
///
/// Thread rule: immutable after `init`; safe from any thread.
final class TLSContext: @unchecked Sendable {
    // Safe: the `SSL_CTX` is only configured while its configuration is made and then only handed
    // to `SSL_new`, which OpenSSL allows from any thread; no field is written after that.
    let pointer: OpaquePointer
    /// The ALPN list in wire form (length-prefixed names), for the server's selection callback.
    let alpnWire: [UInt8]
    /// A server's certificates by SNI name (nil: its own certificate for every client).
    private(set) var serverNames: TLSServerNames?
    /// A client's sessions to resume, by server (nil: every connection makes a full handshake).
    private(set) var sessionCache: TLSSessionCache?

    init(server: Bool, what: String, alpn: [String]) throws(TLSError) {
        guard let context = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method()) else {
            throw TLSContext.failure(what, "SSL_CTX_new failed")
        }
        pointer = context
        var wire: [UInt8] = []
        for name in alpn {
            let bytes = Array(name.utf8)
            guard (1...255).contains(bytes.count) else {
                throw TLSContext.failure(what, "an ALPN protocol name has 1...255 bytes, got \"\(name)\"")
            }
            wire.append(UInt8(bytes.count))
            wire += bytes
        }
        alpnWire = wire
        guard ruv_ssl_ctx_set_versions(context) == 1 else { throw TLSContext.failure(what, "cannot limit the versions to TLS 1.2 and 1.3") }
        ruv_ssl_ctx_set_defaults(context)
        // A server that verifies clients must name its sessions, or a TLS 1.2 resumption fails.
        if server { _ = SSL_CTX_set_session_id_context(context, Array("ReactiveUV".utf8), 10) }
        if !wire.isEmpty {
            if server {
                SSL_CTX_set_alpn_select_cb(context, alpnSelect, Unmanaged.passUnretained(self).toOpaque())
            } else if SSL_CTX_set_alpn_protos(context, wire, UInt32(wire.count)) != 0 {
                throw TLSContext.failure(what, "the ALPN list was refused")
            }
        }
    }

    deinit { SSL_CTX_free(pointer) }

    /// Chooses among `names` by the client's SNI (a server context, before any session is made from it).
    func chooseCertificates(_ names: TLSServerNames) {
        serverNames = names
        ruv_ssl_ctx_set_servername_callback(pointer, serverNameSelect, Unmanaged.passUnretained(self).toOpaque())
    }

    /// Keeps the sessions and tickets servers send, for the next connection to the same server (a client context).
    func cacheSessions(capacity: Int) {
        sessionCache = TLSSessionCache(capacity: capacity)
        ruv_ssl_ctx_set_client_session_cache(pointer, clientSessionArrived)
    }

    /// Trusts the system's CAs (OpenSSL's default verify paths) or the PEM certificates given.
    func trust(_ roots: TLSTrustRoots, what: String) throws(TLSError) {
        switch roots.source {
        case .system:
            guard SSL_CTX_set_default_verify_paths(pointer) == 1 else { throw TLSContext.failure(what, "cannot load the system's trust store") }
        case .pem(let source):
            let certificates = try TLSContext.certificates(from: source, what: what)
            guard !certificates.isEmpty else { throw TLSContext.failure(what, "no certificate in the trust roots (\(source))") }
            let store = SSL_CTX_get_cert_store(pointer)
            for certificate in certificates {
                defer { X509_free(certificate) }
                guard X509_STORE_add_cert(store, certificate) == 1 else { throw TLSContext.failure(what, "a trust root was refused") }
            }
        }
    }

    /// Asks clients for a certificate, verified against the trust roots; `required`: a client without one fails.
    func askForClientCertificates(required: Bool) {
        SSL_CTX_set_verify(pointer, SSL_VERIFY_PEER | (required ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0), nil)
    }

    /// Uses `chain` (leaf first) and `key`; refuses a key that does not match the leaf.
    func use(chain: TLSPEMSource, key: TLSPEMSource, what: String) throws(TLSError) {
        let certificates = try TLSContext.certificates(from: chain, what: what)
        guard let leaf = certificates.first else { throw TLSContext.failure(what, "no certificate in \(chain)") }
        defer { certificates.forEach { X509_free($0) } }
        guard SSL_CTX_use_certificate(pointer, leaf) == 1 else { throw TLSContext.failure(what, "the certificate was refused") }
        for intermediate in certificates.dropFirst() {
            // add1: the context takes its own reference.
            guard SSL_CTX_ctrl(pointer, SSL_CTRL_CHAIN_CERT, 1, UnsafeMutableRawPointer(intermediate)) == 1 else {
                throw TLSContext.failure(what, "a chain certificate was refused")
            }
        }
        guard let bio = try TLSContext.open(key, what: what) else { throw TLSContext.failure(what, "cannot read \(key)") }
        defer { BIO_free(bio) }
        guard let privateKey = PEM_read_bio_PrivateKey(bio, nil, nil, nil) else {
            throw TLSContext.failure(what, "no private key in \(key)")
        }
        defer { EVP_PKEY_free(privateKey) }
        guard SSL_CTX_use_PrivateKey(pointer, privateKey) == 1, SSL_CTX_check_private_key(pointer) == 1 else {
            throw TLSContext.failure(what, "the private key does not match the certificate (\(key), \(chain))")
        }
    }

    /// The certificates in a PEM source, in order (each owned by the caller).
    static func certificates(from source: TLSPEMSource, what: String) throws(TLSError) -> [OpaquePointer] {
        guard let bio = try open(source, what: what) else { throw failure(what, "cannot read \(source)") }
        defer { BIO_free(bio) }
        var certificates: [OpaquePointer] = []
        while let certificate = PEM_read_bio_X509(bio, nil, nil, nil) { certificates.append(certificate) }
        // The loop ends at the end of the input, which OpenSSL queues as an error.
        ERR_clear_error()
        return certificates
    }

    private static func open(_ source: TLSPEMSource, what: String) throws(TLSError) -> OpaquePointer? {
        switch source.storage {
        case .file(let path):
            return BIO_new_file(path, "r")
        case .memory(let bytes):
            // BIO_new_mem_buf borrows its bytes: copy them into a memory BIO it owns instead.
            guard let bio = ruv_bio_new_memory() else { return nil }
            guard bytes.isEmpty || BIO_write(bio, bytes, Int32(bytes.count)) == Int32(bytes.count) else {
                BIO_free(bio)
                throw failure(what, "cannot buffer the PEM text")
            }
            return bio
        }
    }

    static func failure(_ what: String, _ message: String) -> TLSError {
        let (_, detail) = TLSError.drainErrorQueue()
        return TLSError(.configuration, message: detail.isEmpty ? message : "\(message): \(detail)", peer: what)
    }
}

/// The server's ALPN choice: the first of its own names the client offered; none in common is a fatal alert.
private let alpnSelect: @convention(c) (OpaquePointer?, UnsafeMutablePointer<UnsafePointer<UInt8>?>?, UnsafeMutablePointer<UInt8>?,
                                         UnsafePointer<UInt8>?, UInt32, UnsafeMutableRawPointer?) -> Int32 = { _, out, outLength, offered, offeredLength, argument in
    guard let argument, let out, let outLength, let offered else { return SSL_TLSEXT_ERR_ALERT_FATAL }
    let context = Unmanaged<TLSContext>.fromOpaque(argument).takeUnretainedValue()
    let client = UnsafeBufferPointer(start: offered, count: Int(offeredLength))
    var index = 0
    let own = context.alpnWire
    while index < own.count {
        let length = Int(own[index])
        let name = own[(index + 1)..<(index + 1 + length)]
        var offset = 0
        while offset < client.count {
            let offeredName = Int(client[offset])
            if offset + 1 + offeredName <= client.count, offeredName == length,
               client[(offset + 1)..<(offset + 1 + offeredName)].elementsEqual(name) {
                // Points into the client's list, which OpenSSL keeps while it copies the choice.
                out.pointee = offered + offset + 1
                outLength.pointee = UInt8(length)
                return SSL_TLSEXT_ERR_OK
            }
            offset += 1 + offeredName
        }
        index += 1 + length
    }
    return SSL_TLSEXT_ERR_ALERT_FATAL
}
