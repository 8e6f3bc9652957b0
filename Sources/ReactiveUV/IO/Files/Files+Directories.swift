internal import CLibUV
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One entry of a directory listing: its name and what the directory says it is.
///
/// Thread rule: a value type; safe from any thread.
public struct DirectoryEntry: Sendable, Hashable, CustomStringConvertible {
    /// The entry's name in its directory (no path; never `.` or `..`).
    ///
    /// A name that is not valid UTF-8 (Linux names are bytes) shows U+FFFD for each byte that is
    /// not, so it names no file: it cannot be passed back to a call. `Files.removeTree` removes such
    /// entries itself (it builds its paths from the bytes).
    ///
    /// Thread rule: safe from any thread.
    public let name: String
    /// Its type as the directory entry records it (a symbolic link is `.symbolicLink`, not what it points to);
    /// `.unknown` on file systems whose entries do not say: `lstat` the entry then.
    ///
    /// Thread rule: safe from any thread.
    public let type: FileType

    /// An entry named `name` of type `type`.
    ///
    /// Thread rule: safe from any thread.
    public init(name: String, type: FileType) {
        self.name = name
        self.type = type
    }

    /// `"name (directory)"`.
    ///
    /// Thread rule: safe from any thread.
    public var description: String { "\(name) (\(type))" }
}

extension Files {
    /// Entries read per pool job (one batch) by `list`.
    ///
    /// About what one `getdents` call of glibc's 32 KiB buffer brings for short names: a job rarely
    /// waits on a second call, fewer make more pool round trips per call, and a batch delivered in
    /// one go keeps the loop only briefly. A listing holds at most two batches.
    ///
    /// Thread rule: safe from any thread.
    public static let listBatchSize = 1024

    /// Creates a directory; completes when it exists.
    ///
    /// - Parameters:
    ///   - path: The directory to create.
    ///   - mode: Its permissions (0...0o7777, less the process's umask); default 0o755.
    ///   - withParents: Like `mkdir -p`: create missing parents too (with `mode` plus owner write and search, so
    ///     the next level can be made), and succeed when `path` already is a directory. A component that exists
    ///     and is not a directory (a symbolic link to nothing included; one to a directory is followed) fails
    ///     with `EEXIST` (the path itself) or `ENOTDIR` (a parent), naming it and what it is.
    ///     Without it, a missing parent is `ENOENT` and an existing `path` is `EEXIST`.
    ///   - loop: The loop that runs the requests; nil for the subscription's home loop.
    /// - Returns: A signal that completes with no value.
    ///
    /// Thread rule: safe from any thread.
    public static func createDirectory(_ path: String, mode: UInt32 = 0o755, withParents: Bool = false,
                                       on loop: EventLoop? = nil) -> Signal<Void> {
        operation("createDirectory", on: loop, checks: { () throws(UVError) in
            try FileSystemArguments.check(path, in: "mkdir")
            try FileSystemArguments.check(mode: mode, in: "mkdir \(path)")
        }) { operation in
            if withParents {
                DirectoryCreation(operation: operation, path: path, mode: Int32(mode)).start()
            } else {
                let uvLoop = operation.loop.uvLoop
                operation.step("mkdir \(path)", { uv_fs_mkdir(uvLoop, $0, path, Int32(mode), $1) }) { operation.finish() }
            }
        }
    }

    /// Removes an empty directory (`rmdir`); one with entries fails with `ENOTEMPTY`.
    ///
    /// - Parameters:
    ///   - path: The directory.
    ///   - loop: The loop that runs the request; nil for the subscription's home loop.
    /// - Returns: A signal that completes with no value.
    ///
    /// Thread rule: safe from any thread.
    public static func removeDirectory(_ path: String, on loop: EventLoop? = nil) -> Signal<Void> {
        single("removeDirectory", context: FileCallContext("rmdir", path), on: loop, checks: { () throws(UVError) in
            try FileSystemArguments.check(path, in: "rmdir")
        }, { uv_fs_rmdir($0, $1, path, $3) })
    }

    /// Removes a file, a symbolic link (not what it points to) or another non-directory (`unlink`).
    ///
    /// - Parameters:
    ///   - path: The file; a directory fails with `EISDIR`.
    ///   - loop: The loop that runs the request; nil for the subscription's home loop.
    /// - Returns: A signal that completes with no value.
    ///
    /// Thread rule: safe from any thread.
    public static func remove(_ path: String, on loop: EventLoop? = nil) -> Signal<Void> {
        single("remove", context: FileCallContext("unlink", path), on: loop, checks: { () throws(UVError) in
            try FileSystemArguments.check(path, in: "unlink")
        }, { uv_fs_unlink($0, $1, path, $3) })
    }

    /// Removes `path` and, if it is a directory, everything in it, depth first (`rm -r`).
    ///
    /// Symbolic links are never followed: a link (to a directory or anything else) is unlinked and what it points
    /// to is left alone, also when `path` itself is a link, named with a trailing slash or not (`link/`, as shell
    /// completion writes it, removes the link: the slash would make the kernel follow it, so the name is looked
    /// at without it). An entry that vanishes meanwhile is fine; the first other failure (`EACCES`, `EBUSY`...)
    /// ends the signal, naming the path, with what was removed so far gone. A missing `path` is `ENOENT`.
    /// Below `path`, each directory is opened by its name relative to its parent's descriptor (never through a
    /// link) and its entries removed relative to its own, so a directory swapped for a link while it is emptied
    /// never leads the removal outside the tree. A tree deeper than a path can be long (`PATH_MAX`) is removed
    /// too, holding at most 64 descriptors; a directory left while its parent's descriptor was closed must
    /// still be in that parent, else the tree was moved during the removal: `EBUSY` ends it, what is left stays.
    ///
    /// As `rm -r` does, it refuses (`EINVAL`, nothing removed) the root directory and a path whose last
    /// component is `.` or `..`: at the door for `/`, `//`, `x/.`, `x/..`; and, for a path that only
    /// resolves to the root directory (a bind mount of it), once its `lstat` says so, before anything
    /// is removed.
    ///
    /// - Parameters:
    ///   - path: The file or directory.
    ///   - loop: The loop that runs the requests; nil for the subscription's home loop.
    /// - Returns: A signal that completes with no value once all of it is gone.
    ///
    /// Thread rule: safe from any thread.
    public static func removeTree(_ path: String, on loop: EventLoop? = nil) -> Signal<Void> {
        operation("removeTree", on: loop, checks: { () throws(UVError) in
            try FileSystemArguments.check(path, in: "removeTree")
            if let refusal = TreeRemoval.refusal(of: path) { throw refusal }
        }) { operation in
            TreeRemoval(operation: operation, root: path).start()
        }
    }

    /// Creates a new, empty directory with a unique name (`mkdtemp`, mode 0o700) and sends its path.
    ///
    /// - Parameters:
    ///   - prefix: The start of the name: a bare name goes in `$TMPDIR` (or `/tmp` when it is unset or empty);
    ///     a prefix with a `/` is used as it is (`"/var/tmp/build-"`). Six random characters follow it.
    ///   - loop: The loop that runs the request; nil for the subscription's home loop.
    /// - Returns: A signal of the new directory's path. A directory made for a subscriber that was disposed
    ///   (on any thread) before the result was sent is removed again; one already sent to a subscriber whose
    ///   home is another loop (`loop` given) is dropped in flight by a dispose, as any value is.
    ///
    /// Thread rule: safe from any thread.
    public static func makeTemporaryDirectory(prefix: String = "reactiveuv-", on loop: EventLoop? = nil) -> Signal<String> {
        let template = temporaryTemplate(prefix: prefix)
        return operation("makeTemporaryDirectory", on: loop, checks: { () throws(UVError) in
            try FileSystemArguments.check(template, "prefix", in: "mkdtemp")
        }) { operation in
            let uvLoop = operation.loop.uvLoop
            operation.step("mkdtemp \(template)", { uv_fs_mkdtemp(uvLoop, $0, template, $1) }, read: { _, fs in
                String(cString: fs.pointee.path)
            }, discard: { fs in
                removeUnwantedDirectory(String(cString: fs.pointee.path))
            }) { made in
                // Disposed on another thread while the request ran: the subscription is marked at once, its
                // teardown (which ends this operation) comes later, and the value sent now would be dropped.
                if operation.subscriber?.isDisposed ?? true {
                    removeUnwantedDirectory(made)
                    return
                }
                operation.send(made)
                operation.finish()
            }
        }
    }

    /// Removes a temporary directory made for a subscriber that is gone: nobody will ever remove it otherwise.
    private static func removeUnwantedDirectory(_ path: String) {
        var request = uv_fs_t()
        uvCheckReporting(uv_fs_rmdir(nil, &request, path, nil), "rmdir \(path)")
        uv_fs_req_cleanup(&request)
    }

    /// `prefix` + "XXXXXX", in `$TMPDIR` (or /tmp) unless it has a `/`.
    static func temporaryTemplate(prefix: String) -> String {
        if prefix.contains("/") { return prefix + "XXXXXX" }
        var directory = getenv("TMPDIR").map { String(cString: $0) } ?? ""
        if directory.isEmpty { directory = "/tmp" }
        if !directory.hasSuffix("/") { directory += "/" }
        return directory + prefix + "XXXXXX"
    }

    /// The entries of a directory (not `.` and `..`), streamed in batches of `listBatchSize`, then completion.
    /// The order is the directory's. The directory is opened with `uv_fs_opendir`; each batch is read by
    /// `readdir(3)` in a job on libuv's thread pool, which also makes the entries, so the loop only delivers them.
    ///
    /// The whole directory never sits in memory: two batches at most do (the next is read while one is
    /// delivered). A consumer that pauses (a full `signal.values` buffer does) stops the reading after the
    /// batch read ahead, until it resumes. The directory is closed at the end, on an error and on dispose (once
    /// no job can still be reading it). Entries added or removed while the listing runs may or may not appear.
    ///
    /// - Parameters:
    ///   - path: The directory; a file fails with `ENOTDIR`.
    ///   - loop: The loop that runs the requests; nil for the subscription's home loop.
    /// - Returns: A signal of entries.
    ///
    /// Thread rule: safe from any thread.
    public static func list(_ path: String, on loop: EventLoop? = nil) -> Signal<DirectoryEntry> {
        list(path, batchSize: listBatchSize, on: loop, afterEachBatch: nil)
    }

    /// `list(_:on:)` with the batch size and test seams told (on the loop thread) each batch's size after its
    /// delivery, and each `readdir`'s count when it called back (before the batch is delivered or held).
    static func list(_ path: String, batchSize: Int, on loop: EventLoop?, afterEachBatch: ((Int) -> Void)?,
                     afterEachRead: ((Int) -> Void)? = nil) -> Signal<DirectoryEntry> {
        operation("list", on: loop, checks: { () throws(UVError) in
            try FileSystemArguments.check(path, in: "opendir")
            guard batchSize > 0 else {
                throw UVError(code: UVError.invalidArgumentCode, message: "batch size must be positive, not \(batchSize)", context: "opendir \(path)")
            }
        }) { operation in
            DirectoryListing(operation: operation, path: path, batchSize: batchSize, afterEachBatch: afterEachBatch,
                             afterEachRead: afterEachRead).start()
        }
    }
}

extension FileType {
    /// The type a directory entry records.
    init(_ type: uv_dirent_type_t) {
        switch type {
        case UV_DIRENT_FILE: self = .regular
        case UV_DIRENT_DIR: self = .directory
        case UV_DIRENT_LINK: self = .symbolicLink
        case UV_DIRENT_FIFO: self = .fifo
        case UV_DIRENT_SOCKET: self = .socket
        case UV_DIRENT_CHAR: self = .characterDevice
        case UV_DIRENT_BLOCK: self = .blockDevice
        default: self = .unknown
        }
    }
}
