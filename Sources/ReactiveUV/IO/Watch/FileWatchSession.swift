internal import CLibUV
import Synchronization

/// A file's identity: with one device, one inode number names one file.
struct FileID: Hashable {
    let device: UInt64
    let inode: UInt64

    init(_ status: FileStatus) {
        device = status.device
        inode = status.inode
    }

    init(device: UInt64, inode: UInt64) {
        self.device = device
        self.inode = inode
    }
}

/// The watches of one `FileWatch.changes` subscription, on its loop's shared inotify instance:
/// the root directory and (recursive) every subdirectory, or a watched file and its parent directory.
///
/// The kernel gives one watch descriptor per device and inode in an instance,
/// so comparing descriptors compares inodes: a directory re-created under a
/// watched name gets a new descriptor and replaces the dead watch.
final class FileWatchSession: InotifyOwner, LoopDisposable, @unchecked Sendable {
    // Loop thread only (`dispose()` hops there), except the immutable settings and the atomic `disposedFlag`.
    // What FileWatchSession+Tree.swift uses is internal, not private.
    private enum State {
        case starting
        case watching
        /// A watched file's name is gone: a file that takes it before the timer fires is followed, else ENOENT.
        case awaitingName(timer: (any Disposable)?)
        case ended
    }

    /// What one descriptor watches for this subscription.
    enum Role { case directory(String), file, parentOfFile }

    /// What adding a directory's watch found.
    enum Added { case added, alreadyThere, reachedElsewhere }

    /// How long a watched file's name may stay gone (an editor's save between two renames) before the watch ends.
    static let replacementGrace: Duration = .milliseconds(100)

    let loop: EventLoop
    let root: String
    let recursive: Bool
    let followSymlinks: Bool
    var subscriber: Subscriber<FileEvent>?
    private var state = State.starting
    var hub: InotifyHub?
    /// Every descriptor this subscription holds, with what it watches.
    var watches: [Int32: Role] = [:]
    /// The descriptor of each watched directory, by path relative to the root ("" for the root).
    var directories: [String: Int32] = [:]
    var rootID: FileID?
    /// The root directory's subdirectories, opened from it (a recursive watch of a directory).
    var tree: WatchedTree?
    private var rootIsDirectory = false
    /// For a watched file: the descriptor and identity of the file that has the name now.
    private var file: (descriptor: Int32, id: FileID)?
    let disposedFlag = Atomic<Bool>(false)

    init(loop: EventLoop, root: String, recursive: Bool, followSymlinks: Bool, subscriber: Subscriber<FileEvent>) {
        self.loop = loop
        self.followSymlinks = followSymlinks
        var root = root
        while root.count > 1 && root.hasSuffix("/") { root.removeLast() }
        self.root = root
        self.recursive = recursive
        self.subscriber = subscriber
    }

    func start() throws(UVError) {
        let status = try FileSystemQuery.status(of: root)
        rootID = FileID(status)
        rootIsDirectory = status.isDirectory
        if rootIsDirectory {
            _ = try watchDirectory("", open: nil)
            if recursive {
                tree = WatchedTree(root: root, rootID: FileID(status), followsLinks: followSymlinks)
                try watchSubdirectories(of: "", in: nil, announce: false, rescan: false)
            }
        } else {
            try watchFile(status)
            try watchParentOfFile()
        }
        if case .starting = state { state = .watching }
    }

    // MARK: - Adding and dropping watches

    private func currentHub() throws(UVError) -> InotifyHub {
        if let hub, hub.isHandleOpen { return hub }
        let hub = try InotifyHub.shared(on: loop)
        self.hub = hub
        return hub
    }

    /// Watches the directory `relative`: the root by its path, a subdirectory through its open descriptor.
    func watchDirectory(_ relative: String, open directory: Int32?) throws(UVError) -> Added {
        let hub = try currentHub()
        let descriptor = if let directory {
            try hub.addWatch(directory: directory, named: fullPath(relative), for: self)
        } else {
            try hub.addWatch(fullPath(relative), for: self, onlyDirectory: true, followLink: true)
        }
        if case .directory(let watchedAs)? = watches[descriptor] {
            // Same device and inode: watched already, under this name or (through a link, a cycle) another.
            return watchedAs == relative ? .alreadyThere : .reachedElsewhere
        }
        // Another inode under a watched name (deleted and made again): the old watch is dead.
        if let stale = directories[relative] { forget(stale) }
        watches[descriptor] = .directory(relative)
        directories[relative] = descriptor
        return .added
    }

    /// Forgets a descriptor; unless the kernel dropped it already, gives up the watch.
    func forget(_ descriptor: Int32, droppedByKernel: Bool = false) {
        guard let role = watches.removeValue(forKey: descriptor) else { return }
        if case .directory(let path) = role, directories[path] == descriptor { directories[path] = nil }
        if case .file = role, file?.descriptor == descriptor { file = nil }
        if !droppedByKernel { hub?.removeWatch(descriptor, for: self) }
    }

    // MARK: - A watched file, followed by name

    private var fileName: String { lastComponent(root) }

    private func watchFile(_ status: FileStatus) throws(UVError) {
        let descriptor = try currentHub().addWatch(root, for: self, onlyDirectory: false, followLink: true)
        if let old = file, old.descriptor != descriptor { forget(old.descriptor) }
        watches[descriptor] = .file
        file = (descriptor, FileID(status))
    }

    /// Watches the directory holding the file's name, to see another file take the name.
    /// Without it (the directory is not readable) the file's own events still show a replacement.
    private func watchParentOfFile() throws(UVError) {
        guard !watches.values.contains(where: { if case .parentOfFile = $0 { true } else { false } }) else { return }
        let parent = parentPath(root)
        do {
            let descriptor = try currentHub().addWatch(parent, for: self, onlyDirectory: true, followLink: true)
            if watches[descriptor] == nil { watches[descriptor] = .parentOfFile }
        } catch {
            guard error.code != UV_ENOSPC.rawValue else { throw error }
        }
    }

    /// Looks at what the name leads to now: the same file (nothing to do), another file (followed and
    /// reported as `.renamed`), or nothing (reported, and the watch ends unless a file takes the name soon).
    private func checkName() {
        guard subscriber != nil else { return }
        let status: FileStatus
        do {
            status = try FileSystemQuery.status(of: root)
        } catch {
            if error.code == UV_ENOENT.rawValue || error.code == UV_ENOTDIR.rawValue { nameWentAway() } else { fail(error) }
            return
        }
        if let file, file.id == FileID(status) { return }
        guard !status.isDirectory else {
            fail(UVError(code: UV_EISDIR.rawValue, message: "the watched file was replaced by a directory",
                         context: "watching \(root)"))
            return
        }
        do {
            try watchFile(status)
            try watchParentOfFile()
        } catch {
            fail(error)
            return
        }
        if case .awaitingName(let timer) = state { timer?.dispose() }
        state = .watching
        emit(.renamed, fileName)
    }

    private func nameWentAway() {
        // The old file may live on under another name: its events are no longer about this name.
        if let file { forget(file.descriptor) }
        guard case .watching = state else { return }
        emit(.renamed, fileName)
        guard subscriber != nil else { return }
        let shutDown = EventLoopError.shutDown(loop: loop.name)
        guard let timer = loop.scheduleTimer(after: Self.replacementGrace, onShutdown: { [self] in fail(shutDown) },
                                             { [self] in replacementGraceEnded() }) else {
            fail(shutDown)
            return
        }
        state = .awaitingName(timer: timer)
    }

    private func replacementGraceEnded() {
        guard case .awaitingName = state else { return }
        state = .awaitingName(timer: nil)
        checkName()
        if case .awaitingName = state {
            fail(UVError(code: UV_ENOENT.rawValue,
                         message: "the watched file was deleted or moved away and no file took its name within \(Self.replacementGrace)",
                         context: "watching \(root)"))
        }
    }

    // MARK: - Events

    func inotify(_ event: InotifyEvent) {
        guard subscriber != nil, let role = watches[event.descriptor] else { return }
        if event.has(IN_IGNORED) { forget(event.descriptor, droppedByKernel: true) }
        switch role {
        case .directory(let relative): directoryEvent(event, in: relative, descriptor: event.descriptor)
        case .file: fileEvent(event)
        case .parentOfFile: parentEvent(event)
        }
    }

    private func directoryEvent(_ event: InotifyEvent, in relative: String, descriptor: Int32) {
        guard !event.name.isEmpty else {
            // About the watched directory itself (inotify gives no name).
            if relative.isEmpty {
                if event.has(IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED) {
                    rootWentAway()
                } else if event.has(IN_ATTRIB | IN_MODIFY) {
                    emit(.changed, ".")
                }
            } else if event.has(IN_DELETE_SELF) {
                // A subdirectory's own events are reported by its parent's watch, by name; a deleted one's
                // watch is dead. (A moved one is dropped, with all below it, on its parent's IN_MOVED_FROM.)
                forget(descriptor)
            }
            return
        }
        let name = entryName(event.name, in: relative)
        emit(event.has(IN_MODIFY | IN_ATTRIB) ? .changed : .renamed, name)
        guard recursive, subscriber != nil else { return }
        if event.has(IN_DELETE | IN_MOVED_FROM) {
            entryLeft(name, event)
        } else if event.has(IN_CREATE | IN_MOVED_TO) {
            do { try entryArrived(name, event) } catch { fail(error) }
        }
    }

    private func fileEvent(_ event: InotifyEvent) {
        if event.has(IN_MODIFY | IN_ATTRIB) { emit(.changed, fileName) }
        // A link count change (IN_ATTRIB), deletion or move: the name may lead elsewhere now.
        if event.has(IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED) { checkName() }
    }

    private func parentEvent(_ event: InotifyEvent) {
        if event.name.isEmpty {
            guard event.has(IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED) else { return }
            // The directory holding the name was deleted or moved: watch whatever the name leads to now.
            if let descriptor = watches.first(where: { if case .parentOfFile = $0.value { true } else { false } })?.key {
                forget(descriptor)
            }
            checkName()
        } else if event.name == fileName, event.has(IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM) {
            checkName()
        }
    }

    func inotifyOverflowed() {
        guard subscriber != nil else { return }
        if rootIsDirectory {
            // Deletions and creations may be among the lost: make sure the root is still the root, then take in
            // every directory made meanwhile, so that every change after the notice is reported.
            do {
                guard try FileID(FileSystemQuery.status(of: root)) == rootID else { rootWentAway(); return }
            } catch {
                if error.code == UV_ENOENT.rawValue || error.code == UV_ENOTDIR.rawValue { rootWentAway() } else { fail(error) }
                return
            }
            if recursive {
                do { try watchSubdirectories(of: "", in: nil, announce: false, rescan: true) } catch { fail(error); return }
            }
        } else {
            checkName()
        }
        guard subscriber != nil else { return }
        emit(.eventsLost, rootIsDirectory ? "." : fileName)
    }

    func inotifyEnded(_ error: any Error) {
        fail(error)
    }

    /// The watched directory itself was deleted or moved away: the kernel dropped the watch, so the signal ends.
    private func rootWentAway() {
        fail(UVError(code: UV_ENOENT.rawValue, message: "the watched path was deleted or moved away",
                     context: "watching \(root)"))
    }

    func emit(_ kind: FileEvent.Kind, _ name: String) {
        let path = !rootIsDirectory || name == "." ? root : fullPath(name)
        subscriber?.sendNext(FileEvent(kind: kind, name: name, path: path))
    }

    /// An entry renamed within the watched directory (or tree): one event with both names.
    func emitMove(from oldName: String, to name: String) {
        subscriber?.sendNext(FileEvent(kind: .moved, name: name, path: fullPath(name), oldName: oldName, oldPath: fullPath(oldName)))
    }

    // MARK: - Paths

    /// The path relative to the root of the entry `name` of the watched directory `relative`.
    func entryName(_ name: String, in relative: String) -> String {
        relative.isEmpty ? name : relative + "/" + name
    }

    func fullPath(_ relative: String) -> String {
        relative.isEmpty ? root : (root == "/" ? "/" : root + "/") + relative
    }

    func lastComponent(_ path: String) -> String {
        path.split(separator: "/").last.map(String.init) ?? path
    }

    private func parentPath(_ path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    // MARK: - Ending

    func fail(_ error: any Error) {
        closeAll()?.sendError(error)
    }

    /// Removes every watch and lets go of the subscriber, which it returns (to be told why, or not).
    @discardableResult
    private func closeAll() -> Subscriber<FileEvent>? {
        let subscriber = self.subscriber
        self.subscriber = nil
        if case .awaitingName(let timer) = state { timer?.dispose() }
        state = .ended
        let open = Array(watches.keys)
        watches.removeAll()
        directories.removeAll()
        file = nil
        if let hub {
            for descriptor in open { hub.removeWatch(descriptor, for: self) }
            hub.closeIfUnused()
        }
        hub = nil
        return subscriber
    }

    func abandon() {
        closeAll()
    }
}
