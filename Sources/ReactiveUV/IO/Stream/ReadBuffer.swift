internal import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The buffer every stream on a loop reads into (handed to libuv by `uv_alloc_cb`).
///
/// libuv calls the allocation callback, reads, and calls the read callback
/// before it reads again, and each read callback copies its bytes out before
/// returning; so one buffer per loop serves every connection on it, however
/// many there are (a buffer per connection would cost 64 KiB per idle client).
/// The loop owns it (`EventLoop.readBuffer`, allocated on first use, freed
/// with the loop): two loads from the handle reach it, with no thread-local lookup.
///
/// Thread rule: loop threads only, each on its own loop's buffer.
enum ReadBuffer {
    /// Bytes per read: a chunk is at most this big.
    static let size = 65_536

    /// Copies `count` bytes read into `base` out into an array: the one copy a read chunk costs.
    static func copy(_ base: UnsafeRawPointer?, count: Int) -> [UInt8] {
        guard let base, count > 0 else { return [] }
        // Cheaper than `[UInt8](unsafeUninitializedCapacity:)`, whose allocation path looks the
        // array storage's metadata up on every call.
        return Array(UnsafeBufferPointer(start: base.assumingMemoryBound(to: UInt8.self), count: count))
    }
}

/// Ignores `SIGPIPE` once per process: writing to a reset socket or a closed
/// pipe must become an `EPIPE` error on the write, not kill the process.
let ignoreBrokenPipeSignalOnce: Void = {
    signal(SIGPIPE, SIG_IGN)
}()

extension StreamConnection {
    /// Whether the next read goes into a fresh array handed to the reader (a bulk transfer) or into the
    /// loop's shared buffer, copied out (requests, messages).
    ///
    /// A read that fills half a buffer turns bulk reads on. One shorter read leaves them on for one
    /// more, a second in a row turns them off: a bulk sender's writes reach the reader as full reads
    /// with a shorter tail now and then, and turning bulk reads off at each tail would make the next
    /// full read a copy.
    enum BulkReads: UInt8 {
        case off
        /// The last read was short: the next one is bulk, and turns them off if it is short too.
        case lastChance
        /// The last read filled half a buffer.
        case on

        /// The state after a read of `count` bytes into buffers of `limit`.
        func after(reading count: Int, limit: Int) -> BulkReads {
            if count >= limit / 2 { return .on }
            return self == .on ? .lastChance : .off
        }
    }
}
