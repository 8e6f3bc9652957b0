/// A stream's small states in one 32-bit word: thirteen flags (the backend's and the TLS lane's
/// among them), where its reading stands and whether reads
/// go into bulk arrays. Packed, so an idle server's connections (one per client) stay in a smaller
/// malloc block than thirteen one-byte fields would take.
///
/// Thread rule: loop thread only (a field of its stream).
struct StreamStateBits {
    /// Where a stream's reading stands.
    enum Input: UInt32 {
        case idle = 0   // nobody reads
        case reading    // uv_read_start is active
        case paused     // a reader is there, but reading is paused (write backpressure or the consumer asked)
        case ended      // EOF was read: nothing more will come
    }

    private var raw: UInt32 = 0

    private static let coalescingBit: UInt32 = 1 << 0
    private static let writeBackpressureBit: UInt32 = 1 << 1
    private static let consumerPausedBit: UInt32 = 1 << 2
    private static let readerIsHomeBit: UInt32 = 1 << 3
    private static let writesShutDownBit: UInt32 = 1 << 4
    private static let shutdownPendingBit: UInt32 = 1 << 5
    private static let closesWhenFlushedBit: UInt32 = 1 << 6
    private static let peerEndedBit: UInt32 = 1 << 7
    private static let inputShift: UInt32 = 8
    private static let bulkReadsShift: UInt32 = 10
    private static let batchesSendsBit: UInt32 = 1 << 12
    private static let busyBit: UInt32 = 1 << 13
    private static let closesWhenIdleBit: UInt32 = 1 << 14
    private static let simulatedBit: UInt32 = 1 << 15
    private static let tlsBit: UInt32 = 1 << 16
    private static let twoBits: UInt32 = 0b11

    private func flag(_ bit: UInt32) -> Bool { raw & bit != 0 }

    private mutating func set(_ bit: UInt32, _ on: Bool) {
        raw = on ? raw | bit : raw & ~bit
    }

    /// Small writes are being gathered into a batch not yet handed to libuv (`StreamCore+Coalescing.swift`).
    var coalescing: Bool { get { flag(Self.coalescingBit) } set { set(Self.coalescingBit, newValue) } }
    /// A `send` without completion is queued as a request (written at once when nothing is
    /// pending, as `uv_try_write` would), so that those made before its callback are gathered
    /// into one batch: set for a writer of many small pieces (`StandardWriter`).
    var batchesSends: Bool { get { flag(Self.batchesSendsBit) } set { set(Self.batchesSendsBit, newValue) } }
    /// The write queue passed the high-water mark and has not drained to the low-water mark yet.
    var writeBackpressure: Bool { get { flag(Self.writeBackpressureBit) } set { set(Self.writeBackpressureBit, newValue) } }
    /// The reader's consumer asked to pause.
    var consumerPaused: Bool { get { flag(Self.consumerPausedBit) } set { set(Self.consumerPausedBit, newValue) } }
    /// The reader's home is the stream's loop.
    var readerIsHome: Bool { get { flag(Self.readerIsHomeBit) } set { set(Self.readerIsHomeBit, newValue) } }
    /// Writes were shut down (FIN asked for).
    var writesShutDown: Bool { get { flag(Self.writesShutDownBit) } set { set(Self.writesShutDownBit, newValue) } }
    /// A `uv_shutdown` is in flight.
    var shutdownPending: Bool { get { flag(Self.shutdownPendingBit) } set { set(Self.shutdownPendingBit, newValue) } }
    /// `close()` was called: the stream closes once the queued writes are flushed.
    var closesWhenFlushed: Bool { get { flag(Self.closesWhenFlushedBit) } set { set(Self.closesWhenFlushedBit, newValue) } }
    /// The peer's EOF was read.
    var peerEnded: Bool { get { flag(Self.peerEndedBit) } set { set(Self.peerEndedBit, newValue) } }

    /// A byte was read or a write queued since the handler last called `markIdle()` (clear when
    /// accepted): a drain that closes idle connections leaves it open (ConnectionDrain.swift).
    var busy: Bool { get { flag(Self.busyBit) } set { set(Self.busyBit, newValue) } }
    /// A drain that closes idle connections has reached this one: `markIdle()` closes it.
    var closesWhenIdle: Bool { get { flag(Self.closesWhenIdleBit) } set { set(Self.closesWhenIdleBit, newValue) } }

    /// Whether a send may try writing at once (`uv_try_write`): not while gathering a batch or
    /// batching sends, nor on a simulated stream (its writes all go as requests). One test of three bits.
    var mayTryWrite: Bool { raw & (Self.coalescingBit | Self.batchesSendsBit | Self.simulatedBit) == 0 }

    /// The stream runs over a simulated end (`SimulatedStreamEnd`), not a libuv handle: set once,
    /// when it opens, and read by `StreamIO` on each call to the backend.
    var simulated: Bool { get { flag(Self.simulatedBit) } set { set(Self.simulatedBit, newValue) } }

    /// Bytes go through a TLS session (`StreamConnection+TLS.swift`): the lane is chosen once, when
    /// the handshake starts; a plain send tests it with `writesShutDown`, and a read start once.
    var tls: Bool { get { flag(Self.tlsBit) } set { set(Self.tlsBit, newValue) } }

    /// Open for writing and not in the TLS lane: the send path's one test for both.
    var writableInPlainLane: Bool { raw & (Self.writesShutDownBit | Self.tlsBit) == 0 }

    /// Where reading stands (two bits: every value is a case).
    var input: Input {
        get { Input(rawValue: raw >> Self.inputShift & Self.twoBits) ?? .idle }
        set { raw = raw & ~(Self.twoBits << Self.inputShift) | newValue.rawValue << Self.inputShift }
    }

    /// Whether reads go into bulk arrays (two bits: `BulkReads` has three cases).
    var bulkReads: StreamConnection.BulkReads {
        get { StreamConnection.BulkReads(rawValue: UInt8(truncatingIfNeeded: raw >> Self.bulkReadsShift & Self.twoBits)) ?? .off }
        set { raw = raw & ~(Self.twoBits << Self.bulkReadsShift) | UInt32(newValue.rawValue) << Self.bulkReadsShift }
    }
}
