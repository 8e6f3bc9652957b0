internal import CLibUV

/// The file-system calls of `Files` as `async throws` functions: `try await FileSystem.stat(path)`;
/// also the operations of an `OpenFile` (`try await FileSystem.read(file, at: 0, count: 512)`) and
/// `StreamConnection.sendFile` (`try await FileSystem.sendFile(file, to: connection)`).
///
/// Each is a thin wrapper over the signal of the same name (in `Files`, `OpenFile` or
/// `StreamConnection`), through one bridge: the signal runs on `loop` (default: the
/// calling loop thread's loop, else `EventLoop.shared`; an open file's operations run on
/// the file's loop) and the function returns its one value, or throws its error (a
/// `UVError` naming the call and the path). Cancelling the task disposes the signal,
/// which cancels a request libuv has not started. The streamed forms (`list`, `chunks`)
/// return the signal's `values`, an `AsyncSequence`.
///
/// The async forms live in their own namespace rather than beside the signals:
/// Swift would otherwise pick between `Files.stat(_:) -> Signal<FileInfo>` and
/// an `async` overload by context alone, and a call in an async function
/// would silently mean the other one. For the same reason an open file's
/// operations are not `async` methods of `OpenFile` beside its signals: they are
/// functions here that take the file first (`FileSystem.stat(file)` beside
/// `FileSystem.stat(path)`: the argument's type, never the context, picks one).
///
/// Requests run on libuv's thread pool (4 threads by default, shared by the
/// whole process with DNS lookups and `ThreadPool.run`).
///
/// Thread rule: safe from any task.
public enum FileSystem {
    /// The loop an async call runs on, chosen in this one place: `loop` if given, else the calling loop
    /// thread's loop, else `EventLoop.shared`.
    static func loop(for loop: EventLoop?) -> EventLoop {
        loop ?? EventLoop.current ?? EventLoop.shared
    }

    /// The one bridge: builds the signal for the loop the call runs on and awaits its end.
    ///
    /// Every `async throws` form of `FileSystem` goes through it (or through `value`), here and in
    /// `FileSystem+OpenFileIO.swift`; the streamed forms (`list`, `chunks`) are the signal's `values`.
    ///
    /// - Returns: The signal's last value (nil for the signals that only complete).
    static func run<Value: Sendable>(on loop: EventLoop?, _ make: (EventLoop) -> Signal<Value>) async throws -> Value? {
        try await make(self.loop(for: loop)).last()
    }

    /// `run` for the signals that send exactly one value. `call` names it in the error for a signal that
    /// completed without its value, and is built only then (most name the path: a string per call otherwise).
    static func value<Value: Sendable>(_ call: @autoclosure () -> String, on loop: EventLoop?,
                                       _ make: (EventLoop) -> Signal<Value>) async throws -> Value {
        guard let value = try await run(on: loop, make) else {
            throw UVError(code: UV_EIO.rawValue, message: "the signal completed without its value", context: call())
        }
        return value
    }

    /// `Files.read`: the whole file, as one array.
    ///
    /// - Parameters:
    ///   - path: The file; an empty path throws `ENOENT`, one with a NUL byte `EINVAL`, before anything is opened.
    ///   - maxSize: The most bytes to accept, 0 or more (default `Files.defaultMaxReadSize`, 1 GiB); a larger file
    ///     throws `EFBIG`, a negative size `EINVAL`.
    ///   - loop: The loop that runs the requests; nil for the calling loop thread's, else `EventLoop.shared`.
    /// - Returns: The file's contents.
    /// - Throws: `UVError` (`ENOENT`, `EACCES`, `EISDIR`, `EFBIG`...) naming the path.
    ///
    /// Thread rule: safe from any task.
    public static func read(_ path: String, maxSize: Int = Files.defaultMaxReadSize, on loop: EventLoop? = nil) async throws -> [UInt8] {
        try await value("Files.read \(path)", on: loop) { Files.read(path, maxSize: maxSize, on: $0) }
    }

    /// `Files.chunks` as an `AsyncSequence` of chunks, in order; a slow loop body pauses the reading.
    ///
    /// Cancelling the iterating task, or leaving the loop early, disposes the signal: the reads stop
    /// and the file is closed (after a read still on the pool finishes).
    ///
    /// - Parameters:
    ///   - path: The file (or a FIFO or device); an empty path throws `ENOENT`, one with a NUL byte `EINVAL`.
    ///   - chunkSize: The largest chunk, 1...`Files.maxChunkSize` (default 64 KiB); others throw `EINVAL`.
    ///   - loop: The loop that runs the requests; nil for the calling loop thread's, else `EventLoop.shared`.
    /// - Returns: The chunks; iterating throws the read's `UVError` (`ENOENT`, `EACCES`...) naming the path.
    ///
    /// Thread rule: safe from any task.
    public static func chunks(_ path: String, chunkSize: Int = 65_536, on loop: EventLoop? = nil) -> SignalValues<[UInt8]> {
        Files.chunks(path, chunkSize: chunkSize, on: self.loop(for: loop)).values
    }

    /// `Files.write`: writes `bytes` to the file, creating it (mode 0644) or replacing its contents.
    ///
    /// - Parameters:
    ///   - bytes: The contents.
    ///   - path: The file; an empty path throws `ENOENT`, one with a NUL byte `EINVAL`, before anything is created.
    ///   - append: Add to the end instead of replacing the contents.
    ///   - loop: The loop that runs the requests; nil for the calling loop thread's, else `EventLoop.shared`.
    /// - Throws: `UVError` (`ENOENT` below a missing directory, `EACCES`, `ENXIO` for a FIFO with no reader...)
    ///   naming the path.
    ///
    /// Thread rule: safe from any task.
    public static func write(_ bytes: [UInt8], to path: String, append: Bool = false, on loop: EventLoop? = nil) async throws {
        _ = try await run(on: loop) { Files.write(bytes, to: path, append: append, on: $0) }
    }

    /// `Files.stat`: everything `stat` says about `path`, following symbolic links.
    ///
    /// - Parameters:
    ///   - path: The file.
    ///   - loop: The loop that runs the request; nil for the calling loop thread's, else `EventLoop.shared`.
    /// - Returns: The file's information.
    /// - Throws: `UVError` (`ENOENT`, `EACCES`...) naming the path.
    ///
    /// Thread rule: safe from any task.
    public static func stat(_ path: String, on loop: EventLoop? = nil) async throws -> FileInfo {
        try await value("stat", on: loop) { Files.stat(path, on: $0) }
    }

    /// `Files.lstat`: `stat` of a symbolic link itself.
    ///
    /// - Parameters:
    ///   - path: The file or link.
    ///   - loop: The loop that runs the request; nil for the calling loop thread's, else `EventLoop.shared`.
    /// - Returns: The file's information.
    /// - Throws: `UVError` naming the path.
    ///
    /// Thread rule: safe from any task.
    public static func lstat(_ path: String, on loop: EventLoop? = nil) async throws -> FileInfo {
        try await value("lstat", on: loop) { Files.lstat(path, on: $0) }
    }

    /// `Files.access`: returns if the process may access `path` as `mode` says.
    ///
    /// - Parameters:
    ///   - path: The file.
    ///   - mode: `.read`, `.write`, `.execute`, together, or `.exists`.
    ///   - loop: The loop that runs the request; nil for the calling loop thread's, else `EventLoop.shared`.
    /// - Throws: `UVError` (`EACCES`, `ENOENT`...) naming the path.
    ///
    /// Thread rule: safe from any task.
    public static func access(_ path: String, _ mode: FileAccess, on loop: EventLoop? = nil) async throws {
        _ = try await run(on: loop) { Files.access(path, mode, on: $0) }
    }

    /// `Files.exists`: whether something exists at `path` (`ENOENT` is false).
    ///
    /// - Parameters:
    ///   - path: The path.
    ///   - loop: The loop that runs the request; nil for the calling loop thread's, else `EventLoop.shared`.
    /// - Returns: Whether it exists.
    /// - Throws: `UVError` for any error but `ENOENT`.
    ///
    /// Thread rule: safe from any task.
    public static func exists(_ path: String, on loop: EventLoop? = nil) async throws -> Bool {
        try await value("exists", on: loop) { Files.exists(path, on: $0) }
    }

    /// `Files.createDirectory`: creates a directory (with its parents, like `mkdir -p`, when asked).
    ///
    /// - Parameters:
    ///   - path: The directory.
    ///   - mode: Its permissions (0...0o7777).
    ///   - withParents: Create missing parents; an existing directory is fine.
    ///   - loop: The loop that runs the requests; nil for the calling loop thread's, else `EventLoop.shared`.
    /// - Throws: `UVError` (`EEXIST`, `ENOENT`, `ENOTDIR`...) naming the path.
    ///
    /// Thread rule: safe from any task.
    public static func createDirectory(_ path: String, mode: UInt32 = 0o755, withParents: Bool = false,
                                       on loop: EventLoop? = nil) async throws {
        _ = try await run(on: loop) { Files.createDirectory(path, mode: mode, withParents: withParents, on: $0) }
    }

    /// `Files.list` as an `AsyncSequence` of entries, streamed in batches; a slow loop body pauses the reading.
    ///
    /// - Parameters:
    ///   - path: The directory.
    ///   - loop: The loop that runs the requests; nil for the calling loop thread's, else `EventLoop.shared`.
    /// - Returns: The entries; iterating throws the listing's `UVError`.
    ///
    /// Thread rule: safe from any task.
    public static func list(_ path: String, on loop: EventLoop? = nil) -> SignalValues<DirectoryEntry> {
        Files.list(path, on: self.loop(for: loop)).values
    }

    /// `Files.removeDirectory`: removes an empty directory.
    ///
    /// - Parameters:
    ///   - path: The directory.
    ///   - loop: The loop that runs the request; nil for the calling loop thread's, else `EventLoop.shared`.
    /// - Throws: `UVError` (`ENOTEMPTY`, `ENOENT`...) naming the path.
    ///
    /// Thread rule: safe from any task.
    public static func removeDirectory(_ path: String, on loop: EventLoop? = nil) async throws {
        _ = try await run(on: loop) { Files.removeDirectory(path, on: $0) }
    }

    /// `Files.remove`: unlinks a file or link.
    ///
    /// - Parameters:
    ///   - path: The file.
    ///   - loop: The loop that runs the request; nil for the calling loop thread's, else `EventLoop.shared`.
    /// - Throws: `UVError` naming the path.
    ///
    /// Thread rule: safe from any task.
    public static func remove(_ path: String, on loop: EventLoop? = nil) async throws {
        _ = try await run(on: loop) { Files.remove(path, on: $0) }
    }

    /// `Files.removeTree`: removes a whole tree, never following symbolic links; refuses (`EINVAL`) the root
    /// directory and a path ending in `.` or `..`, as `rm -r` does.
    ///
    /// - Parameters:
    ///   - path: The file or directory.
    ///   - loop: The loop that runs the requests; nil for the calling loop thread's, else `EventLoop.shared`.
    /// - Throws: `UVError` naming the path that could not be removed.
    ///
    /// Thread rule: safe from any task.
    public static func removeTree(_ path: String, on loop: EventLoop? = nil) async throws {
        _ = try await run(on: loop) { Files.removeTree(path, on: $0) }
    }

    /// `Files.makeTemporaryDirectory`: a new directory with a unique name.
    ///
    /// - Parameters:
    ///   - prefix: A bare name (made in `$TMPDIR` or /tmp) or a path prefix.
    ///   - loop: The loop that runs the request; nil for the calling loop thread's, else `EventLoop.shared`.
    /// - Returns: The new directory's path.
    /// - Throws: `UVError` naming the template.
    ///
    /// Thread rule: safe from any task.
    public static func makeTemporaryDirectory(prefix: String = "reactiveuv-", on loop: EventLoop? = nil) async throws -> String {
        try await value("makeTemporaryDirectory", on: loop) { Files.makeTemporaryDirectory(prefix: prefix, on: $0) }
    }

    /// `Files.rename`: renames on one file system (`EXDEV` across).
    ///
    /// - Parameters:
    ///   - source: The existing path.
    ///   - destination: The new path.
    ///   - loop: The loop that runs the request; nil for the calling loop thread's, else `EventLoop.shared`.
    /// - Throws: `UVError` naming both paths.
    ///
    /// Thread rule: safe from any task.
    public static func rename(from source: String, to destination: String, on loop: EventLoop? = nil) async throws {
        _ = try await run(on: loop) { Files.rename(from: source, to: destination, on: $0) }
    }

    /// `Files.copy`: copies a file (cloned where the file system can), never over an existing one unless asked.
    ///
    /// - Parameters:
    ///   - source: The file.
    ///   - destination: The new file.
    ///   - overwrite: Replace an existing destination.
    ///   - loop: The loop that runs the request; nil for the calling loop thread's, else `EventLoop.shared`.
    /// - Throws: `UVError` (`EEXIST`...) naming both paths.
    ///
    /// Thread rule: safe from any task.
    public static func copy(from source: String, to destination: String, overwrite: Bool = false,
                            on loop: EventLoop? = nil) async throws {
        _ = try await run(on: loop) { Files.copy(from: source, to: destination, overwrite: overwrite, on: $0) }
    }

    /// `Files.link`: a hard link at `path` to `existing`.
    ///
    /// - Parameters:
    ///   - path: The new name.
    ///   - existing: The file.
    ///   - loop: The loop that runs the request; nil for the calling loop thread's, else `EventLoop.shared`.
    /// - Throws: `UVError` naming both paths.
    ///
    /// Thread rule: safe from any task.
    public static func link(at path: String, pointingTo existing: String, on loop: EventLoop? = nil) async throws {
        _ = try await run(on: loop) { Files.link(at: path, pointingTo: existing, on: $0) }
    }

    /// `Files.symbolicLink`: a symbolic link at `path` containing `target`.
    ///
    /// - Parameters:
    ///   - path: The new link.
    ///   - target: What it points to.
    ///   - loop: The loop that runs the request; nil for the calling loop thread's, else `EventLoop.shared`.
    /// - Throws: `UVError` naming both paths.
    ///
    /// Thread rule: safe from any task.
    public static func symbolicLink(at path: String, pointingTo target: String, on loop: EventLoop? = nil) async throws {
        _ = try await run(on: loop) { Files.symbolicLink(at: path, pointingTo: target, on: $0) }
    }

    /// `Files.readLink`: what a symbolic link contains.
    ///
    /// - Parameters:
    ///   - path: The link.
    ///   - loop: The loop that runs the request; nil for the calling loop thread's, else `EventLoop.shared`.
    /// - Returns: The link's content, unresolved.
    /// - Throws: `UVError` naming the path.
    ///
    /// Thread rule: safe from any task.
    public static func readLink(_ path: String, on loop: EventLoop? = nil) async throws -> String {
        try await value("readLink", on: loop) { Files.readLink(path, on: $0) }
    }

    /// `Files.realPath`: the absolute path with every link resolved.
    ///
    /// - Parameters:
    ///   - path: An existing path.
    ///   - loop: The loop that runs the request; nil for the calling loop thread's, else `EventLoop.shared`.
    /// - Returns: The resolved path.
    /// - Throws: `UVError` naming the path.
    ///
    /// Thread rule: safe from any task.
    public static func realPath(_ path: String, on loop: EventLoop? = nil) async throws -> String {
        try await value("realPath", on: loop) { Files.realPath(path, on: $0) }
    }

    /// `Files.chmod`: sets the permission bits.
    ///
    /// - Parameters:
    ///   - path: The file.
    ///   - mode: 0...0o7777.
    ///   - loop: The loop that runs the request; nil for the calling loop thread's, else `EventLoop.shared`.
    /// - Throws: `UVError` naming the path.
    ///
    /// Thread rule: safe from any task.
    public static func chmod(_ path: String, _ mode: UInt32, on loop: EventLoop? = nil) async throws {
        _ = try await run(on: loop) { Files.chmod(path, mode, on: $0) }
    }

    /// `Files.chown`: changes the owner and/or group.
    ///
    /// - Parameters:
    ///   - path: The file.
    ///   - user: The new owner; nil leaves it.
    ///   - group: The new group; nil leaves it.
    ///   - loop: The loop that runs the request; nil for the calling loop thread's, else `EventLoop.shared`.
    /// - Throws: `UVError` naming the path.
    ///
    /// Thread rule: safe from any task.
    public static func chown(_ path: String, user: UInt32? = nil, group: UInt32? = nil, on loop: EventLoop? = nil) async throws {
        _ = try await run(on: loop) { Files.chown(path, user: user, group: group, on: $0) }
    }

    /// `Files.lchown`: changes the owner and/or group of a link itself.
    ///
    /// - Parameters:
    ///   - path: The link.
    ///   - user: The new owner; nil leaves it.
    ///   - group: The new group; nil leaves it.
    ///   - loop: The loop that runs the request; nil for the calling loop thread's, else `EventLoop.shared`.
    /// - Throws: `UVError` naming the path.
    ///
    /// Thread rule: safe from any task.
    public static func lchown(_ path: String, user: UInt32? = nil, group: UInt32? = nil, on loop: EventLoop? = nil) async throws {
        _ = try await run(on: loop) { Files.lchown(path, user: user, group: group, on: $0) }
    }

    /// `Files.setTimes`: sets the access and modification times, to the nanosecond.
    ///
    /// - Parameters:
    ///   - path: The file.
    ///   - access: The access time since the Unix epoch.
    ///   - modification: The modification time since the Unix epoch.
    ///   - loop: The loop that runs the job; nil for the calling loop thread's, else `EventLoop.shared`.
    /// - Throws: `UVError` naming the path.
    ///
    /// Thread rule: safe from any task.
    public static func setTimes(_ path: String, access: Duration, modification: Duration, on loop: EventLoop? = nil) async throws {
        _ = try await run(on: loop) { Files.setTimes(path, access: access, modification: modification, on: $0) }
    }

    /// `Files.setLinkTimes`: sets the times of a symbolic link itself.
    ///
    /// - Parameters:
    ///   - path: The link.
    ///   - access: The access time since the Unix epoch.
    ///   - modification: The modification time since the Unix epoch.
    ///   - loop: The loop that runs the job; nil for the calling loop thread's, else `EventLoop.shared`.
    /// - Throws: `UVError` naming the path.
    ///
    /// Thread rule: safe from any task.
    public static func setLinkTimes(_ path: String, access: Duration, modification: Duration, on loop: EventLoop? = nil) async throws {
        _ = try await run(on: loop) { Files.setLinkTimes(path, access: access, modification: modification, on: $0) }
    }

    /// `Files.truncate`: sets a file's size.
    ///
    /// - Parameters:
    ///   - path: The file.
    ///   - size: The new size, 0 or more.
    ///   - loop: The loop that runs the requests; nil for the calling loop thread's, else `EventLoop.shared`.
    /// - Throws: `UVError` naming the path.
    ///
    /// Thread rule: safe from any task.
    public static func truncate(_ path: String, to size: Int64, on loop: EventLoop? = nil) async throws {
        _ = try await run(on: loop) { Files.truncate(path, to: size, on: $0) }
    }
}
