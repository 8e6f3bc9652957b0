/// The async forms of an `OpenFile`'s operations and of `StreamConnection.sendFile`: the file first (see `FileSystem`).
extension FileSystem {
    /// The async form of ``OpenFile/read(at:count:)``. Thread rule: safe from any task.
    public static func read(_ file: OpenFile, at offset: Int, count: Int) async throws -> [UInt8] {
        try await value("read \(file.path)", on: file.loop) { _ in file.read(at: offset, count: count) }
    }

    /// ``OpenFile/chunks(from:chunkSize:)`` as an `AsyncSequence`; cancelling the task or leaving the loop stops
    /// the reads, and the file stays open. Thread rule: safe from any task; iterate from one task.
    public static func chunks(_ file: OpenFile, from offset: Int = 0, chunkSize: Int = 65_536) -> SignalValues<[UInt8]> {
        file.chunks(from: offset, chunkSize: chunkSize).values
    }

    /// The async form of ``OpenFile/write(_:at:)``: the count written. Cancelling the task stops a long write
    /// between two requests. Thread rule: safe from any task.
    @discardableResult
    public static func write(_ bytes: [UInt8], to file: OpenFile, at offset: Int) async throws -> Int {
        try await value("write \(file.path)", on: file.loop) { _ in file.write(bytes, at: offset) }
    }

    /// The async form of ``OpenFile/append(_:)``: the count written. Thread rule: safe from any task.
    @discardableResult
    public static func append(_ bytes: [UInt8], to file: OpenFile) async throws -> Int {
        try await value("append \(file.path)", on: file.loop) { _ in file.append(bytes) }
    }

    /// The async form of ``OpenFile/stat()``. Thread rule: safe from any task.
    public static func stat(_ file: OpenFile) async throws -> FileInfo {
        try await value("fstat \(file.path)", on: file.loop) { _ in file.stat() }
    }

    /// The async form of ``OpenFile/size()``. Thread rule: safe from any task.
    public static func size(_ file: OpenFile) async throws -> UInt64 {
        try await value("fstat \(file.path)", on: file.loop) { _ in file.size() }
    }

    /// The async form of ``OpenFile/sync()``. Thread rule: safe from any task.
    public static func sync(_ file: OpenFile) async throws {
        _ = try await run(on: file.loop) { _ in file.sync() }
    }

    /// The async form of ``OpenFile/dataSync()``. Thread rule: safe from any task.
    public static func dataSync(_ file: OpenFile) async throws {
        _ = try await run(on: file.loop) { _ in file.dataSync() }
    }

    /// The async form of ``OpenFile/truncate(to:)``. Thread rule: safe from any task.
    public static func truncate(_ file: OpenFile, to size: Int) async throws {
        _ = try await run(on: file.loop) { _ in file.truncate(to: size) }
    }

    /// The async form of ``OpenFile/close()``; optional inside `withOpenFile`, which closes the file at its end.
    /// Thread rule: safe from any task.
    public static func close(_ file: OpenFile) async throws {
        _ = try await run(on: file.loop) { _ in file.close() }
    }

    /// The async form of ``StreamConnection/sendFile(_:offset:count:)``: the count sent. The transfer starts when
    /// the bridge subscribes; once started, cancelling the task ends the wait (`CancellationError`), not the
    /// transfer (close the connection to stop it). Thread rule: safe from any task.
    @discardableResult
    public static func sendFile(_ file: OpenFile, to connection: StreamConnection, offset: Int = 0, count: Int? = nil) async throws -> Int {
        // The signal form starts the transfer when called: deferred, a task cancelled before subscribing sends nothing.
        try await value("sendfile \(file.path)", on: connection.loop) { _ in
            Signal.defer { connection.sendFile(file, offset: offset, count: count) }
        }
    }
}
