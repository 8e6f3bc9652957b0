internal import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One entry of a directory listing: its name and what the directory says it is.
/// Thread rule: a value type; safe from any thread.
public struct DirectoryEntry: Sendable, Hashable, CustomStringConvertible {
    /// The entry's name in its directory (never `.` or `..`). A name that is not valid UTF-8 shows U+FFFD for
    /// its bad bytes, so it names no file (`Files.removeTree` still removes it). Thread rule: safe from any thread.
    public let name: String
    /// Its type as the directory records it (a link is `.symbolicLink`); `.unknown` where the file system does
    /// not say (`lstat` it then). Thread rule: safe from any thread.
    public let type: FileType

    /// An entry named `name` of type `type`. Thread rule: safe from any thread.
    public init(name: String, type: FileType) {
        self.name = name
        self.type = type
    }

    /// `"name (directory)"`. Thread rule: safe from any thread.
    public var description: String { "\(name) (\(type))" }
}

extension Files {
    /// Entries read per pool job (one batch) by `list`: about one `getdents` call of glibc's buffer. A listing
    /// holds at most two batches. Thread rule: safe from any thread.
    public static let listBatchSize = 1024

    /// Creates the directory `path` with `mode` (0...0o7777, less the umask), then completes. With `withParents`,
    /// like `mkdir -p`: missing parents are made too (with owner write and search added) and a directory at `path` is
    /// fine; a component that is not a directory fails with `EEXIST` (the path) or `ENOTDIR` (a parent). Without it, a
    /// missing parent is `ENOENT` and an existing `path` `EEXIST`. Thread rule: safe from any thread.
    public static func createDirectory(_ path: String, mode: UInt32 = 0o755, withParents: Bool = false,
                                       on loop: EventLoop? = nil) -> Signal<Void> {
        operation("createDirectory", on: loop, checks: { () throws(UVError) in
            try FileSystemArguments.check(path, in: "mkdir")
            try FileSystemArguments.check(mode: mode, in: "mkdir \(path)")
        }, simulated: { operation in
            operation.simulate("mkdir \(path)") { files throws(UVError) in
                if withParents {
                    try files.makeDirectories(path, mode: mode, context: "mkdir \(path)")
                } else {
                    try files.makeDirectory(path, mode: mode, context: "mkdir \(path)")
                }
                return nil
            }
        }) { operation in
            if withParents {
                DirectoryCreation(operation: operation, path: path, mode: Int32(mode)).makeLevel()
            } else {
                operation.request("mkdir \(path)", { uv_fs_mkdir($0, $1, path, Int32(mode), $2) }) { operation.finish() }
            }
        }
    }

    /// Removes an empty directory (`rmdir`), then completes; one with entries fails with `ENOTEMPTY`.
    /// Thread rule: safe from any thread.
    public static func removeDirectory(_ path: String, on loop: EventLoop? = nil) -> Signal<Void> {
        single(FileCallContext("rmdir", path), on: loop, checks: { () throws(UVError) in
            try FileSystemArguments.check(path, in: "rmdir")
        }, { uv_fs_rmdir($0, $1, path, $3) })
    }

    /// Removes a file, a symbolic link (not what it points to) or another non-directory (`unlink`), then
    /// completes; a directory fails with `EISDIR`. Thread rule: safe from any thread.
    public static func remove(_ path: String, on loop: EventLoop? = nil) -> Signal<Void> {
        single(FileCallContext("unlink", path), on: loop, checks: { () throws(UVError) in
            try FileSystemArguments.check(path, in: "unlink")
        }, { uv_fs_unlink($0, $1, path, $3) })
    }

    /// Removes `path` and, if it is a directory, everything in it, depth first (`rm -r`), then completes.
    /// Symbolic links are never followed (`link/` unlinks the link) and never lead the removal out of the tree; a tree
    /// moved meanwhile ends it with `EBUSY`. A vanished entry is fine; another failure ends it, naming the path. As
    /// `rm -r`, it refuses (`EINVAL`) the root directory, also through a link or a bind mount, and a path ending in `.`
    /// or `..`. Thread rule: safe from any thread.
    public static func removeTree(_ path: String, on loop: EventLoop? = nil) -> Signal<Void> {
        operation("removeTree", on: loop, checks: { () throws(UVError) in
            try FileSystemArguments.check(path, in: "removeTree")
            if let refusal = TreeRemoval.refusal(of: path) { throw refusal }
        }, simulated: { operation in
            operation.simulate("removeTree \(path)") { files throws(UVError) in
                try files.removeTree(path, context: "removeTree \(path)")
                return nil
            }
        }) { operation in
            TreeRemoval(operation: operation, root: path).start()
        }
    }

    /// Creates a new, empty directory (`mkdtemp`, mode 0o700) named `prefix` and six random characters, and sends
    /// its path: a bare prefix goes in `$TMPDIR` (else `/tmp`), one with a `/` is used as it is (`"/var/tmp/build-"`).
    /// A directory made for a subscriber disposed before it was sent is removed again. Thread rule: safe from any thread.
    public static func makeTemporaryDirectory(prefix: String = "reactiveuv-", on loop: EventLoop? = nil) -> Signal<String> {
        let template = prefix.contains("/") ? prefix + "XXXXXX" : temporaryTemplate(prefix, in: temporaryDirectory())
        return operation("makeTemporaryDirectory", on: loop, checks: { () throws(UVError) in
            try FileSystemArguments.check(template, "prefix", in: "mkdtemp")
        }) { operation in
            operation.request("mkdtemp \(template)", { uv_fs_mkdtemp($0, $1, template, $2) }, read: { _, fs in
                String(cString: fs.pointee.path)
            }, discard: { fs in
                removeUnwantedDirectory(String(cString: fs.pointee.path))
            }) { made in
                // Disposed on another thread while the request ran: the value sent now would be dropped.
                if operation.isUnwanted { return removeUnwantedDirectory(made) }
                operation.send(made)
                operation.finish()
            }
        }
    }

    /// Removes a temporary directory made for a subscriber that is gone (nobody else knows it).
    private static func removeUnwantedDirectory(_ path: String) {
        runNow("rmdir \(path)") { uv_fs_rmdir(nil, $0, path, nil) }
    }

    /// The entries of the directory `path` (not `.` and `..`), in its order, streamed in batches of `listBatchSize`
    /// read by pool jobs, then completion; a file fails with `ENOTDIR`. At most two batches are in memory: a consumer
    /// that pauses stops the reading after the batch read ahead. Entries added or removed meanwhile may or may not
    /// appear. Thread rule: safe from any thread.
    public static func list(_ path: String, on loop: EventLoop? = nil) -> Signal<DirectoryEntry> {
        list(path, batchSize: listBatchSize, on: loop, afterEachBatch: nil)
    }

    /// `list(_:on:)` with the batch size and test seams (loop thread): each batch's size after its delivery, and
    /// each job's count when it called back.
    static func list(_ path: String, batchSize: Int, on loop: EventLoop?, afterEachBatch: ((Int) -> Void)?,
                     afterEachRead: ((Int) -> Void)? = nil) -> Signal<DirectoryEntry> {
        operation("list", on: loop, checks: { () throws(UVError) in
            try FileSystemArguments.check(path, in: "opendir")
            try FileSystemArguments.require(batchSize > 0, "batch size must be positive, not \(batchSize)", context: "opendir \(path)")
        }, simulated: { operation in
            operation.simulateAll("opendir \(path)") { files throws(UVError) in try files.list(path, context: "opendir \(path)") }
        }) { operation in
            DirectoryListing(operation: operation, path: path, batchSize: batchSize, afterEachBatch: afterEachBatch,
                             afterEachRead: afterEachRead).start()
        }
    }
}
