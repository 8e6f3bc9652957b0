/// Socket options applied to every connection a server accepts or a client opens.
///
/// Thread rule: a value type; safe from any thread.
public struct TCPOptions: Sendable, Hashable {
    /// `TCP_NODELAY`: send small writes at once instead of coalescing them (Nagle). On by default.
    ///
    /// Thread rule: safe from any thread.
    public var noDelay: Bool
    /// `SO_KEEPALIVE` with this initial delay (whole seconds, at least 1), or nil to leave keep-alive off.
    ///
    /// At most 32,767 seconds (about 9 hours: Linux's `TCP_KEEPIDLE` limit): a server given
    /// more fails with `EINVAL` before anything is bound, and so does a connect, rather than
    /// leave every connection at the kernel's default delay (2 hours).
    ///
    /// Thread rule: safe from any thread.
    public var keepAlive: Duration?

    /// Linux's largest `TCP_KEEPIDLE` (`MAX_TCP_KEEPIDLE`), in seconds.
    static let maxKeepAliveSeconds: Int64 = 32_767

    /// The refusal of a keep-alive delay the kernel would refuse on every connection, or nil.
    static func keepAliveRefusal(_ keepAlive: Duration?, option: String = "TCPOptions.keepAlive", context: String) -> UVError? {
        guard let keepAlive, keepAlive.components.seconds > maxKeepAliveSeconds else { return nil }
        return UVError(code: UVError.invalidArgumentCode,
                       message: "\(option) must be at most \(maxKeepAliveSeconds) seconds (Linux's TCP_KEEPIDLE limit, about 9 hours), got \(keepAlive): the kernel would refuse it on every connection and keep its own 2-hour default",
                       context: context)
    }
    /// How much unflushed written data a connection holds (see `StreamBufferLimits`).
    ///
    /// Thread rule: safe from any thread.
    public var limits: StreamBufferLimits { get { common.limits } set { common.bufferLimits = newValue } }
    /// Keep a connection open for writing after the peer's EOF until `close()` (Node's `allowHalfOpen`); default false.
    ///
    /// By default a connection whose peer half-closed closes itself once the
    /// application has had its turn with the EOF and what it queued is flushed
    /// (see `StreamConnection`, "Half-close"). Set it for a protocol that answers
    /// after the peer's EOF, later than that.
    ///
    /// Thread rule: safe from any thread.
    public var allowHalfOpen: Bool { get { common.allowHalfOpen } set { common.allowHalfOpen = newValue } }
    /// For a server: the most connections it keeps open at once, or nil for no limit (the default).
    ///
    /// A connection arriving at the limit is accepted and reset at once
    /// (the client sees `ECONNRESET` or an immediate end), so the kernel's
    /// backlog never fills with clients nobody will serve; `TCPServer.serve`
    /// reports it as `.refused`. At least 1 (a server given less fails with `EINVAL`
    /// before anything is bound). A client's options ignore it.
    ///
    /// Thread rule: safe from any thread.
    public var maxConnections: Int? { get { common.maxConnections } set { common.maxConnections = newValue } }
    /// For a server: close a connection after this long with no bytes moving over it, or nil (the default) for never.
    ///
    /// Activity is a byte crossing the socket either way, by the kernel's own record (`TCP_INFO`):
    /// data received (read or still buffered) or sent. A connection whose writes wait on a peer
    /// that does not read, and which receives nothing, is idle. One timer per loop checks every
    /// quarter of the timeout, so a connection closes between the timeout and about 1.25 times it
    /// after its last byte: its `bytes` fails with `ETIMEDOUT` naming the idle time, and its queued
    /// writes are dropped. Must be positive (else the server fails with `EINVAL`); past 2^32 ms
    /// (about 49 days) counts as 2^32 ms. A client's options ignore it.
    ///
    /// Thread rule: safe from any thread.
    public var idleTimeout: Duration? { get { common.idleTimeout } set { common.idleTimeout = newValue } }

    /// Creates options.
    ///
    /// - Parameters:
    ///   - noDelay: Whether to set `TCP_NODELAY` (default true: latency over coalescing).
    ///   - keepAlive: The keep-alive delay, or nil for none (default).
    ///   - limits: Write-buffer limits (default `StreamBufferLimits()`).
    ///   - maxConnections: For a server, the most connections open at once (nil: no limit).
    ///   - allowHalfOpen: Keep a connection writable after the peer's EOF until `close()` (default false).
    ///   - idleTimeout: For a server, how long a connection may move no bytes before it is closed (nil: never).
    /// - Returns: The options.
    ///
    /// Thread rule: safe from any thread.
    public init(noDelay: Bool = true, keepAlive: Duration? = nil, limits: StreamBufferLimits = StreamBufferLimits(),
                maxConnections: Int? = nil, allowHalfOpen: Bool = false, idleTimeout: Duration? = nil) {
        self.noDelay = noDelay
        self.keepAlive = keepAlive
        common = StreamSocketOptions(bufferLimits: limits, allowHalfOpen: allowHalfOpen, maxConnections: maxConnections,
                                     idleTimeout: idleTimeout)
    }

    /// What TCP shares with Unix-domain sockets' options, read by the server (`ServerOptions`).
    var common: StreamSocketOptions
}

extension TCPOptions: ServerOptions {}
