import Synchronization

/// `FileWatch.changes` of a directory on a simulated loop: the in-memory tree tells it each change
/// to the directory's entries, and it sends the event inotify would give, as a callback of its loop.
/// Only a directory, not recursive: other watches are refused with `ENOTSUP`.
///
/// Thread rule: loop thread only (the simulation's driving thread), except `dispose()` and `disposedFlag`.
final class SimulatedDirectoryWatch: LoopDisposable, @unchecked Sendable {
    // Sendable: every stored var is touched on the loop thread only (dispose() hops there).
    let loop: EventLoop
    let disposedFlag = Atomic<Bool>(false)
    private let root: String
    private var subscriber: Subscriber<FileEvent>?
    private var unregister: (() -> Void)?
    private var shutdownToken: (any Disposable)?

    private init(loop: EventLoop, root: String, subscriber: Subscriber<FileEvent>) {
        self.loop = loop
        self.root = root
        self.subscriber = subscriber
    }

    /// Watches the directory at `root` in `files`, or fails the subscriber (`ENOENT`, `ENOTDIR`...;
    /// `ENOTSUP` for a recursive watch or a watched file).
    static func open(_ root: String, recursive: Bool, files: SimulatedFileSystem?, loop: EventLoop,
                     subscriber: Subscriber<FileEvent>) -> (any Disposable)? {
        let context = "FileWatch.changes \(root)"
        do throws(UVError) {
            guard let files else { throw loop.simulationRefusal("Watch", what: "a watch without a simulated file system") }
            if recursive { throw loop.simulationRefusal("Watch", what: "a recursive watch") }
            let node = try files.existing(root, followLast: true, context: context)
            guard case .directory = node.content else { throw loop.simulationRefusal("Watch", what: "the watch of a file") }
            let watch = SimulatedDirectoryWatch(loop: loop, root: root, subscriber: subscriber)
            watch.unregister = files.watch(node) { [weak watch] kind, name, oldName in watch?.post(kind, name, oldName) }
            watch.shutdownToken = loop.shutdownObservers.add { [weak watch] in watch?.end(EventLoopError.shutDown(loop: loop.name)) }
            return watch
        } catch {
            subscriber.sendError(error)
            return nil
        }
    }

    /// A change the tree made: sent as a callback of the loop, after the call that made it.
    private func post(_ kind: FileEvent.Kind, _ name: String, _ oldName: String?) {
        let base = root.hasSuffix("/") ? root : root + "/"
        let event = FileEvent(kind: kind, name: name, path: base + name, oldName: oldName, oldPath: oldName.map { base + $0 })
        loop.execute { [self] in
            if disposedFlag.load(ordering: .acquiring) { return }
            subscriber?.sendNext(event)
        }
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
