internal import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The one buffer every stream on a loop thread reads into (handed to libuv by `uv_alloc_cb`).
///
/// libuv calls the allocation callback, reads, and calls the read callback
/// before it reads again, and each read callback copies its bytes out before
/// returning; so one buffer per thread serves every connection, however many
/// there are (a buffer per connection would cost 64 KiB per idle client).
/// The buffer is freed when its thread ends.
///
/// Thread rule: each thread gets its own buffer; loop threads only use it.
enum ReadBuffer {
    /// Bytes per read: a chunk is at most this big.
    static let size = 65_536

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        let rc = pthread_key_create(&key) { pointer in free(pointer) }
        precondition(rc == 0, "pthread_key_create failed with \(rc): the process is out of thread-local keys")
        return key
    }()

    /// The calling thread's buffer, allocated on first use.
    static var current: UnsafeMutableRawPointer {
        if let buffer = pthread_getspecific(key) { return buffer }
        guard let buffer = malloc(size) else {
            fatalError("ReactiveUV could not allocate its \(size)-byte read buffer: out of memory")
        }
        pthread_setspecific(key, buffer)
        return buffer
    }

    /// Copies `count` bytes read into `base` out into an array: the one copy a read chunk costs.
    static func copy(_ base: UnsafeMutablePointer<CChar>?, count: Int) -> [UInt8] {
        guard let base, count > 0 else { return [] }
        // Half the instructions of `[UInt8](unsafeUninitializedCapacity:)`, whose allocation path
        // looks the array storage's metadata up on every call.
        return Array(UnsafeBufferPointer(start: UnsafeRawPointer(base).assumingMemoryBound(to: UInt8.self), count: count))
    }
}

/// The allocation callback of every ReactiveUV stream: the thread's read buffer.
let readBufferAllocate: uv_alloc_cb = { _, _, buffer in
    guard let buffer else { return }
    buffer.pointee = uv_buf_init(ReadBuffer.current.assumingMemoryBound(to: CChar.self), UInt32(ReadBuffer.size))
}

/// libuv's `UV_EOF` as an `Int` (read callbacks report it through `nread`).
let endOfFileCode = Int(UV_EOF.rawValue)

/// Ignores `SIGPIPE` once per process: writing to a reset socket or a closed
/// pipe must become an `EPIPE` error on the write, not kill the process.
let ignoreBrokenPipeSignalOnce: Void = {
    signal(SIGPIPE, SIG_IGN)
}()
