internal import COpenSSL

/// Why a TLS handshake or record failed, or a TLS configuration was refused.
///
/// Matchable as `UVError` is: `catch TLSError.certificateExpired` and `case TLSError.unknownCA:`
/// compare the `kind` alone. `peer` names the other end ("127.0.0.1:8443"), `message` says what
/// OpenSSL reported.
///
/// Thread rule: a value type; safe from any thread.
public struct TLSError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong, for matching.
    ///
    /// Thread rule: a value type; safe from any thread.
    public enum Kind: String, Sendable, Hashable {
        /// The peer's certificate (or one in its chain) has expired.
        case certificateExpired
        /// The peer's certificate is not valid yet.
        case certificateNotYetValid
        /// The peer's chain does not lead to a trusted CA (or is self-signed and not trusted).
        case unknownCA
        /// The server's certificate does not name the host that was asked for.
        case hostnameMismatch
        /// The peer's certificate was refused for another reason (bad signature, wrong purpose...).
        case badCertificate
        /// No TLS version, cipher or ALPN protocol both ends accept (a TLS 1.0 peer, for one).
        case noSharedProtocol
        /// The handshake did not finish in time.
        case handshakeTimeout
        /// A certificate was required of the peer and it sent none.
        case peerSentNoCertificate
        /// The peer sent something that is not a valid TLS record (plain bytes, a bad MAC, a cut record).
        case badRecord
        /// The peer closed the connection before the handshake finished.
        case handshakeTruncated
        /// The client asked (by SNI) for a host the server has no certificate for, and it has no default one.
        case unrecognizedName
        /// The peer sent an alert refusing the handshake (it did not accept our certificate, say).
        case peerAlert
        /// A configuration was refused: an unreadable file, a key that does not match its certificate.
        case configuration
    }

    /// What went wrong.
    public let kind: Kind
    /// What OpenSSL reported, in words.
    public let message: String
    /// The other end ("127.0.0.1:8443"); for `.configuration`, the configuration type that refused it.
    public let peer: String

    /// An error of `kind` with `message`, about `peer`.
    ///
    /// Thread rule: safe from any thread.
    public init(_ kind: Kind, message: String, peer: String = "") {
        self.kind = kind
        self.message = message
        self.peer = peer
    }

    /// "TLSError.hostnameMismatch: ... (peer 127.0.0.1:8443)"; a configuration error names its type instead.
    ///
    /// Thread rule: safe from any thread.
    public var description: String {
        "TLSError.\(kind.rawValue): \(message)\(peer.isEmpty ? "" : kind == .configuration ? " (\(peer))" : " (peer \(peer))")"
    }

    /// Whether two errors are of the same kind (message and peer aside).
    ///
    /// Thread rule: safe from any thread.
    public static func == (lhs: TLSError, rhs: TLSError) -> Bool { lhs.kind == rhs.kind }

    /// Hashes the kind only, so that equal errors hash alike.
    ///
    /// Thread rule: safe from any thread.
    public func hash(into hasher: inout Hasher) { hasher.combine(kind) }

    /// Whether `value` is a `TLSError` of `pattern`'s kind, so `catch TLSError.unknownCA` matches any error.
    ///
    /// Thread rule: safe from any thread.
    public static func ~= (pattern: TLSError, value: any Error) -> Bool {
        (value as? TLSError)?.kind == pattern.kind
    }

    /// A pattern for `catch` and `case`: the peer's certificate has expired.
    public static let certificateExpired = TLSError(.certificateExpired, message: "")
    /// A pattern for `catch` and `case`: the peer's certificate is not valid yet.
    public static let certificateNotYetValid = TLSError(.certificateNotYetValid, message: "")
    /// A pattern for `catch` and `case`: the peer's chain does not lead to a trusted CA.
    public static let unknownCA = TLSError(.unknownCA, message: "")
    /// A pattern for `catch` and `case`: the server's certificate does not name the host.
    public static let hostnameMismatch = TLSError(.hostnameMismatch, message: "")
    /// A pattern for `catch` and `case`: the peer's certificate was refused for another reason.
    public static let badCertificate = TLSError(.badCertificate, message: "")
    /// A pattern for `catch` and `case`: no version, cipher or ALPN protocol in common.
    public static let noSharedProtocol = TLSError(.noSharedProtocol, message: "")
    /// A pattern for `catch` and `case`: the handshake did not finish in time.
    public static let handshakeTimeout = TLSError(.handshakeTimeout, message: "")
    /// A pattern for `catch` and `case`: a required client certificate was not sent.
    public static let peerSentNoCertificate = TLSError(.peerSentNoCertificate, message: "")
    /// A pattern for `catch` and `case`: the peer sent something that is not a valid record.
    public static let badRecord = TLSError(.badRecord, message: "")
    /// A pattern for `catch` and `case`: the peer closed before the handshake finished.
    public static let handshakeTruncated = TLSError(.handshakeTruncated, message: "")
    /// A pattern for `catch` and `case`: the server has no certificate for the name the client asked for.
    public static let unrecognizedName = TLSError(.unrecognizedName, message: "")
    /// A pattern for `catch` and `case`: the peer refused the handshake with an alert.
    public static let peerAlert = TLSError(.peerAlert, message: "")
    /// A pattern for `catch` and `case`: a configuration was refused.
    public static let configuration = TLSError(.configuration, message: "")
}

extension TLSError {
    /// The error OpenSSL's queue holds for a failed call (emptied here), named by the
    /// certificate check's result when the handshake failed on it.
    static func fromOpenSSL(verifyResult: Int, peer: String, fallback: Kind = .badRecord) -> TLSError {
        let (reason, text) = drainErrorQueue()
        if verifyResult != Int(X509_V_OK) {
            let verifyText = String(cString: X509_verify_cert_error_string(verifyResult))
            return TLSError(kind(ofVerifyResult: Int32(verifyResult)), message: "certificate verification failed: \(verifyText)", peer: peer)
        }
        return TLSError(kind(ofReason: reason, fallback: fallback), message: text.isEmpty ? "the TLS session failed" : text, peer: peer)
    }

    /// The first error on this thread's OpenSSL queue (its reason code and text), emptying the queue.
    static func drainErrorQueue() -> (reason: Int32, text: String) {
        let first = ERR_get_error()
        guard first != 0 else { return (0, "") }
        var buffer = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(first, &buffer, buffer.count)
        ERR_clear_error()
        let reason = Int32(first & 0x7F_FFFF)  // ERR_GET_REASON: the low 23 bits
        return (reason, String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }

    private static func kind(ofVerifyResult result: Int32) -> Kind {
        switch result {
        case X509_V_ERR_CERT_HAS_EXPIRED: .certificateExpired
        case X509_V_ERR_CERT_NOT_YET_VALID: .certificateNotYetValid
        case X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH: .hostnameMismatch
        case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY, X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT,
             X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT, X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN,
             X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE: .unknownCA
        default: .badCertificate
        }
    }

    private static func kind(ofReason reason: Int32, fallback: Kind) -> Kind {
        switch reason {
        case SSL_R_UNSUPPORTED_PROTOCOL, SSL_R_NO_SHARED_CIPHER, SSL_R_NO_PROTOCOLS_AVAILABLE,
             SSL_R_TLSV1_ALERT_PROTOCOL_VERSION, SSL_R_NO_CIPHERS_AVAILABLE, SSL_R_NO_APPLICATION_PROTOCOL,
             SSL_R_TLSV1_ALERT_NO_APPLICATION_PROTOCOL, SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE,
             SSL_R_VERSION_TOO_LOW:
            .noSharedProtocol
        case SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE, SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
            .peerSentNoCertificate
        case SSL_R_TLSV1_ALERT_UNKNOWN_CA: .unknownCA
        // The server's SNI callback is the only one of ours that fails with CALLBACK_FAILED.
        case SSL_R_TLSV1_UNRECOGNIZED_NAME, SSL_R_CALLBACK_FAILED: .unrecognizedName
        case SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED: .certificateExpired
        case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE, SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN,
             SSL_R_TLSV1_ALERT_DECRYPT_ERROR, SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE:
            .peerAlert
        case SSL_R_WRONG_VERSION_NUMBER, SSL_R_PACKET_LENGTH_TOO_LONG, SSL_R_RECORD_LENGTH_MISMATCH,
             SSL_R_DECRYPTION_FAILED_OR_BAD_RECORD_MAC, SSL_R_BAD_RECORD_TYPE, SSL_R_UNEXPECTED_RECORD,
             SSL_R_UNEXPECTED_MESSAGE, SSL_R_HTTP_REQUEST, SSL_R_HTTPS_PROXY_REQUEST, SSL_R_LENGTH_MISMATCH,
             SSL_R_BAD_PACKET_LENGTH, SSL_R_UNEXPECTED_EOF_WHILE_READING:
            .badRecord
        default: fallback
        }
    }
}
