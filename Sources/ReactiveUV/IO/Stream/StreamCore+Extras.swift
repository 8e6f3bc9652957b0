internal import CLibUV
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What a stream needs only once it does more than wait for its peer: made on first use.
///
/// An idle server holds one `StreamConnection` per client, and most of them never queue a write,
/// send a file, watch `writable`, wait for a graceful close, pass descriptors, send from another
/// thread or name their addresses. Their state lives here, so an idle connection carries one
/// empty slot for it instead of all these fields.
///
/// Made from any thread (`StreamConnection.extras`, a compare-and-swap): the loop thread makes it on
/// the first queued write (and for the other loop-thread uses), a sending thread on its first send
/// from off the loop, a thread asking for an address on its first question. It lives as long as
/// the stream object: the handle keeps it after the close (the counters and the address cache stay
/// readable from other threads); `StreamConnection.didClose` frees the write pool.
///
/// Thread rule: the fields marked loop thread only are touched on the stream's loop thread only;
/// the atomics and `tcpAddresses` from any thread; `namedPeer` is written before the stream is handed out.
final class StreamExtras: @unchecked Sendable {
    // Loop thread only (the stream's): `writePool`, `writePoolCount`, `queuedWriteCost`, `batch`,
    // `lastBatchByteCount`, `requestsInFlight`, `flushWaiters`, `writeRequestsStarted`, `closeWaiters`, `fileSends`,
    // `writableWatchers`, `isWritable`, `bulkChunk`, `simulated`, `descriptorReceiver`, `endError`, `tlsSession`; `tlsInfo` as `namedPeer`. `namedPeer` is written before the stream is handed out and
    // only read after. The rest are atomics or lock their own state.

    /// Finished write requests kept for reuse (loop thread only): see `StreamConnection.keepForReuse`.
    @exclusivity(unchecked) var writePool: UnsafeMutablePointer<Unmanaged<WriteRequest>>?
    @exclusivity(unchecked) var writePoolCount = 0
    /// What the queued writes cost in memory: each one's payload plus `perWriteOverhead` (loop thread only).
    @exclusivity(unchecked) var queuedWriteCost = 0
    /// Small writes gathered while earlier ones are in libuv's hands (`StreamCore+Coalescing.swift`;
    /// loop thread only, and only while the stream's `coalescing` bit is set).
    @exclusivity(unchecked) var batch = WriteBatch()
    /// The size of the last batch that went out, what the next one reserves (loop thread only).
    @exclusivity(unchecked) var lastBatchByteCount = 0
    /// This stream's `uv_write` requests libuv has not called back yet (loop thread only).
    @exclusivity(unchecked) var requestsInFlight = 0
    /// Who waits for every write queued so far to be called back (`whenWritesFinished`; loop thread only).
    @exclusivity(unchecked) var flushWaiters: [() -> Void] = []
    /// Every `uv_write` this stream started (loop thread only): what tests count writes by.
    @exclusivity(unchecked) var writeRequestsStarted = 0
    /// Who waits for the graceful close (each `close()` call's result; loop thread only).
    @exclusivity(unchecked) var closeWaiters: [WriteOutcome] = []
    /// Files being sent (`sendFile`) and what waits behind them; nil until the first (loop thread only).
    @exclusivity(unchecked) var fileSends: FileSends?
    /// Who watches `writable`; nil until the first (loop thread only).
    @exclusivity(unchecked) var writableWatchers: WritableWatchers?
    /// Whether the queue's cost is below the high-water mark (see `writable`); false from above
    /// it until it has drained to the low-water mark (loop thread only; no extras: true).
    @exclusivity(unchecked) var isWritable = true
    /// The array libuv is reading into in bulk mode (full length, contents undefined until read; loop thread only).
    @exclusivity(unchecked) var bulkChunk: [UInt8] = []
    /// A simulated stream's end (its backend), from its opening until its close callback (loop thread only).
    @exclusivity(unchecked) var simulated: SimulatedStreamEnd?

    /// Who takes the descriptors an IPC pipe receives (loop thread only): see `StreamConnection.descriptorReceiver`.
    weak var descriptorReceiver: (any StreamDescriptorReceiver)?
    /// The other end's name given by whoever made the stream: see `StreamConnection.namedPeer`.
    @exclusivity(unchecked) var namedPeer: String?
    /// `queuedWriteCost` for other threads (written on the loop after each change): a send from
    /// another thread is admitted against it plus `sendsInTransit`, without waiting for the loop.
    /// Made before any cost is queued, so a thread that finds no extras finds nothing queued.
    let publishedWriteCost = Atomic<Int>(0)
    /// Bytes other threads have sent that are still on their way to the loop (counted before the
    /// hop, uncounted once the loop queued them): with `publishedWriteQueue`, what a caller off the
    /// loop sees includes its own earlier sends.
    let sendsInTransit = Atomic<Int>(0)
    /// The same sends' cost (payload plus `perWriteOverhead`): with `publishedWriteCost` it bounds a
    /// flood from another thread at the moment of each send.
    let costInTransit = Atomic<Int>(0)
    /// The TLS record layer of a stream in the TLS lane (`StreamConnection+TLS.swift`; loop thread only).
    @exclusivity(unchecked) var tlsSession: TLSSession?
    /// What the TLS handshake agreed on: written on the loop thread before the connection is handed
    /// out, only read after (`StreamConnection.tls`).
    @exclusivity(unchecked) var tlsInfo: TLSSessionInfo?
    /// The error that ended the stream (`EndReason.failed`), once it failed (loop thread only).
    @exclusivity(unchecked) var endError: (any Error)?
    /// The loop time (ms) a byte last moved, for a stream whose origin tracks it (loop thread only).
    @exclusivity(unchecked) var lastActivity: UInt64 = 0
    /// The bytes the kernel held unread at the last idle check of a Unix socket (loop thread only):
    /// see `StreamConnection.idleMillisecondsCountingUnreadBytes()`.
    @exclusivity(unchecked) var unreadAtLastCheck: Int32 = 0
    /// `queuedWriteByteCount` for other threads: written on the loop thread after each change,
    /// read anywhere, so a query from another thread never waits for the loop (a loop thread
    /// must not wait for another loop). Made before any write is queued: no extras, nothing queued.
    let publishedWriteQueue = Atomic<Int>(0)
    /// A send from another thread was refused (`ENOBUFS`) and the hop that ends the connection
    /// for it is on its way: later refusals add nothing to the loop's queue.
    let overflowEndRequested = Atomic<Bool>(false)
    /// A TCP stream's addresses once someone asked (`address(peer:)`); nil until then.
    let tcpAddresses = LazyObject<TCPAddressCache>()

    /// Moves `bulkChunk` out, leaving it empty (no retain and release of the array). Loop thread only.
    func takeBulkChunk() -> [UInt8] {
        var taken: [UInt8] = []
        swap(&taken, &bulkChunk)
        return taken
    }
}

extension StreamConnection {
    /// The extras, made now if they were not yet (from any thread).
    ///
    /// Thread rule: safe from any thread.
    var extras: StreamExtras {
        if let made = extrasSlot.load() { return made }
        return extrasSlot.storeIfNil(StreamExtras())
    }

    /// Stores `value` in the extras, making them for it; storing nil where none were made makes none.
    ///
    /// Thread rule: as the stored property's.
    private func storeInExtras<Value>(_ field: ReferenceWritableKeyPath<StreamExtras, Value?>, _ value: Value?) {
        if value == nil, extrasIfMade == nil { return }
        extras[keyPath: field] = value
    }

    /// The extras if something made them; nil for a stream that has needed none yet.
    ///
    /// Thread rule: safe from any thread.
    var extrasIfMade: StreamExtras? { extrasSlot.load() }

    /// Files being sent and the writes, shutdown and close waiting behind them; nil until the first.
    ///
    /// Thread rule: loop thread only.
    var fileSends: FileSends? {
        get { extrasIfMade?.fileSends }
        set { storeInExtras(\.fileSends, newValue) }
    }

    /// Who watches `writable`; nil until the first.
    ///
    /// Thread rule: loop thread only.
    var writableWatchers: WritableWatchers? {
        get { extrasIfMade?.writableWatchers }
        set { storeInExtras(\.writableWatchers, newValue) }
    }

    /// Who takes the descriptors an IPC pipe receives (`UnixConnection.incoming`); nil: a `bytes`
    /// reader, which cannot take them, ends when one arrives (they stay pending).
    ///
    /// Thread rule: loop thread only.
    var descriptorReceiver: (any StreamDescriptorReceiver)? {
        get { extrasIfMade?.descriptorReceiver }
        set { storeInExtras(\.descriptorReceiver, newValue) }
    }

    /// The other end's name given by whoever made the stream (a socket path, a child's pipe); nil: "peer".
    /// A TCP stream names its peer by address instead, read when first asked (`peerDescription`).
    ///
    /// Thread rule: safe from any thread once the stream is handed out (the setter: before that).
    var namedPeer: String? {
        get { extrasIfMade?.namedPeer }
        set { storeInExtras(\.namedPeer, newValue) }
    }

    /// What the queued writes cost in memory (payloads plus `perWriteOverhead`); 0 while no extras were made.
    ///
    /// Thread rule: loop thread only.
    var queuedWriteCost: Int { extrasIfMade?.queuedWriteCost ?? 0 }

    /// Whether the queue's cost is below the high-water mark (see `writable`); true while no extras were made
    /// (a queued write makes them before it can pass the mark).
    ///
    /// Thread rule: loop thread only.
    var isWritable: Bool { extrasIfMade?.isWritable ?? true }
}

extension StreamConnection {
    /// Stamps the loop's time as the moment a byte last moved (accepted, read, or taken by the kernel
    /// to send), for `idleMilliseconds`. Called only for a stream whose origin tracks it
    /// (`StreamOrigin.tracksActivity`): the others pay one load and a branch per read or write.
    /// Loop thread only.
    private func noteActivity() {
        extras.lastActivity = loop.loopTimeMilliseconds
    }

    /// `noteActivity()` for a stream whose origin tracks activity; one load and a branch for the others
    /// (every read and every write of every stream asks). Loop thread only.
    @inline(__always)
    func noteActivityIfTracked() {
        if originLabel.tracksActivity { noteActivity() }
    }

    /// The loop time (ms) since `noteActivity()` last stamped it. Loop thread only.
    var idleMilliseconds: UInt64 {
        let now = loop.loopTimeMilliseconds
        let last = extrasIfMade?.lastActivity ?? now
        return now > last ? now - last : 0
    }

    /// `idleMilliseconds` for a Unix socket, where bytes that reached the socket but were not read
    /// count as activity too (as the kernel's record does for TCP, `TCPListeningSocket.idleMilliseconds`).
    ///
    /// A reader that is paused, or a server that never reads a connection, reads nothing, so its
    /// stamps alone would call a peer that keeps sending idle. So each check asks the kernel how
    /// many bytes it holds unread (`FIONREAD`): when that changed since the last check and is not
    /// zero, bytes arrived (or were read) meanwhile, and the check stamps its own time. That time is
    /// at most one check period after the bytes came, so the connection is closed no sooner than
    /// the timeout after them. A peer blocked on a full socket moves nothing and is idle, as a TCP
    /// peer facing a zero window is. A method, not a property: it stamps. Loop thread only.
    func idleMillisecondsCountingUnreadBytes() -> UInt64 {
        if let unread = io.unreadByteCount {
            let extras = self.extras
            if unread != extras.unreadAtLastCheck && unread > 0 { noteActivity() }
            extras.unreadAtLastCheck = unread
        }
        return idleMilliseconds
    }
}
