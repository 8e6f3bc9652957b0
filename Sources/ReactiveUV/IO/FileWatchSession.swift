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
}

/// The watches of one `FileWatch.changes` subscription, on its loop's shared inotify instance:
/// the root directory and (recursive) every subdirectory, or a watched file and its parent directory.
///
/// The kernel gives one watch descriptor per device and inode in an instance,
/// so comparing descriptors compares inodes: a directory re-created under a
/// watched name gets a new descriptor and replaces the dead watch.
final class FileWatchSession: InotifyOwner, LoopDisposable, @unchecked Sendable {
    // Loop thread only (`dispose()` hops there), except the immutable settings and the atomic `disposedFlag`.
    private enum State {
        case starting
        case watching
        /// A watched file's name is gone: a file that takes it before the timer fires is followed, else ENOENT.
        case awaitingName(timer: (any Disposable)?)
        case ended
    }

    /// What one descriptor watches for this subscription.
    private enum Role { case directory(String), file, parentOfFile }

    /// What adding a directory's watch found.
    private enum Added { case added, alreadyThere, reachedElsewhere }

    /// How long a watched file's name may stay gone (an editor's save between two renames) before the watch ends.
    static let replacementGrace: Duration = .milliseconds(100)

    let loop: EventLoop
    private let root: String
    private let recursive: Bool
    private let followSymlinks: Bool
    private var subscriber: Subscriber<FileEvent>?
    private var state = State.starting
    private var hub: InotifyHub?
    /// Every descriptor this subscription holds, with what it watches.
    private var watches: [Int32: Role] = [:]
    /// The descriptor of each watched directory, by path relative to the root ("" for the root).
    private var directories: [String: Int32] = [:]
    private var rootID: FileID?
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
            _ = try watchDirectory("")
            if recursive { try watchSubdirectories(of: "", announce: false, rescan: false) }
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

    private func watchDirectory(_ relative: String) throws(UVError) -> Added {
        let descriptor = try currentHub().addWatch(fullPath(relative), for: self, onlyDirectory: true,
                                                   followLink: relative.isEmpty || followSymlinks)
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

    /// A subdirectory's watch; nil when it is gone already or not a directory, or (reported) unreadable,
    /// or (reported) named by bytes that are not UTF-8 (`nameIsExact` false: its `String` names no file,
    /// so inotify could only answer `ENOENT`, which would read as "gone").
    private func watchSubdirectory(_ relative: String, nameIsExact: Bool) throws(UVError) -> Added? {
        guard nameIsExact else {
            emit(.notWatched, relative)
            return nil
        }
        do {
            return try watchDirectory(relative)
        } catch {
            switch error.code {
            case UV_ENOENT.rawValue, UV_ENOTDIR.rawValue, UV_ELOOP.rawValue:
                try checkRootStillAtItsPath()
                return nil  // gone, or no longer a directory: its parent's watch reports that
            case UV_EACCES.rawValue, UV_EPERM.rawValue:
                emit(.notWatched, relative)
                return nil
            default:
                throw error  // ENOSPC (the watch limit) and anything unexpected end the signal
            }
        }
    }

    /// Watches every directory below `relative`; with `announce`, reports each entry found (it may be new).
    /// With `rescan`, also looks inside directories watched already (after events were lost).
    private func watchSubdirectories(of relative: String, announce: Bool, rescan: Bool) throws(UVError) {
        let entries: [(name: String, isDirectory: Bool, nameIsExact: Bool)]
        do {
            entries = try FileSystemQuery.entries(of: fullPath(relative))
        } catch {
            switch error.code {
            case UV_ENOENT.rawValue, UV_ENOTDIR.rawValue:
                try checkRootStillAtItsPath()
                return  // gone already: its parent reports it
            case UV_EACCES.rawValue, UV_EPERM.rawValue: emit(.notWatched, relative); return
            default: throw error
            }
        }
        for entry in entries {
            guard subscriber != nil else { return }  // the subscriber may dispose while it hears of an entry
            let name = relative.isEmpty ? entry.name : relative + "/" + entry.name
            if announce { emit(.renamed, name) }
            guard subscriber != nil, isDirectoryToWatch(name, listedAsDirectory: entry.isDirectory) else { continue }
            switch try watchSubdirectory(name, nameIsExact: entry.nameIsExact) {
            case .added?: try watchSubdirectories(of: name, announce: announce, rescan: rescan)
            case .alreadyThere? where rescan: try watchSubdirectories(of: name, announce: false, rescan: true)
            default: break
            }
        }
    }

    /// Ends the watch when the root's path no longer leads to the root: a directory above it was renamed or
    /// removed, which inotify does not report (only the root's own move or deletion), so every path built
    /// from the root is wrong from then on. Checked where a subdirectory could not be found by its path (a
    /// rare failure, not each event): taken as gone, it was never watched, and its files went unreported.
    private func checkRootStillAtItsPath() throws(UVError) {
        guard let status = try? FileSystemQuery.status(of: root), FileID(status) == rootID else {
            throw UVError(code: UV_ENOENT.rawValue,
                          message: "the watched path no longer leads to the watched directory: a directory above it was renamed "
                              + "or removed (or made unsearchable), so new subdirectories could not be watched by their paths",
                          context: "watching \(root)")
        }
    }

    /// Whether the entry is a directory to watch: never through a link unless links are followed.
    private func isDirectoryToWatch(_ relative: String, listedAsDirectory: Bool) -> Bool {
        if listedAsDirectory { return true }
        guard followSymlinks else { return false }
        // A link that leads nowhere (or nowhere readable) is not a directory to watch.
        return (try? FileSystemQuery.status(of: fullPath(relative)))?.isDirectory ?? false
    }

    /// Drops the watches of `relative` and of every directory below it (deleted or moved away).
    private func dropTree(_ relative: String) {
        let prefix = relative + "/"
        for (path, descriptor) in directories where path == relative || path.hasPrefix(prefix) { forget(descriptor) }
    }

    /// Forgets a descriptor; unless the kernel dropped it already, gives up the watch.
    private func forget(_ descriptor: Int32, droppedByKernel: Bool = false) {
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
        let name = relative.isEmpty ? event.name : relative + "/" + event.name
        emit(event.has(IN_MODIFY | IN_ATTRIB) ? .changed : .renamed, name)
        guard recursive, subscriber != nil else { return }
        if event.has(IN_DELETE | IN_MOVED_FROM) {
            // A move this old can come after the name was watched again: two directories exchanged
            // (`renameat2` `RENAME_EXCHANGE`, `mv --exchange`) report "b" moved in before "b" moved out. The
            // watch added meanwhile is on what the name leads to now, and stays.
            if event.has(IN_MOVED_FROM), let descriptor = directories[name], nameStillLeads(to: descriptor, name) { return }
            dropTree(name)
        } else if event.has(IN_CREATE | IN_MOVED_TO),
                  event.has(IN_ISDIR) || isDirectoryToWatch(name, listedAsDirectory: false) {
            do {
                if case .added? = try watchSubdirectory(name, nameIsExact: event.nameIsExact) {
                    try watchSubdirectories(of: name, announce: true, rescan: false)
                }
            } catch {
                fail(error)
            }
        }
    }

    /// Whether `relative` still names the directory watched by `descriptor` (a watch of the path now gives that
    /// descriptor back). A watch this added on another directory is given up again: that directory's own event adds it.
    private func nameStillLeads(to descriptor: Int32, _ relative: String) -> Bool {
        guard let hub, hub.isHandleOpen,
              let current = try? hub.addWatch(fullPath(relative), for: self, onlyDirectory: true, followLink: followSymlinks) else {
            return false
        }
        if current == descriptor { return true }
        if watches[current] == nil { hub.removeWatch(current, for: self) }
        return false
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
                do { try watchSubdirectories(of: "", announce: false, rescan: true) } catch { fail(error); return }
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

    private func emit(_ kind: FileEvent.Kind, _ name: String) {
        let path = !rootIsDirectory || name == "." ? root : fullPath(name)
        subscriber?.sendNext(FileEvent(kind: kind, name: name, path: path))
    }

    // MARK: - Paths

    private func fullPath(_ relative: String) -> String {
        relative.isEmpty ? root : (root == "/" ? "/" : root + "/") + relative
    }

    private func lastComponent(_ path: String) -> String {
        path.split(separator: "/").last.map(String.init) ?? path
    }

    private func parentPath(_ path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    // MARK: - Ending

    private func fail(_ error: any Error) {
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
