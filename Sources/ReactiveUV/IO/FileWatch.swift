internal import CLibUV
import Synchronization

/// One change reported by a file watch.
///
/// Thread rule: a value type; safe from any thread.
public struct FileEvent: Sendable, Hashable, CustomStringConvertible {
    /// What happened, in libuv's two kinds.
    public enum Kind: Sendable, Hashable {
        /// The contents or attributes changed.
        case changed
        /// An entry appeared, disappeared or was renamed (creation and deletion are reported as renames).
        case renamed
    }

    /// The kind of change.
    public let kind: Kind
    /// The entry's path relative to the watched directory ("a.txt", or "sub/a.txt" in a recursive watch);
    /// for a watched file, its file name.
    public let name: String
    /// The watched path the event belongs to plus `name` (for a watched file, the file's path).
    public let path: String

    /// Creates an event.
    ///
    /// - Parameters:
    ///   - kind: What happened.
    ///   - name: The entry, relative to the watched directory.
    ///   - path: The full path.
    /// - Returns: The event.
    ///
    /// Thread rule: safe from any thread.
    public init(kind: Kind, name: String, path: String) {
        self.kind = kind
        self.name = name
        self.path = path
    }

    /// `"renamed sub/a.txt"`.
    ///
    /// Thread rule: safe from any thread.
    public var description: String { "\(kind) \(name)" }
}

/// File and directory watching on libuv (`uv_fs_event` on inotify, `uv_fs_poll` on stat).
///
/// Thread rule: safe from any thread.
public enum FileWatch {
    /// Sends an event for each change to the file at `path`, or to the entries of the directory at `path`.
    ///
    /// The watch starts when a subscriber arrives and stops when the
    /// subscription is disposed; the signal never completes on its own. A path
    /// that does not exist or cannot be read ends the signal with a `UVError`
    /// (`ENOENT`, `EACCES`, `ENOTDIR`...). Linux reports a creation or deletion
    /// as `.renamed`, and a write as `.changed` (often several per write).
    ///
    /// `recursive: true` also watches every subdirectory, following new ones
    /// as they appear (Linux has no recursive inotify, so ReactiveUV opens one
    /// watch per directory). Entries found in a directory when its watch is
    /// added are reported as `.renamed`, so a file made in a new directory
    /// before its watch existed is not missed (an entry may then be reported
    /// twice). Subdirectories that cannot be read are skipped.
    ///
    /// A recursive watch does not follow symbolic links: a link to a directory
    /// (inside the tree or out of it) is reported as an entry, but what it
    /// points to is not watched, so a link cannot widen the watch beyond the
    /// tree. Pass `followSymlinks: true` to watch linked directories too; each
    /// directory (by device and inode) is then watched once, so a link cycle
    /// ends instead of recursing.
    ///
    /// If the watched file or directory itself is deleted or moved away, the
    /// signal ends with `ENOENT` (the kernel drops the watch, so nothing more
    /// could be reported).
    ///
    /// - Parameters:
    ///   - path: A file or directory.
    ///   - recursive: Also watch subdirectories (only meaningful for a directory).
    ///   - followSymlinks: With `recursive`, also watch directories reached through symbolic links.
    ///   - loop: The loop that watches; nil for the subscription's home loop.
    /// - Returns: A signal of changes.
    ///
    /// Thread rule: safe from any thread.
    public static func changes(at path: String, recursive: Bool = false, followSymlinks: Bool = false,
                               on loop: EventLoop? = nil) -> Signal<FileEvent> {
        Signal { subscriber in
            LoopBinding.open(on: loop, for: subscriber, what: "FileWatch.changes") { loop in
                let session = FileWatchSession(loop: loop, root: path, recursive: recursive, followSymlinks: followSymlinks,
                                               subscriber: subscriber)
                do {
                    try session.start()
                } catch {
                    session.dispose()
                    subscriber.sendError(error)
                    return nil
                }
                return session
            }
        }.debugNamed("+FileWatch.changes(\(path))")
    }
}

/// The watches of one `FileWatch.changes` subscription: one for a file or a
/// plain directory, one per directory of the tree for a recursive watch.
final class FileWatchSession: Disposable, @unchecked Sendable {
    // Loop thread only (`dispose()` hops there), except the immutable settings and the atomic `disposed`.
    private let loop: EventLoop
    private let root: String
    private let recursive: Bool
    private let followSymlinks: Bool
    private var subscriber: Subscriber<FileEvent>?
    /// Open watches by directory path relative to the root ("" for the root itself).
    private var watches: [String: FileEventHandle] = [:]
    /// The directories watched, by (device, inode), when links are followed (a cycle must end).
    private var watchedFiles: [String: FileID] = [:]
    private struct FileID: Hashable { let device: UInt64, inode: UInt64 }
    private var rootIsDirectory = false
    private let disposed = Atomic<Bool>(false)

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
        rootIsDirectory = try FileSystemQuery.status(of: root).isDirectory
        try addWatch("")
        if recursive && rootIsDirectory { addSubdirectories(of: "", announce: false) }
    }

    private func fullPath(_ relative: String) -> String {
        relative.isEmpty ? root : (root == "/" ? "/" : root + "/") + relative
    }

    private func addWatch(_ relative: String) throws(UVError) {
        var id: FileID?
        if followSymlinks {
            let status = try FileSystemQuery.status(of: fullPath(relative))
            id = FileID(device: status.device, inode: status.inode)
            // Reached again through a link (possibly a cycle): already watched.
            if watchedFiles.values.contains(id!) { throw UVError(code: UV_EEXIST.rawValue, context: "watch \(fullPath(relative))") }
        }
        let handle = FileEventHandle(loop: loop, session: self, directory: relative)
        try handle.start(path: fullPath(relative))
        watches[relative] = handle
        if let id { watchedFiles[relative] = id }
    }

    /// Whether the entry is a directory to watch: never through a link unless links are followed.
    private func isDirectoryToWatch(_ relative: String, listedAsDirectory: Bool) -> Bool {
        if listedAsDirectory { return true }
        guard followSymlinks else { return false }
        return (try? FileSystemQuery.status(of: fullPath(relative)))?.isDirectory ?? false
    }

    /// Watches every directory below `relative`; with `announce`, reports each entry found (it may be new).
    private func addSubdirectories(of relative: String, announce: Bool) {
        guard let entries = try? FileSystemQuery.entries(of: fullPath(relative)) else { return }
        for entry in entries {
            let name = relative.isEmpty ? entry.name : relative + "/" + entry.name
            if announce { emit(.renamed, name) }
            guard watches[name] == nil, isDirectoryToWatch(name, listedAsDirectory: entry.isDirectory) else { continue }
            // A subdirectory that cannot be watched (unreadable, gone already) is skipped.
            if (try? addWatch(name)) != nil { addSubdirectories(of: name, announce: announce) }
        }
    }

    fileprivate func handleEvent(from handle: FileEventHandle, filename: String?, events: Int32, status: Int32) {
        guard subscriber != nil else { return }
        if status < 0 {
            fail(UVError(code: status, context: "watching \(fullPath(handle.directory))"))
            return
        }
        let kind: FileEvent.Kind = events & Int32(UV_RENAME.rawValue) != 0 ? .renamed : .changed
        guard rootIsDirectory else {
            // A watched file: libuv names the file itself.
            subscriber?.sendNext(FileEvent(kind: kind, name: filename ?? lastComponent(root), path: root))
            if kind == .renamed && (try? FileSystemQuery.status(of: root, followLinks: false)) == nil { rootWentAway() }
            return
        }
        guard let filename, !filename.isEmpty else { return }
        let directory = handle.directory
        if directory.isEmpty && kind == .renamed && filename == lastComponent(root)
            && (try? FileSystemQuery.status(of: root, followLinks: false)) == nil {
            rootWentAway()
            return
        }
        let name = directory.isEmpty ? filename : directory + "/" + filename
        if !directory.isEmpty && filename == lastComponent(directory)
            && (try? FileSystemQuery.status(of: fullPath(name), followLinks: false)) == nil {
            // libuv names a watched directory's own deletion or move after the directory;
            // the parent's watch reports it under the right name.
            return
        }
        emit(kind, name)
        if recursive && kind == .renamed { follow(name) }
    }

    /// The watched path itself was deleted or moved: the kernel dropped the watch, so the signal ends.
    private func rootWentAway() {
        fail(UVError(code: UV_ENOENT.rawValue, message: "the watched path was deleted or moved away",
                     context: "watching \(root)"))
    }

    /// After an entry appeared or vanished: watch it if it is a new directory, forget it if it is gone.
    private func follow(_ name: String) {
        let status = try? FileSystemQuery.status(of: fullPath(name), followLinks: followSymlinks)
        if let status, status.isDirectory {
            guard watches[name] == nil, (try? addWatch(name)) != nil else { return }
            addSubdirectories(of: name, announce: true)
        } else if status == nil {
            let prefix = name + "/"
            for key in Array(watches.keys) where key == name || key.hasPrefix(prefix) {
                watches.removeValue(forKey: key)?.close()
                watchedFiles[key] = nil
            }
        }
    }

    private func emit(_ kind: FileEvent.Kind, _ name: String) {
        subscriber?.sendNext(FileEvent(kind: kind, name: name, path: fullPath(name)))
    }

    private func lastComponent(_ path: String) -> String {
        path.split(separator: "/").last.map(String.init) ?? path
    }

    private func fail(_ error: any Error) {
        let subscriber = self.subscriber
        closeAll()
        subscriber?.sendError(error)
    }

    private func closeAll() {
        subscriber = nil
        let open = watches.values
        watches.removeAll()
        watchedFiles.removeAll()
        for handle in open { handle.close() }
    }

    /// A watch's `closeForShutdown`: the subscriber learns the loop went away; every watch closes.
    fileprivate func shutDown() {
        fail(EventLoopError.shutDown(loop: loop.name))
    }

    func dispose() {
        guard !disposed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        if loop.inEventLoop {
            closeAll()
        } else {
            // After shutdown every watch is already closed, so a refused hop loses nothing.
            _ = loop.enqueue { [self] in closeAll() }
        }
    }

    var isDisposed: Bool { disposed.load(ordering: .acquiring) }
}

/// One `uv_fs_event_t` watching one file or directory.
final class FileEventHandle: LoopHandle {
    // Loop thread only. The session and its open watches reference each other until
    // the session closes them all (on disposal, failure or shutdown).
    let session: FileWatchSession
    /// The watched directory relative to the session's root ("" for the root).
    let directory: String
    private var path = ""

    init(loop: EventLoop, session: FileWatchSession, directory: String) {
        self.session = session
        self.directory = directory
        super.init(loop: loop, byteCount: uv_handle_size(UV_FS_EVENT))
    }

    override var label: String { "fs_event on \(path) from FileWatch.changes" }

    func start(path: String) throws(UVError) {
        self.path = path
        let handle = pointer(as: uv_fs_event_t.self)
        try uvCheck(uv_fs_event_init(loop.uvLoop, handle), "uv_fs_event_init")
        didOpen()
        do {
            try uvCheck(uv_fs_event_start(handle, fileEventCallback, path, 0), "watch \(path)")
        } catch {
            close()
            throw error
        }
    }

    override func willClose() {
        uvCheckReporting(uv_fs_event_stop(pointer(as: uv_fs_event_t.self)), "uv_fs_event_stop")
    }

    override func closeForShutdown() {
        session.shutDown()
        close()
    }

    fileprivate func deliver(filename: UnsafePointer<CChar>?, events: Int32, status: Int32) {
        session.handleEvent(from: self, filename: filename.map { String(cString: $0) }, events: events, status: status)
    }
}

private let fileEventCallback: uv_fs_event_cb = { handle, filename, events, status in
    guard let data = handle?.pointee.data else { return }
    Unmanaged<FileEventHandle>.fromOpaque(data).takeUnretainedValue().deliver(filename: filename, events: events, status: status)
}
