/// Socket options applied to every connection a server accepts or a client opens.
///
/// Thread rule: a value type; safe from any thread.
public struct TCPOptions: Sendable, Hashable {
    /// `TCP_NODELAY`: send small writes at once instead of coalescing them (Nagle). On by default.
    public var noDelay: Bool
    /// `SO_KEEPALIVE` with this initial delay (whole seconds, at least 1), or nil to leave keep-alive off.
    public var keepAlive: Duration?
    /// How much unflushed written data a connection holds (see `TCPBufferLimits`).
    public var limits: TCPBufferLimits
    /// For a server: the most connections it keeps open at once, or nil for no limit (the default).
    ///
    /// A connection arriving at the limit is accepted and reset at once
    /// (the client sees `ECONNRESET` or an immediate end), so the kernel's
    /// backlog never fills with clients nobody will serve; `TCPServer.serve`
    /// reports it as `.refused`. A client's options ignore it.
    public var maxConnections: Int?

    /// Creates options.
    ///
    /// - Parameters:
    ///   - noDelay: Whether to set `TCP_NODELAY` (default true: latency over coalescing).
    ///   - keepAlive: The keep-alive delay, or nil for none (default).
    ///   - limits: Write-buffer limits (default `TCPBufferLimits()`).
    ///   - maxConnections: For a server, the most connections open at once (nil: no limit).
    /// - Returns: The options.
    ///
    /// Thread rule: safe from any thread.
    public init(noDelay: Bool = true, keepAlive: Duration? = nil, limits: TCPBufferLimits = TCPBufferLimits(),
                maxConnections: Int? = nil) {
        self.noDelay = noDelay
        self.keepAlive = keepAlive
        self.limits = limits
        self.maxConnections = maxConnections
    }
}

/// How much written-but-unflushed data one connection may hold.
///
/// Bytes given to `send`/`write` that the kernel has not taken yet wait in the
/// connection's queue (`TCPConnection.queuedWriteByteCount`).
/// - Above `highWaterMark`, the connection stops reading (`uv_read_stop`), so
///   a peer that sends faster than it reads (an echo client that never reads
///   its replies) is slowed down by TCP flow control instead of growing our
///   memory; reading resumes once the queue drains to `lowWaterMark`.
///   This suits servers and proxies, whose writes answer their reads. A side
///   whose writes do not depend on its reads, and which must read the peer's
///   replies for its own writes to drain (a client pushing more than the
///   socket buffers hold to an echo server before reading), would wait for a
///   peer that waits for it: turn `pausesReading` off there.
/// - A write that would take a non-empty queue above `maxQueuedBytes` is refused with
///   `ENOBUFS`: the returned signal of `write(_:)` fails, and for `send(_:)`
///   (which has no result) the connection ends with that error on `bytes`.
///
/// So a connection's buffering is bounded by `maxQueuedBytes` plus one read
/// chunk (64 KiB) in flight.
///
/// Thread rule: a value type; safe from any thread.
public struct TCPBufferLimits: Sendable, Hashable {
    /// Queue size above which reading pauses (default 1 MiB).
    public var highWaterMark: Int
    /// Queue size at or below which paused reading resumes (default 256 KiB).
    public var lowWaterMark: Int
    /// The most unflushed bytes a connection holds; larger writes fail with `ENOBUFS` (default 64 MiB).
    public var maxQueuedBytes: Int
    /// Whether reading pauses above the high-water mark (default true); the queue limit applies either way.
    public var pausesReading: Bool

    /// Creates limits; the values are clamped so that 0 ≤ low ≤ high ≤ max.
    ///
    /// - Parameters:
    ///   - highWaterMark: Pause reading above this many queued bytes.
    ///   - lowWaterMark: Resume reading at or below this many.
    ///   - maxQueuedBytes: Refuse writes beyond this many.
    ///   - pausesReading: Whether reading pauses above the high-water mark.
    /// - Returns: The limits.
    ///
    /// Thread rule: safe from any thread.
    public init(highWaterMark: Int = 1 << 20, lowWaterMark: Int = 256 << 10, maxQueuedBytes: Int = 64 << 20,
                pausesReading: Bool = true) {
        self.pausesReading = pausesReading
        self.maxQueuedBytes = max(0, maxQueuedBytes)
        self.highWaterMark = min(max(0, highWaterMark), self.maxQueuedBytes)
        self.lowWaterMark = min(max(0, lowWaterMark), self.highWaterMark)
    }
}
