internal import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// `Files.createDirectory(_:mode:withParents: true)`: `mkdir -p`, one `mkdir` request per missing level.
///
/// It tries the deepest directory first; `ENOENT` (a parent is missing) pushes
/// the parent and tries that, and so on up, then makes each pushed level on the
/// way back down (`ENOTDIR` goes up the same way, to name the parent that is
/// not a directory). `EEXIST` is fine when what exists is a directory (checked
/// with `stat`, which follows a link to a directory as `mkdir -p` does), and an
/// error naming what is in the way otherwise.
final class DirectoryCreation {
    // Loop thread only, as its operation.
    private let operation: FileSystemOperation<Void>
    private let target: String
    private let mode: Int32
    /// Levels still to make, the deepest first; the last is being made.
    private var levels: [String]

    init(operation: FileSystemOperation<Void>, path: String, mode: Int32) {
        self.operation = operation
        self.target = path
        self.mode = mode
        levels = [path]
    }

    func start() { makeLevel() }

    private func makeLevel() {
        guard let level = levels.last else {
            operation.finish()
            return
        }
        // Parents get owner write and search whatever `mode` says: the next level must be made inside.
        let mode = level == target ? self.mode : self.mode | 0o300
        let uvLoop = operation.loop.uvLoop
        operation.step("mkdir \(level)", { uv_fs_mkdir(uvLoop, $0, level, mode, $1) }, failed: { [self] error in
            switch error.code {
            case UV_EEXIST.rawValue: checkExisting(level)
            case UV_ENOENT.rawValue, UV_ENOTDIR.rawValue:
                // A parent is missing, or one is not a directory: go up until a level exists (and is checked).
                guard let parent = DirectoryCreation.parent(of: level) else {
                    operation.finish(error)
                    return
                }
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
        let uvLoop = operation.loop.uvLoop
        operation.step("stat \(level)", { uv_fs_stat(uvLoop, $0, level, $1) }, read: { _, fs in FileInfo(statOf: fs) },
                       failed: { [self] error in
            // `mkdir` said it exists, `stat` that it does not: a symbolic link to nothing, which `stat`'s own
            // ENOENT would not name as the obstacle.
            guard error.code == UV_ENOENT.rawValue else {
                operation.finish(error)
                return
            }
            operation.step("lstat \(level)", { uv_fs_lstat(uvLoop, $0, level, $1) }, read: { _, fs in FileInfo(statOf: fs).type }) { [self] type in
                guard type == .symbolicLink else {
                    makeLevel()  // it was removed meanwhile: make it
                    return
                }
                refuse(level, "a symbolic link to a path that does not exist")
            }
        }) { [self] info in
            guard info.type == .directory else {
                refuse(level, "a \(info.type)")
                return
            }
            levels.removeLast()
            makeLevel()
        }
    }

    /// Ends with `EEXIST` (`level` is the path asked for) or `ENOTDIR` (a parent), saying what is in the way.
    private func refuse(_ level: String, _ what: String) {
        operation.finish(UVError(code: level == target ? UV_EEXIST.rawValue : UV_ENOTDIR.rawValue,
                                 message: "\(level) exists and is \(what), not a directory",
                                 context: "mkdir -p \(target)"))
    }

    /// The directory containing `path`, or nil at the top (`/`, or a relative name with no `/`: the working
    /// directory, which exists).
    static func parent(of path: String) -> String? {
        var trimmed = Substring(path)
        while trimmed.count > 1 && trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
        guard let slash = trimmed.lastIndex(of: "/") else { return nil }
        var parent = trimmed[..<slash]
        while parent.count > 1 && parent.hasSuffix("/") { parent = parent.dropLast() }
        if parent.isEmpty { return trimmed.hasPrefix("/") && trimmed.count > 1 ? "/" : nil }
        return parent == Substring(path) ? nil : String(parent)
    }
}

/// `Files.removeTree`: depth first, never following a symbolic link.
///
/// The root is looked at with `uv_fs_*` requests on the loop (its trailing slashes, what it is, whether it
/// is `/`); a root that is a directory is then emptied and removed by `TreeRemovalWalk` in pool jobs of at
/// most `callsPerJob` system calls each, one job at a time, so a large tree shares the pool with other
/// requests instead of holding a thread for all of it. What each entry is comes from its directory entry
/// (or `lstat` where the file system does not say); only a real directory is descended into, and it is
/// opened with `O_NOFOLLOW`, so a link to a directory is unlinked like any file and its target is never
/// touched. Entries are reached one component at a time relative to directory descriptors, so a tree deeper
/// than `PATH_MAX` is removed too and a swapped component never leads outside it; names are kept as bytes:
/// one that is not UTF-8 is removed like any other.
final class TreeRemoval {
    // Loop thread only, as its operation; the walk is the pool job's while one is out.
    private let operation: FileSystemOperation<Void>
    private let root: BytePath
    private let rootPath: String
    /// The root as given, without its trailing slashes (nil when it has none).
    private let rootWithoutSlashes: String?
    /// The walk below the root, once it started.
    private var walk: TreeRemovalWalk?
    /// The jobs advancing the walk, one at a time; its descriptors close once the operation ended and no job is out.
    private lazy var jobs = SequentialFileJobs<TreeRemovalWalk.Progress>(loop: operation.loop) { [self] in closeWalk() }

    /// System calls per pool job: a few milliseconds of unlinking, then the pool serves other requests.
    static let callsPerJob = 256

    init(operation: FileSystemOperation<Void>, root: String) {
        self.operation = operation
        self.root = BytePath(root)
        rootPath = root
        var trimmed = Substring(root)
        while trimmed.count > 1 && trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
        rootWithoutSlashes = trimmed.count < root.count ? String(trimmed) : nil
    }

    func start() {
        guard let named = rootWithoutSlashes else {
            removeRoot()
            return
        }
        // A trailing slash makes the kernel follow a symbolic link at the end of the path (`lstat("link/")`
        // describes the directory it points to, whose entries would then be removed): the name is looked at
        // without it, and a link is unlinked, its target left alone, as for a root named without the slash.
        let uvLoop = operation.loop.uvLoop
        operation.step("lstat \(named)", { uv_fs_lstat(uvLoop, $0, named, $1) }, read: { _, fs in FileInfo(statOf: fs).type },
                       failed: { [self] _ in removeRoot() }) { [self] type in
            guard type == .symbolicLink else {
                removeRoot()
                return
            }
            operation.step("unlink \(named)", { uv_fs_unlink(uvLoop, $0, named, $1) }) { [self] in
                operation.finish()
            }
        }
    }

    /// Removes the root as named: what it is (a link followed by a trailing slash included) decides how.
    private func removeRoot() {
        let uvLoop = operation.loop.uvLoop
        let root = self.root
        operation.step("lstat \(root)", { request, callback in root.withCString { uv_fs_lstat(uvLoop, request, $0, callback) } },
                       read: { _, fs in FileInfo(statOf: fs) }) { [self] info in
            guard info.type == .directory else {
                operation.step("unlink \(root)", { request, callback in root.withCString { uv_fs_unlink(uvLoop, request, $0, callback) } }) { [self] in
                    operation.finish()
                }
                return
            }
            // The door refused `/` by name; a path that only resolves to it (a trailing slash after a
            // link to it, a bind mount of it) is caught by the directory's identity, before any removal.
            operation.step("stat /", { uv_fs_stat(uvLoop, $0, "/", $1) }, read: { _, fs in FileInfo(statOf: fs) }) { [self] rootDirectory in
                if Self.isSameFile(info, rootDirectory) {
                    operation.finish(UVError(code: UVError.invalidArgumentCode,
                                             message: "refusing to remove the root directory ('\(root)' is '/')",
                                             context: "removeTree \(root)"))
                } else {
                    startWalk()
                }
            }
        }
    }

    /// What `Files.removeTree` refuses at the door, as `rm -r` does: the root directory named as such
    /// (`/`, `//`), and a path whose last component is `.` or `..` (`x/.`, `..`, `/tmp/..`); nil for any other.
    static func refusal(of path: String) -> UVError? {
        var trimmed = Substring(path)
        while trimmed.count > 1 && trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
        if trimmed == "/" {
            return UVError(code: UVError.invalidArgumentCode, message: "refusing to remove the root directory",
                           context: "removeTree \(path)")
        }
        let last = trimmed.split(separator: "/", omittingEmptySubsequences: false).last ?? trimmed
        guard last == "." || last == ".." else { return nil }
        return UVError(code: UVError.invalidArgumentCode,
                       message: "refusing to remove a path ending in '.' or '..' (name the directory itself)",
                       context: "removeTree \(path)")
    }

    /// Whether two `stat` results describe one file (the same device and inode).
    static func isSameFile(_ one: FileInfo, _ other: FileInfo) -> Bool {
        one.device == other.device && one.inode == other.inode
    }

    /// Empties and removes the root directory in pool jobs; its descriptors close when the operation ends.
    private func startWalk() {
        walk = TreeRemovalWalk(root: rootPath)
        operation.onEnd { [self] in jobs.operationEnded() }
        advance()
    }

    /// Queues the job that makes the next `callsPerJob` system calls of the walk.
    private func advance() {
        guard let walk, operation.isRunning else { return }
        guard operation.loop.acceptsNewRequests else {
            operation.finish(EventLoopError.shutDown(loop: operation.loop.name))
            return
        }
        jobs.run("removeTree \(rootPath)", work: { stop in
            try walk.advance(budget: Self.callsPerJob, stop: stop)
        }, onShutdown: { [self] in
            operation.finish(EventLoopError.shutDown(loop: operation.loop.name))
        }, failed: { [self] in operation.finish($0) }) { [self] result in
            switch result {
            case .success(.done): operation.finish()
            case .success(.more): advance()
            case .failure(let error): operation.finish(error)
            }
        }
    }

    private func closeWalk() {
        walk?.close()
        walk = nil
    }
}
