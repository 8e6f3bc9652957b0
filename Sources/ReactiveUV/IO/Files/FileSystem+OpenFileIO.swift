/// The `async throws` forms of an `OpenFile`'s operations and of `StreamConnection.sendFile`.
///
/// Each takes the file (or the connection) as an argument rather than being an `async` method beside
/// the signal of the same name: `file.read(at:count:) -> Signal<[UInt8]>` beside an async
/// `file.read(at:count:) -> [UInt8]` would be chosen by context alone, and a call in an async function
/// would silently mean the other one (see `FileSystem`). Each goes through `FileSystem`'s one bridge
/// (`run`/`value`), or, for `chunks`, returns the signal's `values` as `list` does. The requests run
/// on the file's loop; the call awaits from any task, and cancelling the task disposes the signal.
extension FileSystem {
    /// `OpenFile.read(at:count:)`: up to `count` bytes at `offset`.
    ///
    /// Fewer bytes come only at the end of the file; none (an empty array) at or after it.
    ///
    /// - Parameters:
    ///   - file: The open file.
    ///   - offset: Where to read, 0 or more; a negative offset throws `EINVAL`.
    ///   - count: The most bytes, 0...`OpenFile.maxReadCount`; others throw `EINVAL`.
    /// - Returns: The bytes read.
    /// - Throws: `UVError` naming the path: `EBADF` after a close (naming who closed it) or for a file opened
    ///   `.write`, `EINVAL` for a bad offset or count.
    ///
    /// Thread rule: safe from any task.
    public static func read(_ file: OpenFile, at offset: Int, count: Int) async throws -> [UInt8] {
        try await value("read \(file.path)", on: file.loop) { _ in file.read(at: offset, count: count) }
    }

    /// `OpenFile.chunks(from:chunkSize:)` as an `AsyncSequence` of chunks, from `offset` to the end of the
    /// file, in order; a slow loop body pauses the reading (the reads ahead wait for it).
    ///
    /// Cancelling the iterating task ends the iteration (`next()` returns nil) and disposes the signal,
    /// as leaving the loop early does: the reads in flight are dropped and no new one starts. The file
    /// stays open (it belongs to whoever opened it).
    ///
    /// - Parameters:
    ///   - file: The open file.
    ///   - offset: Where to start, 0 or more (default 0); a negative offset throws `EINVAL`.
    ///   - chunkSize: The largest chunk, 1...`OpenFile.maxReadCount` (default 64 KiB); others throw `EINVAL`.
    /// - Returns: The chunks; iterating throws the read's `UVError` (`EBADF` after a close...) naming the path.
    ///
    /// Thread rule: safe from any task; iterate from one task.
    public static func chunks(_ file: OpenFile, from offset: Int = 0, chunkSize: Int = 65_536) -> SignalValues<[UInt8]> {
        file.chunks(from: offset, chunkSize: chunkSize).values
    }

    /// `OpenFile.write(_:at:)`: writes all of `bytes` at `offset`.
    ///
    /// Writing past the end extends the file (the gap reads as zeros). Cancelling the task stops a long
    /// write between two of its requests of at most 1 GiB (the file then holds part of the bytes).
    ///
    /// - Parameters:
    ///   - bytes: The bytes.
    ///   - file: The open file.
    ///   - offset: Where to write, 0 or more; a negative offset throws `EINVAL`.
    /// - Returns: How many bytes were written: `bytes.count`.
    /// - Throws: `UVError` naming the path: `EBADF` after a close or for a file opened `.read`, `ENOSPC`,
    ///   `EINVAL` for a negative offset.
    ///
    /// Thread rule: safe from any task.
    @discardableResult
    public static func write(_ bytes: [UInt8], to file: OpenFile, at offset: Int) async throws -> Int {
        try await value("write \(file.path)", on: file.loop) { _ in file.write(bytes, at: offset) }
    }

    /// `OpenFile.append(_:)`: writes all of `bytes` at the end of the file (as it is when the append starts;
    /// appends through one `OpenFile` run one after another).
    ///
    /// - Parameters:
    ///   - bytes: The bytes.
    ///   - file: The open file.
    /// - Returns: How many bytes were written: `bytes.count`.
    /// - Throws: `UVError` naming the path: `EBADF` after a close or for a file opened `.read`, `ENOSPC`.
    ///
    /// Thread rule: safe from any task.
    @discardableResult
    public static func append(_ bytes: [UInt8], to file: OpenFile) async throws -> Int {
        try await value("append \(file.path)", on: file.loop) { _ in file.append(bytes) }
    }

    /// `OpenFile.stat()`: what `fstat` says about the open file.
    ///
    /// - Parameter file: The open file.
    /// - Returns: The file's information.
    /// - Throws: `UVError` naming the path (`EBADF` after a close).
    ///
    /// Thread rule: safe from any task.
    public static func stat(_ file: OpenFile) async throws -> FileInfo {
        try await value("fstat \(file.path)", on: file.loop) { _ in file.stat() }
    }

    /// `OpenFile.size()`: the open file's size in bytes (`fstat`).
    ///
    /// - Parameter file: The open file.
    /// - Returns: The size.
    /// - Throws: `UVError` naming the path (`EBADF` after a close).
    ///
    /// Thread rule: safe from any task.
    public static func size(_ file: OpenFile) async throws -> UInt64 {
        try await value("fstat \(file.path)", on: file.loop) { _ in file.size() }
    }

    /// `OpenFile.sync()`: flushes the file's data and metadata to the device (`fsync`).
    ///
    /// - Parameter file: The open file.
    /// - Throws: `UVError` naming the path (`EBADF` after a close, `EIO`).
    ///
    /// Thread rule: safe from any task.
    public static func sync(_ file: OpenFile) async throws {
        _ = try await run(on: file.loop) { _ in file.sync() }
    }

    /// `OpenFile.dataSync()`: flushes the file's data, and only the metadata needed to read it back (`fdatasync`).
    ///
    /// - Parameter file: The open file.
    /// - Throws: `UVError` naming the path (`EBADF` after a close, `EIO`).
    ///
    /// Thread rule: safe from any task.
    public static func dataSync(_ file: OpenFile) async throws {
        _ = try await run(on: file.loop) { _ in file.dataSync() }
    }

    /// `OpenFile.truncate(to:)`: cuts the file to `size` bytes, or extends it with zeros (`ftruncate`).
    ///
    /// - Parameters:
    ///   - file: The open file.
    ///   - size: The new size, 0 or more; a negative size throws `EINVAL`.
    /// - Throws: `UVError` naming the path: `EBADF` after a close or for a file opened `.read`, `EINVAL`.
    ///
    /// Thread rule: safe from any task.
    public static func truncate(_ file: OpenFile, to size: Int) async throws {
        _ = try await run(on: file.loop) { _ in file.truncate(to: size) }
    }

    /// `OpenFile.close()`: closes the file, after the operations running on the pool (queued ones fail with
    /// `EBADF`). Inside `withOpenFile` this is optional: the scope closes the file when its body ends.
    ///
    /// - Parameter file: The open file.
    /// - Throws: `UVError` naming the path: the close's error (`EIO`), or `EBADF` for a file already closed
    ///   (by `close()`, a dispose or its loop's shutdown).
    ///
    /// Thread rule: safe from any task.
    public static func close(_ file: OpenFile) async throws {
        _ = try await run(on: file.loop) { _ in file.close() }
    }

    /// `StreamConnection.sendFile(_:offset:count:)`: sends `count` bytes of `file` from `offset` to the peer,
    /// zero-copy (`sendfile(2)`), in its place among the connection's writes.
    ///
    /// The signal sends one value, the count sent, when the transfer has ended; that is what this returns.
    /// It is `count` (the file's size from `offset` when `count` is nil), or fewer when the file is shorter
    /// than `offset + count`. The signal form starts the transfer when it is called; this form starts it
    /// when the bridge subscribes, so a task already cancelled when it calls this sends nothing. Once
    /// started, the transfer keeps its place among the connection's writes and runs to its end:
    /// cancelling the task ends the wait (it throws `CancellationError`), not the transfer. To stop the
    /// transfer, close the connection (`reset()`).
    ///
    /// - Parameters:
    ///   - file: An open regular file on the connection's loop.
    ///   - connection: The TCP or Unix connection.
    ///   - offset: Where to start in the file, 0 or more (default 0).
    ///   - count: How many bytes; nil (default) for all of them up to the end of the file.
    /// - Returns: The number of bytes sent.
    /// - Throws: `UVError` naming the file and the peer: `EINVAL` (a negative offset or count, a file on another
    ///   loop, a /proc file), `EBADF` (a closed file), `EPIPE` (after `close()`/`shutdown()`), `ECONNRESET`/`EPIPE`
    ///   (the peer went away mid-file), `ECANCELED` (the connection was closed here first);
    ///   `EventLoopError.shutDown`; `CancellationError`.
    ///
    /// Thread rule: safe from any task.
    @discardableResult
    public static func sendFile(_ file: OpenFile, to connection: StreamConnection, offset: Int = 0, count: Int? = nil) async throws -> Int {
        // `sendFile` starts the transfer when it is called: deferred to the subscription, a task cancelled
        // before the bridge subscribes starts nothing.
        try await value("sendfile \(file.path)", on: connection.loop) { _ in
            Signal.defer { connection.sendFile(file, offset: offset, count: count) }
        }
    }
}
