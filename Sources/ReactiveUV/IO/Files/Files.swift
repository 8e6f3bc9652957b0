internal import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Files through libuv's file requests (`uv_fs_*` on the thread pool): reading, writing, metadata, directories,
/// names and links, attributes; `FileSystem` has each as an `async throws` function.
///
/// Each signal does its work when a subscriber arrives, on `loop` (nil: the subscription's home loop), and closes
/// what it opened when it ends or is disposed. Errors end it with a `UVError` naming the call and the path; an
/// empty path fails with `ENOENT` and one with a NUL byte with `EINVAL`, before any request. Files are opened with
/// `O_NONBLOCK`, so opening a FIFO never holds a pool thread waiting for its other end.
///
/// Thread rule: safe from any thread.
public enum Files {
    /// The default `maxSize` of `read(_:maxSize:on:)`: 1 GiB, so a mistaken path to an endless source
    /// (`/dev/zero`, a FIFO that never closes) fails before it takes the memory. Thread rule: safe from any thread.
    public static let defaultMaxReadSize = 1 << 30

    /// The largest `chunkSize` of `chunks(_:chunkSize:on:)`: 1 GiB (one read into one buffer; libuv counts a
    /// buffer in 32 bits). Thread rule: safe from any thread.
    public static let maxChunkSize = 1 << 30

    /// Reads the whole file and sends it as one array, then completes: a regular file on a pool thread straight into
    /// the array sent, a source of unknown size until it ends, a FIFO on the loop until its last writer closes it (a
    /// device that blocks holds a pool thread: read those with `chunks`). A file larger than `maxSize` (default 1 GiB),
    /// or a source that passes it, fails with `EFBIG`; a negative `maxSize` with `EINVAL`. Thread rule: safe from any thread.
    public static func read(_ path: String, maxSize: Int = defaultMaxReadSize, on loop: EventLoop? = nil) -> Signal<[UInt8]> {
        read(path, maxSize: maxSize, on: loop, readSize: WholeFileRead.defaultReadSize, afterEachRead: nil)
    }

    /// `read(_:maxSize:on:)` with the bytes per read system call and a test seam told after each one (on the pool thread).
    static func read(_ path: String, maxSize: Int, on loop: EventLoop?, readSize: Int,
                     afterEachRead: (@Sendable (Int) -> Void)?) -> Signal<[UInt8]> {
        operation("read", on: loop, checks: { () throws(UVError) in
            try FileSystemArguments.check(path, in: "Files.read")
            try FileSystemArguments.require(maxSize >= 0, "maxSize must be 0 or more, not \(maxSize)", context: "Files.read \(path)")
        }, simulated: { operation in
            operation.simulate("read \(path)") { files throws(UVError) in try files.read(path, maxSize: maxSize, context: "read \(path)") }
        }) { operation in
            WholeFileRead(operation: operation, path: path, maxSize: maxSize, readSize: readSize, afterEachRead: afterEachRead).start()
        }
    }

    /// Streams the file in chunks of at most `chunkSize` bytes (1...`maxChunkSize`, else `EINVAL`), then completes at
    /// its end: a regular file as `OpenFile.chunks` reads it (a few reads ahead, in order, paused by a slow consumer),
    /// a FIFO on the loop as a stream, a device one read at a time. Thread rule: safe from any thread.
    public static func chunks(_ path: String, chunkSize: Int = 65_536, on loop: EventLoop? = nil) -> Signal<[UInt8]> {
        operation("chunks", on: loop, checks: { () throws(UVError) in
            try FileSystemArguments.check(path, in: "Files.chunks")
            try FileSystemArguments.require((1...maxChunkSize).contains(chunkSize), "chunkSize must be 1...\(maxChunkSize) bytes, not \(chunkSize)",
                                            context: "Files.chunks \(path)")
        }, simulated: { operation in
            operation.simulateAll("read \(path)") { files throws(UVError) in
                let bytes = try files.read(path, maxSize: .max, context: "read \(path)")
                return stride(from: 0, to: bytes.count, by: chunkSize).map { Array(bytes[$0..<min($0 + chunkSize, bytes.count)]) }
            }
        }) { operation in
            operation.open(path, flags: O_RDONLY | O_NONBLOCK) { file in
                ChunkReading(operation: operation, path: path, file: file, chunkSize: chunkSize, openedHere: true).examine()
            }
        }
    }

    /// Writes `bytes` to the file, creating it (mode 0644) or replacing its contents (adding to them with `append`),
    /// in requests of at most 1 GiB, then completes. A FIFO with no reader fails with `ENXIO`; one with a reader holds
    /// a pool thread while the pipe is full. Thread rule: safe from any thread.
    public static func write(_ bytes: [UInt8], to path: String, append: Bool = false, on loop: EventLoop? = nil) -> Signal<Void> {
        write(.array(bytes), to: path, append: append, on: loop)
    }

    /// `write(_:to:append:on:)` for any bytes, with the largest request (tests make it small).
    static func write(_ bytes: WriteBytes, to path: String, append: Bool = false, on loop: EventLoop? = nil,
                      largestRequest: Int = largestWriteRequest) -> Signal<Void> {
        operation("write", on: loop, checks: { () throws(UVError) in try FileSystemArguments.check(path, in: "Files.write") }, simulated: { operation in
            operation.simulate("write \(path)") { files throws(UVError) in
                try files.write(bytes.withBytes { Array($0) }, to: path, append: append, mode: 0o644, context: "write \(path)")
                return nil
            }
        }) { operation in
            let flags = O_WRONLY | O_CREAT | O_NONBLOCK | (append ? O_APPEND : O_TRUNC)
            operation.open(path, flags: flags, mode: 0o644, failed: { error in
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

    /// The most bytes one write call is given (Linux writes at most 2 GiB − 4 KiB per call).
    static let largestWriteRequest = 1 << 30
}

/// The bytes of a `Files.write`: the caller's array, or memory the caller keeps alive until the signal ends (tests).
enum WriteBytes: @unchecked Sendable {
    // An array is a value; `raw` is only read (by libuv on a pool thread) while the caller keeps it alive.
    case array([UInt8])
    case raw(UnsafeRawBufferPointer)

    func withBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        switch self {
        case .array(let bytes): try bytes.withUnsafeBytes(body)
        case .raw(let bytes): try body(bytes)
        }
    }
}

extension FileSystemArguments {
    /// Refuses with `EINVAL` and `message` unless `condition` holds.
    static func require(_ condition: Bool, _ message: @autoclosure () -> String, context: @autoclosure () -> String) throws(UVError) {
        guard condition else { throw UVError(code: UVError.invalidArgumentCode, message: message(), context: context()) }
    }
}
