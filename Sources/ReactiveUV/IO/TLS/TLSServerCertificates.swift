internal import COpenSSL

/// A certificate chain (leaf first, then its intermediates) and the leaf's private key, in PEM.
///
/// Thread rule: a value type; safe from any thread.
public struct TLSCertificateChain: Sendable {
    /// The certificate, then its intermediates.
    public let chain: TLSPEMSource
    /// The certificate's key (unencrypted).
    public let privateKey: TLSPEMSource

    /// The chain in `chain` with the key in `privateKey` (read and checked when a configuration is made).
    ///
    /// Thread rule: safe from any thread.
    public init(_ chain: TLSPEMSource, privateKey: TLSPEMSource) {
        self.chain = chain
        self.privateKey = privateKey
    }
}

/// What every server context of one configuration shares, so that a reload or an SNI choice
/// changes only the certificate: ALPN, the client-certificate policy and its trust roots.
struct TLSServerSettings: Sendable {
    let applicationProtocols: [String]
    let clientCertificates: TLSServerConfiguration.ClientCertificates
    let clientTrustRoots: TLSTrustRoots

    /// The context a handshake starts with: `defaultCertificate`'s (none: a client must name one of
    /// `serverNames`), switched by the client's SNI to a context of each of `serverNames`.
    func makeContext(defaultCertificate: TLSCertificateChain?, serverNames: [String: TLSCertificateChain],
                     what: String) throws(TLSError) -> TLSContext {
        guard defaultCertificate != nil || !serverNames.isEmpty else {
            throw TLSError(.configuration, message: "no certificate: give a default one or one per server name", peer: what)
        }
        let base = try makeContext(defaultCertificate, what: what)
        guard !serverNames.isEmpty else { return base }
        var exact: [String: TLSContext] = [:]
        var wildcard: [String: TLSContext] = [:]
        for (name, certificate) in serverNames {
            let key = try TLSServerNames.validated(name, what: what)
            let context = try makeContext(certificate, what: "\(what) for \(name)")
            if key.hasPrefix("*.") { wildcard[String(key.dropFirst(2))] = context } else { exact[key] = context }
        }
        base.chooseCertificates(TLSServerNames(exact: exact, wildcard: wildcard, hasDefault: defaultCertificate != nil))
        return base
    }

    private func makeContext(_ certificate: TLSCertificateChain?, what: String) throws(TLSError) -> TLSContext {
        let context = try TLSContext(server: true, what: what, alpn: applicationProtocols)
        if let certificate { try context.use(chain: certificate.chain, key: certificate.privateKey, what: what) }
        if clientCertificates != .none {
            try context.trust(clientTrustRoots, what: what)
            context.askForClientCertificates(required: clientCertificates == .required)
        }
        return context
    }
}

/// The certificates a server chooses among by the client's SNI: exact names, then `*.rest` for one
/// more label, then the default (the base context's own certificate) when there is one.
///
/// Thread rule: immutable; safe from any thread.
final class TLSServerNames: Sendable {
    let exact: [String: TLSContext]
    /// Keyed by what follows "*." ("example.com" for "*.example.com").
    let wildcard: [String: TLSContext]
    let hasDefault: Bool

    init(exact: [String: TLSContext], wildcard: [String: TLSContext], hasDefault: Bool) {
        self.exact = exact
        self.wildcard = wildcard
        self.hasDefault = hasDefault
    }

    /// The context for `name` (lowercased first), or nil for the default.
    func context(for name: String) -> TLSContext? {
        let name = name.lowercased()
        if let context = exact[name] { return context }
        guard let dot = name.firstIndex(of: ".") else { return nil }
        return wildcard[String(name[name.index(after: dot)...])]
    }

    /// `name` lowercased, or a configuration error: empty, longer than 253 bytes, or with `*`
    /// anywhere but a leading "*." label.
    static func validated(_ name: String, what: String) throws(TLSError) -> String {
        let key = name.lowercased()
        let rest = key.hasPrefix("*.") ? key.dropFirst(2) : Substring(key)
        guard !rest.isEmpty, key.utf8.count <= 253, !rest.contains("*"), !rest.hasPrefix("."), !rest.hasSuffix(".") else {
            throw TLSError(.configuration, message: "\"\(name)\" is not a server name (a host name, or *.host for one more label)", peer: what)
        }
        return key
    }
}

/// The server's SNI callback: switches the session to the named certificate's context, keeps the
/// default, or refuses a name it has no certificate for with an unrecognized_name alert.
let serverNameSelect: @convention(c) (OpaquePointer?, UnsafeMutablePointer<Int32>?, UnsafeMutableRawPointer?) -> Int32 = { ssl, alert, argument in
    guard let ssl, let argument else { return SSL_TLSEXT_ERR_ALERT_FATAL }
    let base = Unmanaged<TLSContext>.fromOpaque(argument).takeUnretainedValue()
    guard let names = base.serverNames else { return SSL_TLSEXT_ERR_OK }
    if let requested = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name),
       let chosen = names.context(for: String(cString: requested)) {
        // The session holds a reference to the chosen context from here on.
        return SSL_set_SSL_CTX(ssl, chosen.pointer) == nil ? SSL_TLSEXT_ERR_ALERT_FATAL : SSL_TLSEXT_ERR_OK
    }
    if names.hasDefault { return SSL_TLSEXT_ERR_OK }
    alert?.pointee = Int32(SSL_AD_UNRECOGNIZED_NAME)
    return SSL_TLSEXT_ERR_ALERT_FATAL
}
