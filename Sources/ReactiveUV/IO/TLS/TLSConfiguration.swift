/// PEM text (certificates or a private key), from a file or from memory.
///
/// Thread rule: a value type; safe from any thread.
public struct TLSPEMSource: Sendable, CustomStringConvertible {
    enum Storage: Sendable {
        case file(String)
        case memory([UInt8])
    }

    let storage: Storage

    /// The PEM file at `path`, read when the configuration is made.
    ///
    /// Thread rule: safe from any thread.
    public static func file(_ path: String) -> TLSPEMSource { TLSPEMSource(storage: .file(path)) }

    /// PEM text held in memory.
    ///
    /// Thread rule: safe from any thread.
    public static func pem(_ text: String) -> TLSPEMSource { TLSPEMSource(storage: .memory(Array(text.utf8))) }

    /// "file /etc/app/cert.pem", or "PEM text" (the text itself is not shown: it may be a key).
    ///
    /// Thread rule: safe from any thread.
    public var description: String {
        switch storage {
        case .file(let path): "file \(path)"
        case .memory: "PEM text"
        }
    }
}

/// Which certificate authorities a peer's certificate must lead to.
///
/// Thread rule: a value type; safe from any thread.
public struct TLSTrustRoots: Sendable {
    enum Source: Sendable {
        case system
        case pem(TLSPEMSource)
    }

    let source: Source

    /// The system's trust store (OpenSSL's default verify paths: Debian's `ca-certificates`).
    public static let system = TLSTrustRoots(source: .system)

    /// The CA certificates in `source` (PEM, one or more), instead of the system's.
    ///
    /// Thread rule: safe from any thread.
    public static func certificates(_ source: TLSPEMSource) -> TLSTrustRoots { TLSTrustRoots(source: .pem(source)) }
}

/// How a TLS client checks the server, and what it offers: pass it to `TCP.connect(host:port:tls:...)`.
///
/// The defaults are the safe ones: the system's trust store, the host name checked against the
/// server's certificate (and sent as SNI), TLS 1.2 and 1.3 only, no renegotiation. Making one
/// reads and checks the PEM it is given, so a bad file fails here and not at the first connection.
///
/// Thread rule: immutable; safe from any thread.
public struct TLSClientConfiguration: Sendable {
    let context: TLSContext
    /// The name to check the server's certificate against and send as SNI; nil: the host connected to.
    public let serverName: String?
    /// Whether the server's certificate must name `serverName` (or the host).
    public let verifiesHostname: Bool
    /// The ALPN protocols offered, most preferred first ("h2", "http/1.1"); empty: none.
    public let applicationProtocols: [String]
    /// How long the handshake may take after the TCP connection is made.
    public let handshakeTimeout: Duration
    /// Whether connections resume sessions the same server gave an earlier one.
    public let resumesSessions: Bool

    /// A client configuration.
    ///
    /// - Parameters:
    ///   - trustRoots: The CAs the server's chain must lead to (`.system` by default).
    ///   - serverName: The name checked and sent as SNI; nil for the host passed to `connect`.
    ///   - verifiesHostname: Check the certificate names the server (on by default).
    ///   - applicationProtocols: ALPN names, most preferred first.
    ///   - certificateChain: A client certificate (leaf first), for servers that ask for one.
    ///   - privateKey: Its key (required with `certificateChain`).
    ///   - handshakeTimeout: How long the handshake may take (10 seconds by default).
    ///   - resumesSessions: Keep the session (TLS 1.2) or ticket (TLS 1.3) each server sends, and
    ///     offer it on the next connection to the same server: the same name, address and port
    ///     (on by default; the last 128 servers are kept). A resumed connection says so in `tls?.resumed`.
    /// - Throws: `TLSError.configuration` for unreadable PEM, a key that does not match the certificate,
    ///   or an ALPN name longer than 255 bytes.
    ///
    /// Thread rule: safe from any thread.
    public init(trustRoots: TLSTrustRoots = .system, serverName: String? = nil, verifiesHostname: Bool = true,
                applicationProtocols: [String] = [], certificateChain: TLSPEMSource? = nil, privateKey: TLSPEMSource? = nil,
                handshakeTimeout: Duration = .seconds(10), resumesSessions: Bool = true) throws(TLSError) {
        let what = "TLSClientConfiguration"
        context = try TLSContext(server: false, what: what, alpn: applicationProtocols)
        try context.trust(trustRoots, what: what)
        if let certificateChain {
            guard let privateKey else { throw TLSError(.configuration, message: "a client certificate needs its private key", peer: what) }
            try context.use(chain: certificateChain, key: privateKey, what: what)
        }
        self.serverName = serverName
        self.verifiesHostname = verifiesHostname
        self.applicationProtocols = applicationProtocols
        self.handshakeTimeout = handshakeTimeout
        self.resumesSessions = resumesSessions
        if resumesSessions { context.cacheSessions(capacity: 128) }
    }
}

/// What a TLS server presents and asks of its clients: pass it to `TCPServer.listen(...tls:)`.
///
/// Making one loads the certificate chains and keys and checks that they match: a mismatch is a
/// `TLSError.configuration` here, not a failure at the first connection. A server may hold one
/// certificate per host name (`serverNames`), chosen by the client's SNI, beside a default one.
///
/// Copies of a configuration share its certificates: `reloadCertificates` replaces them for the
/// next handshake of every server using it, while connections already made keep theirs.
///
/// Thread rule: safe from any thread (`reloadCertificates` too).
public struct TLSServerConfiguration: Sendable {
    /// Whether the server asks clients for a certificate.
    ///
    /// Thread rule: a value type; safe from any thread.
    public enum ClientCertificates: Sendable, Hashable {
        /// Not asked for.
        case none
        /// Asked for and verified when sent; a client without one is accepted.
        case optional
        /// Asked for and verified; a client without one fails the handshake (`TLSError.peerSentNoCertificate`).
        case required
    }

    /// The context the next handshake starts with; replaced whole by `reloadCertificates`.
    private let current: LockedValue<TLSContext>
    private let settings: TLSServerSettings
    /// The ALPN protocols the server accepts, preferred first; empty: ALPN is not answered.
    public let applicationProtocols: [String]
    /// How long a client may take to finish the handshake before it is closed (`TLSError.handshakeTimeout`).
    public let handshakeTimeout: Duration
    /// Whether clients are asked for certificates.
    public let clientCertificates: ClientCertificates

    /// The context for a handshake starting now.
    var context: TLSContext { current.withLock { $0 } }

    /// A server configuration with one certificate, and optionally others chosen by SNI.
    ///
    /// - Parameters:
    ///   - certificateChain: The server's certificate, then its intermediates (PEM).
    ///   - privateKey: The certificate's key (PEM, unencrypted).
    ///   - serverNames: Certificates for the host names a client may ask for by SNI ("api.example.com",
    ///     or "*.example.com" for one more label); a client naming none of them, or no name, gets `certificateChain`.
    ///   - clientCertificates: Whether to ask clients for certificates (`.none` by default).
    ///   - clientTrustRoots: The CAs client certificates must lead to (`.system` by default).
    ///   - applicationProtocols: ALPN names the server accepts, preferred first; a client offering
    ///     none of them fails the handshake (`TLSError.noSharedProtocol`).
    ///   - handshakeTimeout: How long a client may take to finish the handshake (10 seconds by default).
    /// - Throws: `TLSError.configuration` for unreadable PEM, a key that does not match its
    ///   certificate, or a server name that is not a host name.
    ///
    /// Thread rule: safe from any thread.
    public init(certificateChain: TLSPEMSource, privateKey: TLSPEMSource, serverNames: [String: TLSCertificateChain] = [:],
                clientCertificates: ClientCertificates = .none, clientTrustRoots: TLSTrustRoots = .system,
                applicationProtocols: [String] = [], handshakeTimeout: Duration = .seconds(10)) throws(TLSError) {
        try self.init(defaultCertificate: TLSCertificateChain(certificateChain, privateKey: privateKey), serverNames: serverNames,
                      clientCertificates: clientCertificates, clientTrustRoots: clientTrustRoots,
                      applicationProtocols: applicationProtocols, handshakeTimeout: handshakeTimeout)
    }

    /// A server configuration choosing its certificate by the client's SNI, with or without a default.
    ///
    /// Without `defaultCertificate`, a client that names no host, or one with no certificate here,
    /// fails the handshake with an unrecognized_name alert (`TLSError.unrecognizedName` on both ends).
    ///
    /// - Parameters:
    ///   - defaultCertificate: The certificate for clients naming no host in `serverNames`; nil: refuse them.
    ///   - serverNames: Certificates by host name ("api.example.com", or "*.example.com" for one more label).
    ///   - clientCertificates: Whether to ask clients for certificates (`.none` by default).
    ///   - clientTrustRoots: The CAs client certificates must lead to (`.system` by default).
    ///   - applicationProtocols: ALPN names the server accepts, preferred first.
    ///   - handshakeTimeout: How long a client may take to finish the handshake (10 seconds by default).
    /// - Throws: `TLSError.configuration` for no certificate at all, unreadable PEM, a key that does
    ///   not match its certificate, or a server name that is not a host name.
    ///
    /// Thread rule: safe from any thread.
    public init(defaultCertificate: TLSCertificateChain?, serverNames: [String: TLSCertificateChain],
                clientCertificates: ClientCertificates = .none, clientTrustRoots: TLSTrustRoots = .system,
                applicationProtocols: [String] = [], handshakeTimeout: Duration = .seconds(10)) throws(TLSError) {
        settings = TLSServerSettings(applicationProtocols: applicationProtocols, clientCertificates: clientCertificates,
                                     clientTrustRoots: clientTrustRoots)
        current = LockedValue(try settings.makeContext(defaultCertificate: defaultCertificate, serverNames: serverNames,
                                                       what: "TLSServerConfiguration"))
        self.applicationProtocols = applicationProtocols
        self.handshakeTimeout = handshakeTimeout
        self.clientCertificates = clientCertificates
    }

    /// Replaces the certificates for every handshake that starts from now on, in every server using
    /// this configuration (or a copy of it), without a restart; connections already made, and
    /// handshakes under way, keep the certificate they began with. ALPN and the client-certificate
    /// policy stay as they were (the client trust roots are read again).
    ///
    /// Everything is read and checked before anything changes: on a throw, the old certificates stay.
    ///
    /// - Parameters:
    ///   - defaultCertificate: The certificate for clients naming no host in `serverNames`; nil: refuse them.
    ///   - serverNames: Certificates by host name, as in `init`.
    /// - Throws: `TLSError.configuration` as `init` does: a key that does not match its certificate, say.
    ///
    /// Thread rule: safe from any thread.
    public func reloadCertificates(defaultCertificate: TLSCertificateChain?, serverNames: [String: TLSCertificateChain] = [:]) throws(TLSError) {
        let replacement = try settings.makeContext(defaultCertificate: defaultCertificate, serverNames: serverNames,
                                                   what: "TLSServerConfiguration.reloadCertificates")
        // The old context is released outside the lock (its `deinit` calls OpenSSL).
        let old = current.withLock { context in
            let old = context
            context = replacement
            return old
        }
        _ = old
    }
}

/// What a finished handshake agreed on, and who the peer proved to be: `StreamConnection.tls`.
///
/// Thread rule: a value type; safe from any thread.
public struct TLSSessionInfo: Sendable, Hashable {
    /// "TLSv1.3" or "TLSv1.2".
    public let protocolVersion: String
    /// The cipher suite ("TLS_AES_256_GCM_SHA384").
    public let cipher: String
    /// The ALPN protocol agreed on, or nil.
    public let applicationProtocol: String?
    /// The verified peer certificate's subject ("CN=client,O=Example"), or nil when the peer sent none.
    public let peerSubject: String?
    /// The verified peer certificate's common name, or nil.
    public let peerCommonName: String?
    /// Whether the handshake resumed an earlier session (a TLS 1.3 ticket or a TLS 1.2 session)
    /// instead of a full one; the peer's identity is then the one verified when it was made.
    public let resumed: Bool
}
