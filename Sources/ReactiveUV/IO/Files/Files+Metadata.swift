internal import CLibUV

/// What `Files.access(_:_:on:)` checks: read, write or execute permission, or (empty) that the path exists.
///
/// Thread rule: a value type; safe from any thread.
public struct FileAccess: OptionSet, Sendable, Hashable {
    /// The bits `access(2)` takes (`R_OK`, `W_OK`, `X_OK`; none is `F_OK`). Thread rule: safe from any thread.
    public let rawValue: Int32

    /// An access mode from `access(2)`'s bits. Thread rule: safe from any thread.
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// Permission to read (`R_OK`). Thread rule: safe from any thread.
    public static let read = FileAccess(rawValue: 4)
    /// Permission to write (`W_OK`). Thread rule: safe from any thread.
    public static let write = FileAccess(rawValue: 2)
    /// Permission to execute a file or search a directory (`X_OK`). Thread rule: safe from any thread.
    public static let execute = FileAccess(rawValue: 1)
    /// Only that the path exists (`F_OK`, no bits). Thread rule: safe from any thread.
    public static let exists: FileAccess = []
}

extension Files {
    /// Everything `stat` says about the file at `path`, following symbolic links; one value, then completion.
    ///
    /// - Parameters:
    ///   - path: The file (an empty path fails with `ENOENT`, as `stat(2)` answers it, and one with a NUL byte
    ///     with `EINVAL`, before any request).
    ///   - loop: The loop that runs the request; nil for the subscription's home loop.
    /// - Returns: A signal of one `FileInfo`; `ENOENT`, `EACCES`, `ENOTDIR`... name the path.
    ///
    /// Thread rule: safe from any thread.
    public static func stat(_ path: String, on loop: EventLoop? = nil) -> Signal<FileInfo> {
        statRequest(FileCallContext("stat", path), on: loop, checks: { () throws(UVError) in
            try FileSystemArguments.check(path, in: "stat")
        }) { loop, request, context, callback in
            // withCString lends a native string's own bytes; passing `path` would copy it into an array.
            context.path.withCString { uv_fs_stat(loop, request, $0, callback) }
        }
    }

    /// `stat` without following a final symbolic link: a link is described itself (`type == .symbolicLink`).
    ///
    /// - Parameters:
    ///   - path: The file or link.
    ///   - loop: The loop that runs the request; nil for the subscription's home loop.
    /// - Returns: A signal of one `FileInfo`.
    ///
    /// Thread rule: safe from any thread.
    public static func lstat(_ path: String, on loop: EventLoop? = nil) -> Signal<FileInfo> {
        statRequest(FileCallContext("lstat", path), on: loop, checks: { () throws(UVError) in
            try FileSystemArguments.check(path, in: "lstat")
        }) { loop, request, context, callback in
            context.path.withCString { uv_fs_lstat(loop, request, $0, callback) }
        }
    }

    /// Checks that the calling process may access `path` as `mode` says (`access(2)`); completes if it may, fails
    /// with `EACCES` (or `ENOENT`, `EROFS`...) if not.
    ///
    /// As `access(2)`, this checks the process's *real* user and group IDs, not the effective ones a set-user-ID
    /// program or `seteuid` changed: root may read and write anything, and execute what has any execute bit.
    ///
    /// - Parameters:
    ///   - path: The file.
    ///   - mode: `.read`, `.write`, `.execute`, any of them together, or `.exists`.
    ///   - loop: The loop that runs the request; nil for the subscription's home loop.
    /// - Returns: A signal that completes with no value when access is allowed.
    ///
    /// Thread rule: safe from any thread.
    public static func access(_ path: String, _ mode: FileAccess, on loop: EventLoop? = nil) -> Signal<Void> {
        single(FileCallContext("access", path), on: loop, mode: UInt16(truncatingIfNeeded: mode.rawValue), checks: { () throws(UVError) in
            try FileSystemArguments.check(path, in: "access")
            guard mode.rawValue & ~7 == 0 else {
                throw UVError(code: UVError.invalidArgumentCode, message: "access mode \(mode.rawValue) is not a combination of read, write and execute",
                              context: "access \(path)")
            }
        }, { uv_fs_access($0, $1, path, mode.rawValue, $3) })
    }

    /// Whether something exists at `path` (following symbolic links: a dangling link does not count).
    ///
    /// `ENOENT` is `false`; any other error (`EACCES` on a parent directory, `ENOTDIR`, `ELOOP`) ends the signal,
    /// since the answer is then unknown.
    ///
    /// - Parameters:
    ///   - path: The path.
    ///   - loop: The loop that runs the request; nil for the subscription's home loop.
    /// - Returns: A signal of one Bool.
    ///
    /// Thread rule: safe from any thread.
    public static func exists(_ path: String, on loop: EventLoop? = nil) -> Signal<Bool> {
        // An empty path names no file: `access` answers `ENOENT`, which is `false` here.
        operation("exists", on: loop, checks: { () throws(UVError) in
            if !path.isEmpty { try FileSystemArguments.check(path, in: "exists") }
        }, simulated: { operation in
            operation.simulate("access \(path)") { files throws(UVError) in
                do throws(UVError) {
                    try files.access(path, mode: 0, context: "access \(path)")
                    return true
                } catch where error.code == UVError.noSuchFileCode {
                    return false
                }
            }
        }) { operation in
            let answer = { (exists: Bool) in
                operation.send(exists)
                operation.finish()
            }
            operation.request("access \(path)", { uv_fs_access($0, $1, path, 0, $2) }, failed: { error in
                if error.code == UVError.noSuchFileCode { answer(false) } else { operation.finish(error) }
            }) { answer(true) }
        }
    }
}
