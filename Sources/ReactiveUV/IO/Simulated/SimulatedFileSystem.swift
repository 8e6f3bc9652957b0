internal import CLibUV

/// The in-memory file system of one simulation: directories, regular files with their bytes and
/// symbolic links, with modes, sizes and times on virtual time. Its calls answer as the kernel
/// would for a process that owns every file (the owner's permission bits are checked): `ENOENT`,
/// `EEXIST`, `ENOTDIR`, `EISDIR`, `ENOTEMPTY`, `EACCES`, `ELOOP`, each as a `UVError` naming the call.
///
/// Faults are armed per kind on a path: the first matching call at or after their time fails once.
///
/// Thread rule: the simulation's driving thread only (its loops' callbacks run there).
package final class SimulatedFileSystem: @unchecked Sendable {
    // Sendable: touched only by the driving thread (the thread rule).

    /// One file: what it holds, its permission bits, inode and times (nanoseconds of virtual time).
    final class Node {
        enum Content {
            case directory([String: Node])
            case file([UInt8])
            case link(String)
        }

        var content: Content
        var permissions: UInt32
        let inode: UInt64
        var modified: UInt64
        var changed: UInt64
        var accessed: UInt64
        /// The directory whose entry names this node, and that name; nil once unlinked (no hard links here).
        weak var parent: Node?
        var name = ""

        init(_ content: Content, permissions: UInt32, inode: UInt64, time: UInt64) {
            self.content = content
            self.permissions = permissions
            self.inode = inode
            modified = time
            changed = time
            accessed = time
        }

        var type: FileType {
            switch content {
            case .directory: .directory
            case .file: .regular
            case .link: .symbolicLink
            }
        }

        var size: UInt64 {
            switch content {
            case .directory: 4096
            case .file(let bytes): UInt64(bytes.count)
            case .link(let target): UInt64(target.utf8.count)
            }
        }
    }

    /// A fault armed on a path: the first call of its kind on that path at or after `at` fails with it.
    package enum FaultKind: Sendable, Hashable {
        /// A write fails with `ENOSPC`.
        case noSpace
        /// An open fails with `EMFILE`.
        case tooManyOpenFiles
        /// A read fails with `EIO`.
        case readError
        /// The watch's event queue overflows (`IN_Q_OVERFLOW`): one event is lost, `.eventsLost` sent instead.
        case watchOverflow
    }

    private let clock: VirtualClock
    private var nextInode: UInt64 = 2
    let root: Node
    /// Faults waiting for their call, in the order armed.
    private var faults: [(kind: FaultKind, path: String, at: UInt64)] = []
    /// The faults that struck, in order: kind, path and virtual time.
    package private(set) var faultsStruck: [(kind: FaultKind, path: String, at: UInt64)] = []
    /// Calls in a thousand of each kind that fail, drawn from `random` (set by the simulation).
    package var drawnPerMille: [FaultKind: Int] = [:]
    /// The seed's numbers for drawn faults.
    package var random: (() -> UInt64)?
    /// The drawn faults that struck, in order.
    package private(set) var drawnStruck: [(kind: FaultKind, path: String, at: UInt64)] = []

    /// Told the bytes of every file read (a whole file, or an open file's read), so the trace digests them.
    package var readObserver: ((UnsafeRawBufferPointer, Int32) -> Void)?
    /// The open file descriptions, by the descriptor `OpenFile` holds (negative: no real descriptor has one).
    var descriptors: [Int32: OpenDescription] = [:]
    /// Temporary files named so far (`makeTemporaryFile`).
    var temporaryCount = 0
    /// The instant each watched path last drew an overflow (`overflows`).
    private var overflowDrawnAt: [String: UInt64] = [:]

    /// What watches each node (`SimulatedDirectoryWatch`, `SimulatedFileWatch`), by the node.
    private var watchers: [ObjectIdentifier: [(key: Int, tell: (FileEvent.Kind, String, String?) -> Void)]] = [:]
    private var nextWatcherKey = 0
    /// What hears renames across directories (`watchMoves`).
    private var moveWatchers: [(key: Int, tell: (Node, String, Node, String) -> Void)] = []

    /// Tells `tell` each change to `directory`'s entries (kind, name, old name of a move), and to the node itself
    /// (name "": `.changed` for its contents or attributes, `.renamed` when it leaves its name), until the returned closure runs.
    func watch(_ directory: Node, _ tell: @escaping (FileEvent.Kind, String, String?) -> Void) -> () -> Void {
        let id = ObjectIdentifier(directory)
        nextWatcherKey += 1
        let key = nextWatcherKey
        watchers[id, default: []].append((key, tell))
        // Holds the node, so its identifier is not reused while watched.
        return { [self] in
            _ = directory
            watchers[id]?.removeAll { $0.key == key }
            if watchers[id]?.isEmpty == true { watchers[id] = nil }
        }
    }

    /// Tells `tell` each rename from one directory to another (old directory and name, new directory and name),
    /// before the two directories' watchers hear their halves, until the returned closure runs.
    func watchMoves(_ tell: @escaping (Node, String, Node, String) -> Void) -> () -> Void {
        nextWatcherKey += 1
        let key = nextWatcherKey
        moveWatchers.append((key, tell))
        return { [self] in moveWatchers.removeAll { $0.key == key } }
    }

    /// Tells the watchers of renames across directories (recursive watches) of one.
    func notifyMove(from: Node, _ oldName: String, to: Node, _ newName: String) {
        for watcher in moveWatchers { watcher.tell(from, oldName, to, newName) }
    }

    /// Tells the watchers of `directory` (if any) that `name` changed as `kind` says.
    func notify(_ directory: Node, _ kind: FileEvent.Kind, _ name: String, oldName: String? = nil) {
        guard !watchers.isEmpty, let list = watchers[ObjectIdentifier(directory)] else { return }
        for watcher in list { watcher.tell(kind, name, oldName) }
    }

    /// An empty tree (`/` alone, mode 0755) on `clock`'s time.
    package init(clock: VirtualClock) {
        self.clock = clock
        root = Node(.directory([:]), permissions: 0o755, inode: 1, time: clock.nanoseconds)
    }

    /// Arms `kind` on `path` (as given to the call, made absolute) from `at` nanoseconds.
    package func arm(_ kind: FaultKind, path: String, at: UInt64) {
        faults.append((kind, Self.normalized(path), at))
    }

    /// Fails with `kind`'s error if a fault of that kind waits on `path` and its time has come.
    func strike(_ kind: FaultKind, _ path: String, context: String) throws(UVError) {
        guard strikes(kind, path) else { return }
        let code = switch kind {
        case .noSpace: UV_ENOSPC.rawValue
        case .tooManyOpenFiles: UV_EMFILE.rawValue
        case .readError, .watchOverflow: UV_EIO.rawValue
        }
        throw UVError(code: code, message: "injected by the simulation's fault plan", context: context)
    }

    /// Whether the watch of `path` loses an event now to an overflow: a planned one strikes at the watch's
    /// first event at or after its time; one drawn from the seed only at the watch's first event of an
    /// instant, so that, written as a plan, it strikes the same event.
    func overflows(_ path: String) -> Bool {
        let absolute = Self.normalized(path)
        let firstOfInstant = overflowDrawnAt[absolute] != now
        overflowDrawnAt[absolute] = now
        return strikes(.watchOverflow, path, draws: firstOfInstant)
    }

    /// Whether a fault of `kind` on `path` strikes now (planned, or drawn from the seed if `draws`); noted if it does.
    func strikes(_ kind: FaultKind, _ path: String, draws: Bool = true) -> Bool {
        let now = clock.nanoseconds
        let absolute = Self.normalized(path)
        if let index = faults.firstIndex(where: { $0.kind == kind && $0.path == absolute && $0.at <= now }) {
            faults.remove(at: index)
        } else {
            guard draws, let perMille = drawnPerMille[kind], perMille > 0, let random, random() % 1_000 < UInt64(perMille) else { return false }
            drawnStruck.append((kind, absolute, now))
        }
        faultsStruck.append((kind, absolute, now))
        return true
    }

    /// `path` as absolute components (the working directory is `/`); `.` dropped, `..` kept for the walk.
    static func components(_ path: String) -> [String] {
        path.split(separator: "/", omittingEmptySubsequences: true).map(String.init).filter { $0 != "." }
    }

    static func normalized(_ path: String) -> String { "/" + components(path).joined(separator: "/") }

    func makeNode(_ content: Node.Content, permissions: UInt32) -> Node {
        defer { nextInode += 1 }
        return Node(content, permissions: permissions, inode: nextInode, time: clock.nanoseconds)
    }

    var now: UInt64 { clock.nanoseconds }

    static func error(_ code: uv_errno_t, _ context: String) -> UVError { UVError(code: code.rawValue, context: context) }

    /// Where `path` leads: its parent directory, its last name and the node there (nil when absent);
    /// intermediate links are followed, the last one only with `followLast`. `/` is its own parent, named "".
    func locate(_ path: String, followLast: Bool, context: String, depth: Int = 0) throws(UVError) -> (parent: Node, name: String, node: Node?) {
        guard depth < 40 else { throw Self.error(UV_ELOOP, context) }
        guard !path.isEmpty else { throw Self.error(UV_ENOENT, context) }
        var names = Self.components(path)
        var stack = [root]
        guard let last = names.popLast() else { return (root, "", root) }
        for name in names {
            let directory = stack[stack.count - 1]
            if name == ".." {
                if stack.count > 1 { stack.removeLast() }
                continue
            }
            guard case .directory(let entries) = directory.content else { throw Self.error(UV_ENOTDIR, context) }
            guard directory.permissions & 0o100 != 0 else { throw Self.error(UV_EACCES, context) }
            guard var next = entries[name] else { throw Self.error(UV_ENOENT, context) }
            if case .link(let target) = next.content {
                let base = target.hasPrefix("/") ? "" : Self.path(of: stack)
                guard let found = try locate(base + "/" + target, followLast: true, context: context, depth: depth + 1).node else {
                    throw Self.error(UV_ENOENT, context)
                }
                next = found
                // The link's target directory's own ancestors are not tracked: `..` after a link walks to its parent's.
            }
            stack.append(next)
        }
        let parent = stack[stack.count - 1]
        guard case .directory(let entries) = parent.content else { throw Self.error(UV_ENOTDIR, context) }
        guard parent.permissions & 0o100 != 0 else { throw Self.error(UV_EACCES, context) }
        if last == ".." { return (parent, "", stack.count > 1 ? stack[stack.count - 2] : root) }
        guard let node = entries[last] else { return (parent, last, nil) }
        if followLast, case .link(let target) = node.content {
            let base = target.hasPrefix("/") ? "" : Self.path(of: stack)
            let found = try locate(base + "/" + target, followLast: true, context: context, depth: depth + 1)
            return found
        }
        return (parent, last, node)
    }

    /// A path naming the directories of `stack` (by their names in their parents).
    private static func path(of stack: [Node]) -> String {
        var names: [String] = []
        for (parent, child) in zip(stack, stack.dropFirst()) {
            if case .directory(let entries) = parent.content, let name = entries.first(where: { $0.value === child })?.key {
                names.append(name)
            }
        }
        return "/" + names.joined(separator: "/")
    }

    /// The node at `path`, which must exist.
    func existing(_ path: String, followLast: Bool, context: String) throws(UVError) -> Node {
        guard let node = try locate(path, followLast: followLast, context: context).node else { throw Self.error(UV_ENOENT, context) }
        return node
    }

    /// Sets `name` in `directory` to `node` (nil removes it), stamping the directory's times; its
    /// watchers hear `.renamed` (an entry appeared or went, as libuv reports both) unless `quietly`.
    func setEntry(_ name: String, in directory: Node, to node: Node?, quietly: Bool = false) {
        if !quietly { notify(directory, .renamed, name) }
        guard case .directory(var entries) = directory.content else { return }
        directory.content = .directory([:])
        if let old = entries[name], old !== node {
            old.parent = nil
            notify(old, .renamed, "")
        }
        node?.parent = directory
        node?.name = name
        entries[name] = node
        directory.content = .directory(entries)
        directory.modified = now
        directory.changed = now
    }

    /// Tells the watchers of `node` and of its directory (under its name) that its contents or attributes changed.
    func touched(_ node: Node) {
        if let parent = node.parent { notify(parent, .changed, node.name) }
        notify(node, .changed, "")
    }

    /// Fails with `EACCES` unless the owner bits of `node` allow `bits` (4 read, 2 write, 1 execute).
    func require(_ bits: UInt32, of node: Node, _ context: String) throws(UVError) {
        guard node.permissions & (bits << 6) == bits << 6 else { throw Self.error(UV_EACCES, context) }
    }

    /// What `stat` says of `node`, as the kernel's structure.
    func info(of node: Node) -> FileInfo {
        var status = uv_stat_t()
        let typeBits: UInt32 = switch node.content {
        case .directory: 0o040000
        case .file: 0o100000
        case .link: 0o120000
        }
        status.st_mode = UInt64(typeBits | node.permissions)
        status.st_size = node.size
        status.st_ino = node.inode
        status.st_dev = 1
        status.st_nlink = node.parent != nil || node === root ? 1 : 0
        status.st_blksize = 4096
        status.st_blocks = (node.size + 511) / 512
        status.st_atim = Self.timespec(node.accessed)
        status.st_mtim = Self.timespec(node.modified)
        status.st_ctim = Self.timespec(node.changed)
        status.st_birthtim = Self.timespec(node.changed)
        return FileInfo(status)
    }

    private static func timespec(_ nanoseconds: UInt64) -> uv_timespec_t {
        uv_timespec_t(tv_sec: Int(nanoseconds / 1_000_000_000), tv_nsec: Int(nanoseconds % 1_000_000_000))
    }
}
