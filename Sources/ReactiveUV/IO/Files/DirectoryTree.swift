internal import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// `Files.createDirectory(_:mode:withParents: true)`: `mkdir -p`, one `mkdir` request per missing level.
///
/// The deepest level is tried first; `ENOENT` or `ENOTDIR` pushes its parent, and the pushed levels are made on
/// the way back down. `EEXIST` is fine for a directory (or a link to one), an error naming what is there otherwise.
final class DirectoryCreation {
    // Loop thread only, as its operation.
    private let operation: FileOperation<Void>
    private let target: String
    private let mode: Int32
    /// Levels still to make, the deepest first; the last is being made.
    private var levels: [String]

    init(operation: FileOperation<Void>, path: String, mode: Int32) {
        self.operation = operation
        self.target = path
        self.mode = mode
        levels = [path]
    }

    func makeLevel() {
        guard let level = levels.last else { return operation.finish() }
        // Parents get owner write and search whatever `mode` says: the next level is made inside.
        let mode = level == target ? self.mode : self.mode | 0o300
        operation.request("mkdir \(level)", { uv_fs_mkdir($0, $1, level, mode, $2) }, failed: { [self] error in
            switch error.code {
            case UV_EEXIST.rawValue: checkExisting(level)
            case UV_ENOENT.rawValue, UV_ENOTDIR.rawValue:
                guard let parent = DirectoryCreation.parent(of: level) else { return operation.finish(error) }
                levels.append(parent)
                makeLevel()
            default: operation.finish(error)
            }
        }) { [self] in
            levels.removeLast()
            makeLevel()
        }
    }

    /// `level` exists: fine if it is a directory, else an error naming it.
    private func checkExisting(_ level: String) {
        operation.request("stat \(level)", { uv_fs_stat($0, $1, level, $2) }, read: { _, fs in FileInfo(statOf: fs).type },
                          failed: { [self] error in
            // `mkdir` said it exists, `stat` that it does not: a link to nothing, which ENOENT would not name.
            guard error.code == UV_ENOENT.rawValue else { return operation.finish(error) }
            operation.request("lstat \(level)", { uv_fs_lstat($0, $1, level, $2) }, read: { _, fs in FileInfo(statOf: fs).type }) { [self] type in
                // Removed meanwhile: made again.
                if type == .symbolicLink { refuse(level, "a symbolic link to a path that does not exist") } else { makeLevel() }
            }
        }) { [self] type in
            guard type == .directory else { return refuse(level, "a \(type)") }
            levels.removeLast()
            makeLevel()
        }
    }

    /// Ends with `EEXIST` (`level` is the path asked for) or `ENOTDIR` (a parent), saying what is in the way.
    private func refuse(_ level: String, _ what: String) {
        operation.finish(UVError(code: level == target ? UV_EEXIST.rawValue : UV_ENOTDIR.rawValue,
                                 message: "\(level) exists and is \(what), not a directory", context: "mkdir -p \(target)"))
    }

    /// The directory containing `path`, or nil at the top (`/`, or a relative name: the working directory).
    static func parent(of path: String) -> String? {
        let trimmed = Substring(path).droppingTrailingSlashes
        guard let slash = trimmed.lastIndex(of: "/") else { return nil }
        let parent = trimmed[..<slash].droppingTrailingSlashes
        if parent.isEmpty { return trimmed.hasPrefix("/") && trimmed.count > 1 ? "/" : nil }
        return parent == Substring(path) ? nil : String(parent)
    }
}

/// `Files.removeTree`: depth first, never following a symbolic link.
///
/// The root is looked at with requests on the loop (trailing slashes, what it is, whether it is `/`); a directory
/// is then emptied by `TreeRemovalWalk` in pool jobs of at most `callsPerJob` calls, so it shares the pool.
final class TreeRemoval {
    // Loop thread only, as its operation; the walk is the pool job's while one is out.
    private let operation: FileOperation<Void>
    private let root: BytePath
    private let rootPath: String

    /// System calls per pool job, before the pool serves other requests.
    static let callsPerJob = 256

    init(operation: FileOperation<Void>, root: String) {
        self.operation = operation
        self.root = BytePath(root)
        rootPath = root
    }

    func start() {
        let trimmed = Substring(rootPath).droppingTrailingSlashes
        guard trimmed.count < rootPath.count else { return removeRoot() }
        // A trailing slash makes the kernel follow a final link: look at the name without it, and unlink a link.
        let named = String(trimmed)
        operation.request("lstat \(named)", { uv_fs_lstat($0, $1, named, $2) }, read: { _, fs in FileInfo(statOf: fs).type },
                          failed: { [self] _ in removeRoot() }) { [self] type in
            guard type == .symbolicLink else { return removeRoot() }
            operation.request("unlink \(named)", { uv_fs_unlink($0, $1, named, $2) }) { [self] in operation.finish() }
        }
    }

    /// Removes the root as named: what it is (a link followed by a trailing slash included) decides how.
    private func removeRoot() {
        let root = self.root
        operation.request("lstat \(root)", { loop, request, callback in root.withCString { uv_fs_lstat(loop, request, $0, callback) } },
                          read: { _, fs in FileInfo(statOf: fs) }) { [self] info in
            guard info.type == .directory else {
                return operation.request("unlink \(root)", { loop, request, callback in
                    root.withCString { uv_fs_unlink(loop, request, $0, callback) }
                }) { [self] in operation.finish() }
            }
            // The door refused `/` by name; a path that only resolves to it (a bind mount) is caught by identity.
            operation.request("stat /", { uv_fs_stat($0, $1, "/", $2) }, read: { _, fs in FileInfo(statOf: fs) }) { [self] rootDirectory in
                guard !Self.isSameFile(info, rootDirectory) else {
                    return operation.finish(UVError(code: UVError.invalidArgumentCode, message: "refusing to remove the root directory ('\(root)' is '/')",
                                                    context: "removeTree \(root)"))
                }
                let walk = TreeRemovalWalk(root: rootPath)
                // Its descriptors close once no job can still use them.
                operation.onEnd { walk.close() }
                advance(walk)
            }
        }
    }

    /// What `Files.removeTree` refuses at the door, as `rm -r`: `/` (`//`) and a path ending in `.` or `..`.
    static func refusal(of path: String) -> UVError? {
        let trimmed = Substring(path).droppingTrailingSlashes
        let last = trimmed.split(separator: "/", omittingEmptySubsequences: false).last ?? trimmed
        return Files.refusal { () throws(UVError) in
            try FileSystemArguments.require(trimmed != "/", "refusing to remove the root directory", context: "removeTree \(path)")
            try FileSystemArguments.require(last != "." && last != "..",
                                            "refusing to remove a path ending in '.' or '..' (name the directory itself)", context: "removeTree \(path)")
        }
    }

    /// Whether two `stat` results describe one file (the same device and inode).
    static func isSameFile(_ one: FileInfo, _ other: FileInfo) -> Bool {
        one.device == other.device && one.inode == other.inode
    }

    /// Queues the job that makes the next `callsPerJob` system calls of the walk.
    private func advance(_ walk: TreeRemovalWalk) {
        operation.job("removeTree \(rootPath)", { stop in try walk.advance(budget: Self.callsPerJob, stop: stop) }) { [self] progress in
            if progress == .done { operation.finish() } else { advance(walk) }
        }
    }
}

extension Substring {
    /// The path without its trailing slashes (but `/` itself).
    var droppingTrailingSlashes: Substring {
        var trimmed = self
        while trimmed.count > 1 && trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
        return trimmed
    }
}
