internal import CLibUV
import Synchronization

/// `FileWatch.changes` of a directory on a simulated loop: the in-memory tree tells it each change
/// to the directory's entries, and it sends the event inotify would give, as a callback of its loop.
/// A recursive watch is `SimulatedTreeWatch`'s; a file is watched by `SimulatedFileWatch`. Like the real
/// watch it ends with `ENOENT` when the directory is deleted or moved away, and an armed overflow
/// (`SimulationFault.watchOverflow`) loses one event and sends `.eventsLost` in its place.
///
/// Thread rule: loop thread only (the simulation's driving thread), except `dispose()` and `disposedFlag`.
final class SimulatedDirectoryWatch: LoopDisposable, @unchecked Sendable {
    // Sendable: every stored var is touched on the loop thread only (dispose() hops there).
    let loop: EventLoop
    let disposedFlag = Atomic<Bool>(false)
    private let root: String
    private let files: SimulatedFileSystem
    private var subscriber: Subscriber<FileEvent>?
    private var unregister: (() -> Void)?
    private var shutdownToken: (any Disposable)?

    private init(loop: EventLoop, root: String, files: SimulatedFileSystem, subscriber: Subscriber<FileEvent>) {
        self.loop = loop
        self.root = root
        self.files = files
        self.subscriber = subscriber
    }

    /// Watches the directory (or, through `SimulatedFileWatch`, the file; recursively, through
    /// `SimulatedTreeWatch`, the tree) at `root` in `files`, or fails the subscriber (`ENOENT`, `ENOTDIR`...;
    /// `ENOTSUP` for a recursive watch that follows links).
    static func open(_ root: String, recursive: Bool, followSymlinks: Bool = false, files: SimulatedFileSystem?, loop: EventLoop,
                     subscriber: Subscriber<FileEvent>) -> (any Disposable)? {
        let context = "FileWatch.changes \(root)"
        do throws(UVError) {
            guard let files else { throw loop.simulationRefusal("Watch", what: "a watch without a simulated file system") }
            if recursive && followSymlinks { throw loop.simulationRefusal("Watch", what: "a recursive watch following symbolic links") }
            let node = try files.existing(root, followLast: true, context: context)
            guard case .directory = node.content else {
                return SimulatedFileWatch.open(root, node: node, files: files, loop: loop, subscriber: subscriber)
            }
            if recursive { return SimulatedTreeWatch.open(root, node: node, files: files, loop: loop, subscriber: subscriber) }
            let watch = SimulatedDirectoryWatch(loop: loop, root: root, files: files, subscriber: subscriber)
            watch.unregister = files.watch(node) { [weak watch] kind, name, oldName in watch?.post(kind, name, oldName) }
            watch.shutdownToken = loop.shutdownObservers.add { [weak watch] in watch?.end(EventLoopError.shutDown(loop: loop.name)) }
            return watch
        } catch {
            subscriber.sendError(error)
            return nil
        }
    }

    /// A change the tree made: sent as a callback of the loop, after the call that made it. A change to the
    /// directory itself has the name "": `.changed` is reported as ".", `.renamed` (it left its name) ends the watch.
    private func post(_ kind: FileEvent.Kind, _ name: String, _ oldName: String?) {
        let base = root.hasSuffix("/") ? root : root + "/"
        let overflowed = files.overflows(root)
        let gone = name.isEmpty && kind == .renamed
        loop.execute { [self] in
            if disposedFlag.load(ordering: .acquiring) || subscriber == nil { return }
            if gone { return end(Self.rootWentAway(root)) }
            if overflowed {
                // As the real watch: the root is looked at again, then the notice; the event itself is lost.
                subscriber?.sendNext(FileEvent(kind: .eventsLost, name: ".", path: root))
                return
            }
            if name.isEmpty {
                subscriber?.sendNext(FileEvent(kind: .changed, name: ".", path: root))
            } else {
                subscriber?.sendNext(FileEvent(kind: kind, name: name, path: base + name, oldName: oldName,
                                               oldPath: oldName.map { base + $0 }))
            }
        }
    }

    /// The real watch's error when the watched directory is deleted or moved away.
    static func rootWentAway(_ root: String) -> UVError {
        UVError(code: UV_ENOENT.rawValue, message: "the watched path was deleted or moved away", context: "watching \(root)")
    }

    private func end(_ error: any Error) {
        let ending = subscriber.take()
        abandon()
        ending?.sendError(error)
    }

    func abandon() {
        disposedFlag.store(true, ordering: .releasing)
        subscriber = nil
        unregister.take()?()
        shutdownToken.take()?.dispose()
    }
}
