/// How much written-but-unflushed data one connection (TCP or Unix socket) may hold.
///
/// Bytes given to `send`/`write` that the kernel has not taken yet wait in the
/// connection's queue (`StreamConnection.queuedWriteByteCount`).
/// - Above `highWaterMark`, the connection stops reading (`uv_read_stop`), so
///   a peer that sends faster than it reads (an echo client that never reads
///   its replies) is slowed down by the transport's flow control instead of growing our
///   memory; reading resumes once the queue drains to `lowWaterMark`.
///   This suits servers and proxies, whose writes answer their reads. A side
///   whose writes do not depend on its reads, and which must read the peer's
///   replies for its own writes to drain (a client pushing more than the
///   socket buffers hold to an echo server before reading), would wait for a
///   peer that waits for it: turn `pausesReading` off there.
/// - The queue's memory cost is each queued write's payload plus a fixed
///   overhead for its request (360 bytes: the array header, the `uv_write_t`
///   and the request object around it). A write that would take a
///   non-empty queue's cost above `maxQueuedBytes` is refused with `ENOBUFS`: the
///   returned signal of `write(_:)` fails, and for `send(_:)` (which has no
///   result) the connection ends with that error on `bytes`. A send from another
///   thread is counted at the moment of the send (atomically, before it hops to
///   the loop), so a flood from another thread is bounded the same way.
/// - `StreamConnection.writable` sends `false` when the cost passes
///   `highWaterMark` and `true` once it has drained to `lowWaterMark`.
///
/// So a connection's buffering is bounded by `maxQueuedBytes` plus one read
/// chunk (64 KiB) in flight, however small its writes.
///
/// Thread rule: a value type; safe from any thread.
public struct StreamBufferLimits: Sendable, Hashable {
    /// Queue size above which reading pauses (default 1 MiB).
    ///
    /// Thread rule: safe from any thread.
    public var highWaterMark: Int
    /// Queue size at or below which paused reading resumes (default 256 KiB).
    ///
    /// Thread rule: safe from any thread.
    public var lowWaterMark: Int
    /// The most a connection's write queue may cost (payloads plus 360 bytes per write); writes past it fail with `ENOBUFS` (default 64 MiB).
    ///
    /// Thread rule: safe from any thread.
    public var maxQueuedBytes: Int
    /// Whether reading pauses above the high-water mark (default true); the queue limit applies either way.
    ///
    /// Thread rule: safe from any thread.
    public var pausesReading: Bool
    /// Whether the connection stays open for writing after the peer's EOF until `close()` (true here,
    /// for pipes and standard streams); `TCPOptions.allowHalfOpen` and `UnixSocketOptions.allowHalfOpen`
    /// set it for sockets, where the default is false (see `StreamConnection`, "Half-close").
    var allowsHalfOpen = true

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

/// Another name for `StreamBufferLimits`, kept for code written for TCP alone.
///
/// Thread rule: a value type; safe from any thread.
public typealias TCPBufferLimits = StreamBufferLimits
