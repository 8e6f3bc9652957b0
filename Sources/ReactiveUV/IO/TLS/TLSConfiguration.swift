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
    /// - Throws: `TLSError.configuration` for unreadable PEM, a key that does not match the certificate,
    ///   or an ALPN name longer than 255 bytes.
    ///
    /// Thread rule: safe from any thread.
    public init(trustRoots: TLSTrustRoots = .system, serverName: String? = nil, verifiesHostname: Bool = true,
                applicationProtocols: [String] = [], certificateChain: TLSPEMSource? = nil, privateKey: TLSPEMSource? = nil,
                handshakeTimeout: Duration = .seconds(10)) throws(TLSError) {
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
    }
}

/// What a TLS server presents and asks of its clients: pass it to `TCPServer.listen(...tls:)`.
///
/// Making one loads the certificate chain and key and checks that they match: a mismatch is a
/// `TLSError.configuration` here, not a failure at the first connection.
///
/// Thread rule: immutable; safe from any thread.
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

    let context: TLSContext
    /// The ALPN protocols the server accepts, preferred first; empty: ALPN is not answered.
    public let applicationProtocols: [String]
    /// How long a client may take to finish the handshake before it is closed (`TLSError.handshakeTimeout`).
    public let handshakeTimeout: Duration
    /// Whether clients are asked for certificates.
    public let clientCertificates: ClientCertificates

    /// A server configuration.
    ///
    /// - Parameters:
    ///   - certificateChain: The server's certificate, then its intermediates (PEM).
    ///   - privateKey: The certificate's key (PEM, unencrypted).
    ///   - clientCertificates: Whether to ask clients for certificates (`.none` by default).
    ///   - clientTrustRoots: The CAs client certificates must lead to (`.system` by default).
    ///   - applicationProtocols: ALPN names the server accepts, preferred first; a client offering
    ///     none of them fails the handshake (`TLSError.noSharedProtocol`).
    ///   - handshakeTimeout: How long a client may take to finish the handshake (10 seconds by default).
    /// - Throws: `TLSError.configuration` for unreadable PEM or a key that does not match the certificate.
    ///
    /// Thread rule: safe from any thread.
    public init(certificateChain: TLSPEMSource, privateKey: TLSPEMSource, clientCertificates: ClientCertificates = .none,
                clientTrustRoots: TLSTrustRoots = .system, applicationProtocols: [String] = [],
                handshakeTimeout: Duration = .seconds(10)) throws(TLSError) {
        let what = "TLSServerConfiguration"
        context = try TLSContext(server: true, what: what, alpn: applicationProtocols)
        try context.use(chain: certificateChain, key: privateKey, what: what)
        if clientCertificates != .none {
            try context.trust(clientTrustRoots, what: what)
            context.askForClientCertificates(required: clientCertificates == .required)
        }
        self.applicationProtocols = applicationProtocols
        self.handshakeTimeout = handshakeTimeout
        self.clientCertificates = clientCertificates
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
}
