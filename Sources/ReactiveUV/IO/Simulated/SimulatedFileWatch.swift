internal import CLibUV
import Synchronization

/// `FileWatch.changes` of a file on a simulated loop, following its name as the real watch does
/// (`FileWatchSession`): the file's writes and attribute changes are `.changed`; another file taking
/// the name (a rotation, an editor's save) is `.renamed` and followed from then on; a name deleted or
/// moved away is `.renamed`, and the watch ends with `ENOENT` unless a file takes the name within
/// `FileWatchSession.replacementGrace` (virtual time); a directory taking it ends the watch with
/// `EISDIR`. An armed overflow (`SimulationFault.watchOverflow`) loses one event: the name is looked
/// at again, then `.eventsLost` is sent.
///
/// Thread rule: loop thread only (the simulation's driving thread), except `dispose()` and `disposedFlag`.
final class SimulatedFileWatch: LoopDisposable, @unchecked Sendable {
    // Sendable: every stored var is touched on the loop thread only (dispose() hops there).

    /// What the watch does now: follows a file, or waits for the name to name one again.
    private enum State {
        case watching(SimulatedFileSystem.Node)
        case awaitingName(timer: (any Disposable)?)
        case ended
    }

    let loop: EventLoop
    let disposedFlag = Atomic<Bool>(false)
    private let root: String
    private let fileName: String
    private let files: SimulatedFileSystem
    private var state: State
    private var subscriber: Subscriber<FileEvent>?
    private var unregisterFile: (() -> Void)?
    private var unregisterParent: (() -> Void)?
    private var shutdownToken: (any Disposable)?

    private init(loop: EventLoop, root: String, files: SimulatedFileSystem, node: SimulatedFileSystem.Node,
                 subscriber: Subscriber<FileEvent>) {
        self.loop = loop
        self.root = root
        self.files = files
        fileName = root.split(separator: "/").last.map(String.init) ?? root
        state = .watching(node)
        self.subscriber = subscriber
    }

    /// Watches the file `node` that `root` names.
    static func open(_ root: String, node: SimulatedFileSystem.Node, files: SimulatedFileSystem, loop: EventLoop,
                     subscriber: Subscriber<FileEvent>) -> any Disposable {
        let watch = SimulatedFileWatch(loop: loop, root: root, files: files, node: node, subscriber: subscriber)
        watch.follow(node)
        watch.shutdownToken = loop.shutdownObservers.add { [weak watch] in watch?.end(EventLoopError.shutDown(loop: loop.name)) }
        return watch
    }

    /// Hears `node`'s own changes and its directory's changes to the name.
    private func follow(_ node: SimulatedFileSystem.Node) {
        unregisterFile.take()?()
        unregisterFile = files.watch(node) { [weak self] kind, name, _ in
            guard name.isEmpty else { return }
            self?.post(kind == .changed ? .changed : nil)
        }
        unregisterParent.take()?()
        // The directory of the name (a link's, not its target's): where another file takes the name.
        if let parent = try? files.locate(root, followLast: false, context: "").parent {
            unregisterParent = files.watch(parent) { [weak self] kind, name, oldName in
                guard let self else { return }
                // The name came or went, or the directory itself did: only the name can tell what the file is now.
                // (A write's `.changed` here is the file's own, heard on the file.)
                if kind != .changed && (name.isEmpty || name == fileName || oldName == fileName) { post(nil) }
            }
        }
    }

    /// A change the tree made, handled as a callback of the loop after the call that made it: `.changed`
    /// is sent, then (for every change) the name is looked at.
    private func post(_ kind: FileEvent.Kind?) {
        let overflowed = files.overflows(root)
        loop.execute { [self] in
            guard !disposedFlag.load(ordering: .acquiring), subscriber != nil else { return }
            if overflowed {
                checkName()
                return emit(.eventsLost)
            }
            if let kind, case .watching = state { emit(kind) }
            checkName()
        }
    }

    /// Looks at what the name leads to now: the same file, another file (followed, `.renamed`), a directory
    /// (`EISDIR`), or nothing (`.renamed`, then the grace period).
    private func checkName() {
        let found: SimulatedFileSystem.Node?
        do throws(UVError) {
            found = try files.locate(root, followLast: true, context: "watching \(root)").node
        } catch {
            if error.code == UV_ENOENT.rawValue || error.code == UV_ENOTDIR.rawValue { return nameWentAway() }
            return end(error)
        }
        guard let found else { return nameWentAway() }
        if case .watching(let node) = state, node === found { return }
        if case .directory = found.content {
            return end(UVError(code: UV_EISDIR.rawValue, message: "the watched file was replaced by a directory", context: "watching \(root)"))
        }
        if case .awaitingName(let timer) = state { timer?.dispose() }
        state = .watching(found)
        follow(found)
        emit(.renamed)
    }

    private func nameWentAway() {
        guard case .watching = state else { return }
        // The old file may live on under another name: its events are no longer about this one.
        unregisterFile.take()?()
        emit(.renamed)
        guard subscriber != nil else { return }
        let shutDown = EventLoopError.shutDown(loop: loop.name)
        guard let timer = loop.scheduleTimer(after: FileWatchSession.replacementGrace, onShutdown: { [weak self] in self?.end(shutDown) },
                                             { [weak self] in self?.graceEnded() }) else {
            return end(shutDown)
        }
        state = .awaitingName(timer: timer)
    }

    private func graceEnded() {
        guard case .awaitingName = state, subscriber != nil else { return }
        state = .awaitingName(timer: nil)
        checkName()
        if case .awaitingName = state {
            end(UVError(code: UV_ENOENT.rawValue,
                        message: "the watched file was deleted or moved away and no file took its name within \(FileWatchSession.replacementGrace)",
                        context: "watching \(root)"))
        }
    }

    private func emit(_ kind: FileEvent.Kind) {
        subscriber?.sendNext(FileEvent(kind: kind, name: fileName, path: root))
    }

    private func end(_ error: any Error) {
        let ending = subscriber.take()
        abandon()
        ending?.sendError(error)
    }

    func abandon() {
        disposedFlag.store(true, ordering: .releasing)
        subscriber = nil
        if case .awaitingName(let timer) = state { timer?.dispose() }
        state = .ended
        unregisterFile.take()?()
        unregisterParent.take()?()
        shutdownToken.take()?.dispose()
    }
}
