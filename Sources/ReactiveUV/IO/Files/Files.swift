internal import CLibUV
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Reading and writing files through libuv's file requests (`uv_fs_*` on the thread pool).
///
/// Beside `read`, `chunks` and `write`: metadata (`stat`, `lstat`, `access`, `exists`), directories
/// (`createDirectory`, `list`, `removeDirectory`, `remove`, `removeTree`, `makeTemporaryDirectory`), names and
/// links (`rename`, `copy`, `link`, `symbolicLink`, `readLink`, `realPath`) and attributes (`chmod`, `chown`,
/// `lchown`, `setTimes`, `setLinkTimes`, `truncate`); `FileSystem` has each as an `async throws` function.
///
/// Each signal opens the file when a subscriber arrives and closes it when
/// it ends or is disposed. Errors (`ENOENT`, `EACCES`, `EISDIR`, `ENOSPC`...)
/// end the signal with a `UVError` naming the call and the path; so do sizes
/// out of range (`EINVAL`) and files larger than `read`'s `maxSize` (`EFBIG`).
///
/// Files are opened with `O_NONBLOCK`, so opening a FIFO never waits for its
/// other end on a pool thread (libuv's pool has 4 threads for the whole
/// process: file requests, DNS lookups and `ThreadPool.run`). A FIFO opened
/// for reading is then read on the loop (epoll), never on the pool; a FIFO
/// opened for writing with no reader fails at once with `ENXIO`.
///
/// Thread rule: safe from any thread.
public enum Files {
    /// The default `maxSize` of `read(_:maxSize:on:)`: 1 GiB.
    ///
    /// `read` holds the whole file in one array, so the limit is about memory:
    /// above any file a program sensibly loads whole (configurations, assets,
    /// data sets of hundreds of megabytes), below what a mistaken path to an
    /// endless source (`/dev/zero`, a growing log, a FIFO that never closes)
    /// may take from the process before it gets an error. Pass a larger
    /// `maxSize` when you mean it, or stream with `chunks`.
    ///
    /// Thread rule: safe from any thread.
    public static let defaultMaxReadSize = 1 << 30

    /// The largest `chunkSize` of `chunks(_:chunkSize:on:)`: 1 GiB.
    ///
    /// A chunk is one read request into one buffer of that size (libuv's
    /// buffers count in 32 bits, Linux reads at most 2 GiB − 4 KiB at a time).
    ///
    /// Thread rule: safe from any thread.
    public static let maxChunkSize = 1 << 30

    /// Reads the whole file and sends it as one array, then completes.
    ///
    /// The file is read on a pool thread straight into the array sent (its
    /// size is known from `fstat` first), so the loop thread does no work in
    /// proportion to the file. A source of unknown size (a device, a `/proc`
    /// file) is read until it ends. A FIFO is read on the loop without a pool
    /// thread until its last writer closes it; with no writer yet it waits for
    /// one, and disposing stops it. A device that blocks (a terminal with no
    /// input) holds one pool thread until it has data: read those with
    /// `chunks` or a stream instead.
    ///
    /// - Parameters:
    ///   - path: The file; an empty path fails with `ENOENT`, one with a NUL byte with `EINVAL`, before anything
    ///     is opened.
    ///   - maxSize: The most bytes to accept, 0 or more (default `defaultMaxReadSize`, 1 GiB). A larger
    ///     regular file fails with `EFBIG` before anything is read; a source that passes it while
    ///     being read (`/dev/zero`) fails with `EFBIG` as soon as it does. A negative size is `EINVAL`.
    ///   - loop: The loop that runs the requests; nil for the subscription's home loop.
    /// - Returns: A signal of one array.
    ///
    /// Thread rule: safe from any thread.
    public static func read(_ path: String, maxSize: Int = defaultMaxReadSize, on loop: EventLoop? = nil) -> Signal<[UInt8]> {
        read(path, maxSize: maxSize, on: loop, readSize: WholeFileRead.defaultReadSize, afterEachRead: nil)
    }

    /// `read(_:maxSize:on:)` with the bytes per read system call and a test seam told after each one (on the pool thread).
    static func read(_ path: String, maxSize: Int, on loop: EventLoop?, readSize: Int,
                     afterEachRead: (@Sendable (Int) -> Void)?) -> Signal<[UInt8]> {
        operation("read", on: loop, checks: { () throws(UVError) in
            try FileSystemArguments.check(path, in: "Files.read")
            guard maxSize >= 0 else {
                throw UVError(code: UVError.invalidArgumentCode, message: "maxSize must be 0 or more, not \(maxSize)", context: "Files.read \(path)")
            }
        }) { operation in
            WholeFileRead(operation: operation, path: path, maxSize: maxSize, readSize: readSize, afterEachRead: afterEachRead).start()
        }
    }

    /// Streams the file in chunks of at most `chunkSize` bytes, then completes at its end.
    ///
    /// A regular file is read as `OpenFile.chunks` reads it: a few reads ahead
    /// on the pool (at most 3 chunks in flight or waiting), delivered in order,
    /// paused by a consumer that cannot keep up (such as a full `values`
    /// buffer); the file is closed when the signal ends or is disposed (after a
    /// read still on the pool finishes). A FIFO is read on the loop without a
    /// pool thread, through the same stream core as sockets and pipes (chunks
    /// of at most 64 KiB then, as they come, paused the same way); a device is
    /// read one request at a time, and one that blocks holds one pool thread
    /// while it waits for data.
    ///
    /// - Parameters:
    ///   - path: The file (or a FIFO or device: chunks then come as they are read); an empty path fails with
    ///     `ENOENT`, one with a NUL byte with `EINVAL`, before anything is opened.
    ///   - chunkSize: The largest chunk, 1...`maxChunkSize` (default 64 KiB); outside that range the signal fails with `EINVAL`.
    ///   - loop: The loop that runs the requests; nil for the subscription's home loop.
    /// - Returns: A signal of chunks.
    ///
    /// Thread rule: safe from any thread.
    public static func chunks(_ path: String, chunkSize: Int = 65_536, on loop: EventLoop? = nil) -> Signal<[UInt8]> {
        operation("chunks", on: loop, checks: { () throws(UVError) in
            try FileSystemArguments.check(path, in: "Files.chunks")
            guard (1...maxChunkSize).contains(chunkSize) else {
                throw UVError(code: UVError.invalidArgumentCode, message: "chunkSize must be 1...\(maxChunkSize) bytes, not \(chunkSize)",
                              context: "Files.chunks \(path)")
            }
        }) { operation in
            // O_NONBLOCK: opening a FIFO must not wait for its other end on a pool thread.
            operation.request("open \(path)", { uv_fs_open($0, $1, path, O_RDONLY | O_NONBLOCK, 0, $2) },
                              read: { result, _ in Int32(truncatingIfNeeded: result) },
                              discard: { fs in closeNow(Int32(truncatingIfNeeded: fs.pointee.result)) }) { file in
                ChunkReading(operation: operation, path: path, file: file, chunkSize: chunkSize, openedHere: true).examine()
            }
        }
    }

    /// Writes `bytes` to the file, creating it (mode 0644) or replacing its contents, then completes.
    ///
    /// Any size is written: libuv counts a buffer in 32 bits, so the bytes go
    /// out in requests of at most 1 GiB each, one after the other. A FIFO
    /// with no reader fails with `ENXIO` (instead of holding a pool thread
    /// until a reader comes); one with a reader is written on the pool and
    /// holds a pool thread while the pipe is full.
    ///
    /// - Parameters:
    ///   - bytes: The contents.
    ///   - path: The file; an empty path fails with `ENOENT`, one with a NUL byte with `EINVAL`, before
    ///     anything is opened or created.
    ///   - append: Add to the end instead of replacing the contents.
    ///   - loop: The loop that runs the requests; nil for the subscription's home loop.
    /// - Returns: A signal that completes once every byte was written.
    ///
    /// Thread rule: safe from any thread.
    public static func write(_ bytes: [UInt8], to path: String, append: Bool = false, on loop: EventLoop? = nil) -> Signal<Void> {
        write(.array(bytes), to: path, append: append, on: loop)
    }

    /// `write(_:to:append:on:)` for any bytes, with the largest request (tests make it small).
    static func write(_ bytes: WriteBytes, to path: String, append: Bool = false, on loop: EventLoop? = nil,
                      largestRequest: Int = largestWriteRequest) -> Signal<Void> {
        operation("write", on: loop, checks: { () throws(UVError) in try FileSystemArguments.check(path, in: "Files.write") }) { operation in
            let flags = O_WRONLY | O_CREAT | O_NONBLOCK | (append ? O_APPEND : O_TRUNC)
            operation.request("open \(path)", { uv_fs_open($0, $1, path, flags, 0o644, $2) }, read: { result, _ in Int32(truncatingIfNeeded: result) },
                              discard: { fs in closeNow(Int32(truncatingIfNeeded: fs.pointee.result)) }, failed: { error in
                guard error.code == UV_ENXIO.rawValue else { return operation.finish(error) }
                operation.finish(UVError(code: error.code, message: "the FIFO has no reader (it is opened without waiting for one)", context: error.context))
            }) { file in
                operation.onEnd { closeNow(file) }
                // Writes to a FIFO whose reader exists wait for room, as the caller expects.
                setBlocking(file)
                operation.job("write \(path)", { stop in
                    try OpenFile.writeAll(bytes, to: file, at: nil, largestRequest: largestRequest, stop: stop, context: "write \(path)")
                }) { _ in operation.finish() }
            }
        }
    }

    /// The most bytes one write system call is given: Linux writes at most 2 GiB − 4 KiB per call anyway.
    static let largestWriteRequest = 1 << 30
}

/// The bytes of a `Files.write`: the caller's array, or memory the caller keeps alive and unchanged until the
/// signal ends (tests pass sizes no array could hold cheaply).
enum WriteBytes: @unchecked Sendable {
    // An array is a value; `raw` is only read (by libuv on a pool thread) while the caller keeps it alive.
    case array([UInt8])
    case raw(UnsafeRawBufferPointer)

    var count: Int {
        switch self {
        case .array(let bytes): bytes.count
        case .raw(let bytes): bytes.count
        }
    }

    func withBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        switch self {
        case .array(let bytes): try bytes.withUnsafeBytes(body)
        case .raw(let bytes): try body(bytes)
        }
    }
}
