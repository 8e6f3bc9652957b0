internal import CLibUV

/// The `async throws` forms of `Files`' calls, of `OpenFile`'s operations (the file first) and of
/// `StreamConnection.sendFile`. Each is a thin bridge over the signal of the same name, which documents the
/// behaviour: it runs on `loop` (nil: the calling loop thread's loop, else `EventLoop.shared`) and returns the one
/// value or throws the error; cancelling the task disposes the signal. They live apart from the signals because
/// an `async` overload beside a signal would be picked by context alone. Each runs on its caller's executor
/// (`nonisolated(nonsending)`): from a task on a loop, no executor switch on the way in or out.
/// Thread rule: safe from any task.
public enum FileSystem {
    /// The loop an async call runs on: `loop`, else the calling loop thread's loop, else `EventLoop.shared`.
    static func loop(for loop: EventLoop?) -> EventLoop {
        loop ?? EventLoop.current ?? EventLoop.shared
    }

    /// The one bridge: builds the signal for the call's loop and returns its last value (nil if it only completes).
    nonisolated(nonsending) static func run<Value: Sendable>(on loop: EventLoop?, _ make: (EventLoop) -> Signal<Value>) async throws -> Value? {
        try await make(self.loop(for: loop)).last()
    }

    /// `run` for a signal that sends one value; `call`, built only on failure, names a signal that ended without it.
    nonisolated(nonsending) static func value<Value: Sendable>(_ call: @autoclosure () -> String, on loop: EventLoop?,
                                       _ make: (EventLoop) -> Signal<Value>) async throws -> Value {
        guard let value = try await run(on: loop, make) else {
            throw UVError(code: UV_EIO.rawValue, message: "the signal completed without its value", context: call())
        }
        return value
    }

    /// The async form of ``Files/read(_:maxSize:on:)``: the whole file. Thread rule: safe from any task.
    public nonisolated(nonsending) static func read(_ path: String, maxSize: Int = Files.defaultMaxReadSize, on loop: EventLoop? = nil) async throws -> [UInt8] {
        try await value("Files.read \(path)", on: loop) { Files.read(path, maxSize: maxSize, on: $0) }
    }

    /// ``Files/chunks(_:chunkSize:on:)`` as an `AsyncSequence`; a slow loop body pauses the reading, leaving the
    /// loop or cancelling the task stops it. Thread rule: safe from any task.
    public static func chunks(_ path: String, chunkSize: Int = 65_536, on loop: EventLoop? = nil) -> SignalValues<[UInt8]> {
        Files.chunks(path, chunkSize: chunkSize, on: self.loop(for: loop)).values
    }

    /// The async form of ``Files/write(_:to:append:on:)``. Thread rule: safe from any task.
    public nonisolated(nonsending) static func write(_ bytes: [UInt8], to path: String, append: Bool = false, on loop: EventLoop? = nil) async throws {
        _ = try await run(on: loop) { Files.write(bytes, to: path, append: append, on: $0) }
    }

    /// The async form of ``Files/stat(_:on:)``. Thread rule: safe from any task.
    public nonisolated(nonsending) static func stat(_ path: String, on loop: EventLoop? = nil) async throws -> FileInfo {
        try await value("stat", on: loop) { Files.stat(path, on: $0) }
    }

    /// The async form of ``Files/lstat(_:on:)``. Thread rule: safe from any task.
    public nonisolated(nonsending) static func lstat(_ path: String, on loop: EventLoop? = nil) async throws -> FileInfo {
        try await value("lstat", on: loop) { Files.lstat(path, on: $0) }
    }

    /// The async form of ``Files/access(_:_:on:)``: returns if the access is allowed. Thread rule: safe from any task.
    public nonisolated(nonsending) static func access(_ path: String, _ mode: FileAccess, on loop: EventLoop? = nil) async throws {
        _ = try await run(on: loop) { Files.access(path, mode, on: $0) }
    }

    /// The async form of ``Files/exists(_:on:)``. Thread rule: safe from any task.
    public nonisolated(nonsending) static func exists(_ path: String, on loop: EventLoop? = nil) async throws -> Bool {
        try await value("exists", on: loop) { Files.exists(path, on: $0) }
    }

    /// The async form of ``Files/createDirectory(_:mode:withParents:on:)``. Thread rule: safe from any task.
    public static func createDirectory(_ path: String, mode: UInt32 = 0o755, withParents: Bool = false,
                                       on loop: EventLoop? = nil) async throws {
        _ = try await run(on: loop) { Files.createDirectory(path, mode: mode, withParents: withParents, on: $0) }
    }

    /// ``Files/list(_:on:)`` as an `AsyncSequence`; a slow loop body pauses the reading. Thread rule: safe from any task.
    public static func list(_ path: String, on loop: EventLoop? = nil) -> SignalValues<DirectoryEntry> {
        Files.list(path, on: self.loop(for: loop)).values
    }

    /// The async form of ``Files/removeDirectory(_:on:)``. Thread rule: safe from any task.
    public nonisolated(nonsending) static func removeDirectory(_ path: String, on loop: EventLoop? = nil) async throws {
        _ = try await run(on: loop) { Files.removeDirectory(path, on: $0) }
    }

    /// The async form of ``Files/remove(_:on:)``. Thread rule: safe from any task.
    public nonisolated(nonsending) static func remove(_ path: String, on loop: EventLoop? = nil) async throws {
        _ = try await run(on: loop) { Files.remove(path, on: $0) }
    }

    /// The async form of ``Files/removeTree(_:on:)``. Thread rule: safe from any task.
    public nonisolated(nonsending) static func removeTree(_ path: String, on loop: EventLoop? = nil) async throws {
        _ = try await run(on: loop) { Files.removeTree(path, on: $0) }
    }

    /// The async form of ``Files/makeTemporaryDirectory(prefix:on:)``: the new directory's path.
    /// Thread rule: safe from any task.
    public nonisolated(nonsending) static func makeTemporaryDirectory(prefix: String = "reactiveuv-", on loop: EventLoop? = nil) async throws -> String {
        try await value("makeTemporaryDirectory", on: loop) { Files.makeTemporaryDirectory(prefix: prefix, on: $0) }
    }

    /// The async form of ``Files/rename(from:to:on:)``. Thread rule: safe from any task.
    public nonisolated(nonsending) static func rename(from source: String, to destination: String, on loop: EventLoop? = nil) async throws {
        _ = try await run(on: loop) { Files.rename(from: source, to: destination, on: $0) }
    }

    /// The async form of ``Files/copy(from:to:overwrite:on:)``. Thread rule: safe from any task.
    public static func copy(from source: String, to destination: String, overwrite: Bool = false,
                            on loop: EventLoop? = nil) async throws {
        _ = try await run(on: loop) { Files.copy(from: source, to: destination, overwrite: overwrite, on: $0) }
    }

    /// The async form of ``Files/link(at:pointingTo:on:)``. Thread rule: safe from any task.
    public nonisolated(nonsending) static func link(at path: String, pointingTo existing: String, on loop: EventLoop? = nil) async throws {
        _ = try await run(on: loop) { Files.link(at: path, pointingTo: existing, on: $0) }
    }

    /// The async form of ``Files/symbolicLink(at:pointingTo:on:)``. Thread rule: safe from any task.
    public nonisolated(nonsending) static func symbolicLink(at path: String, pointingTo target: String, on loop: EventLoop? = nil) async throws {
        _ = try await run(on: loop) { Files.symbolicLink(at: path, pointingTo: target, on: $0) }
    }

    /// The async form of ``Files/readLink(_:on:)``. Thread rule: safe from any task.
    public nonisolated(nonsending) static func readLink(_ path: String, on loop: EventLoop? = nil) async throws -> String {
        try await value("readLink", on: loop) { Files.readLink(path, on: $0) }
    }

    /// The async form of ``Files/realPath(_:on:)``. Thread rule: safe from any task.
    public nonisolated(nonsending) static func realPath(_ path: String, on loop: EventLoop? = nil) async throws -> String {
        try await value("realPath", on: loop) { Files.realPath(path, on: $0) }
    }

    /// The async form of ``Files/chmod(_:_:on:)``. Thread rule: safe from any task.
    public nonisolated(nonsending) static func chmod(_ path: String, _ mode: UInt32, on loop: EventLoop? = nil) async throws {
        _ = try await run(on: loop) { Files.chmod(path, mode, on: $0) }
    }

    /// The async form of ``Files/chown(_:user:group:on:)``. Thread rule: safe from any task.
    public nonisolated(nonsending) static func chown(_ path: String, user: UInt32? = nil, group: UInt32? = nil, on loop: EventLoop? = nil) async throws {
        _ = try await run(on: loop) { Files.chown(path, user: user, group: group, on: $0) }
    }

    /// The async form of ``Files/lchown(_:user:group:on:)``. Thread rule: safe from any task.
    public nonisolated(nonsending) static func lchown(_ path: String, user: UInt32? = nil, group: UInt32? = nil, on loop: EventLoop? = nil) async throws {
        _ = try await run(on: loop) { Files.lchown(path, user: user, group: group, on: $0) }
    }

    /// The async form of ``Files/setTimes(_:access:modification:on:)``. Thread rule: safe from any task.
    public nonisolated(nonsending) static func setTimes(_ path: String, access: Duration, modification: Duration, on loop: EventLoop? = nil) async throws {
        _ = try await run(on: loop) { Files.setTimes(path, access: access, modification: modification, on: $0) }
    }

    /// The async form of ``Files/setLinkTimes(_:access:modification:on:)``. Thread rule: safe from any task.
    public nonisolated(nonsending) static func setLinkTimes(_ path: String, access: Duration, modification: Duration, on loop: EventLoop? = nil) async throws {
        _ = try await run(on: loop) { Files.setLinkTimes(path, access: access, modification: modification, on: $0) }
    }

    /// The async form of ``Files/truncate(_:to:on:)``. Thread rule: safe from any task.
    public nonisolated(nonsending) static func truncate(_ path: String, to size: Int64, on loop: EventLoop? = nil) async throws {
        _ = try await run(on: loop) { Files.truncate(path, to: size, on: $0) }
    }
}
