internal import CLibUV
import Synchronization

/// `FileWatch.changes(at:recursive: true)` of a directory on a simulated loop: the directory and every
/// subdirectory below it, each heard from the in-memory tree, with names relative to the root as the real
/// recursive watch (`FileWatchSession`) gives them. A directory made or moved in is watched and what it holds
/// reported (`.renamed`); one deleted or moved out is no longer watched; a rename within the tree (across
/// directories too) is one `.moved`, and the renamed directory stays watched under its new name. A
/// subdirectory the process may not read (or whose parent it may not search) is `.notWatched`. Symbolic links
/// are entries, never followed. Like the real watch it ends with `ENOENT` when the root goes away; an armed
/// overflow loses one event, takes in any directory it hid, then sends `.eventsLost`.
///
/// Watches are kept by node, not by path: an event's names are the paths the tree has when the change is
/// made, so a directory renamed within the tree needs nothing moved.
///
/// Thread rule: the simulation's driving thread (the loop's callbacks and the tree's calls both run there),
/// except `dispose()` and `disposedFlag`.
final class SimulatedTreeWatch: LoopDisposable, @unchecked Sendable {
    // Sendable: every stored var is touched on the driving thread only (dispose() hops to the loop).
    typealias Node = SimulatedFileSystem.Node

    let loop: EventLoop
    let disposedFlag = Atomic<Bool>(false)
    private let root: String
    private let rootNode: Node
    private let files: SimulatedFileSystem
    private var subscriber: Subscriber<FileEvent>?
    /// Every watched directory (the root too), by node, with the closure that stops hearing it.
    private var watched: [ObjectIdentifier: (node: Node, unregister: () -> Void)] = [:]
    /// Halves of a rename across two watched directories, reported as one `.moved`: each swallows the
    /// `.renamed` its directory hears next for the name.
    private var pairedHalves: [(directory: ObjectIdentifier, name: String)] = []
    private var unregisterMoves: (() -> Void)?
    private var shutdownToken: (any Disposable)?

    private init(loop: EventLoop, root: String, rootNode: Node, files: SimulatedFileSystem, subscriber: Subscriber<FileEvent>) {
        self.loop = loop
        var root = root
        while root.count > 1 && root.hasSuffix("/") { root.removeLast() }
        self.root = root
        self.rootNode = rootNode
        self.files = files
        self.subscriber = subscriber
    }

    /// Watches the directory `node` that `root` names, and every directory below it (entries found now are not reported).
    static func open(_ root: String, node: Node, files: SimulatedFileSystem, loop: EventLoop,
                     subscriber: Subscriber<FileEvent>) -> any Disposable {
        let watch = SimulatedTreeWatch(loop: loop, root: root, rootNode: node, files: files, subscriber: subscriber)
        watch.watch(node)
        watch.watchBelow(node, at: "", announce: false, rescan: false)
        watch.unregisterMoves = files.watchMoves { [weak watch] from, oldName, to, newName in
            watch?.heardMove(from: from, oldName, to: to, newName)
        }
        watch.shutdownToken = loop.shutdownObservers.add { [weak watch] in watch?.end(EventLoopError.shutDown(loop: loop.name)) }
        return watch
    }

    // MARK: - What the tree tells (during its calls)

    private func watch(_ directory: Node) {
        let id = ObjectIdentifier(directory)
        guard watched[id] == nil else { return }
        let unregister = files.watch(directory) { [weak self] kind, name, oldName in self?.heard(kind, name, oldName, in: directory) }
        watched[id] = (directory, unregister)
    }

    /// A change in a watched directory: its event is sent as a callback of the loop, after the call that made it.
    private func heard(_ kind: FileEvent.Kind, _ name: String, _ oldName: String?, in directory: Node) {
        guard subscriber != nil else { return }
        if kind == .renamed, let index = pairedHalves.firstIndex(where: { $0.directory == ObjectIdentifier(directory) && $0.name == name }) {
            pairedHalves.remove(at: index)
            return
        }
        if name.isEmpty {
            // A subdirectory's own changes are its parent's events, by name; its deletion or move too.
            guard directory === rootNode else { return }
            // The root's own end is never lost to an overflow: the kernel's IN_IGNORED follows it.
            return post(losable: kind != .renamed) { [self] in
                if kind == .renamed { return end(SimulatedDirectoryWatch.rootWentAway(root)) }
                emit(.changed, ".")
            }
        }
        guard let base = relative(directory) else { return }
        let path = join(base, name)
        let oldPath = oldName.map { join(base, $0) }
        post { [self] in
            emit(kind, path, oldName: oldPath)
            if kind != .changed { entryArrived(name, in: directory) }
        }
    }

    /// A rename from one directory to another; one `.moved` when both are watched (else the halves are a deletion
    /// and a creation, each heard by its directory).
    private func heardMove(from: Node, _ oldName: String, to: Node, _ newName: String) {
        guard subscriber != nil, watched[ObjectIdentifier(from)] != nil, watched[ObjectIdentifier(to)] != nil,
              let fromBase = relative(from), let toBase = relative(to) else { return }
        pairedHalves.append((ObjectIdentifier(from), oldName))
        pairedHalves.append((ObjectIdentifier(to), newName))
        let oldPath = join(fromBase, oldName)
        let path = join(toBase, newName)
        post { [self] in
            emit(.moved, path, oldName: oldPath)
            entryArrived(newName, in: to)
        }
    }

    /// Queues `handle` as a callback of the loop, unless an armed overflow loses the event: then the tree is
    /// looked at again (directories made meanwhile taken in) and `.eventsLost` is sent in its place.
    private func post(losable: Bool = true, _ handle: @escaping () -> Void) {
        let overflowed = losable && files.overflows(root)
        let box = UncheckedSendable(handle)
        loop.execute { [self] in
            if disposedFlag.load(ordering: .acquiring) || subscriber == nil { return }
            if overflowed {
                dropUnreachable()
                watchBelow(rootNode, at: "", announce: false, rescan: true)
                return emit(.eventsLost, ".")
            }
            box.value()
        }
    }

    // MARK: - Taking directories in and letting them go (loop callbacks)

    /// After an entry of `directory` was made, moved in or renamed: drops the directories no longer below the
    /// root, and watches `name` if it is a directory not watched yet, reporting what it holds.
    private func entryArrived(_ name: String, in directory: Node) {
        dropUnreachable()
        guard subscriber != nil, watched[ObjectIdentifier(directory)] != nil, let base = relative(directory),
              case .directory(let entries) = directory.content, let child = entries[name], case .directory = child.content,
              watched[ObjectIdentifier(child)] == nil else { return }
        let path = join(base, name)
        guard directory.permissions & 0o100 != 0, child.permissions & 0o400 != 0 else { return emit(.notWatched, path) }
        watch(child)
        watchBelow(child, at: path, announce: true, rescan: false)
    }

    /// Watches every directory below `directory` (at `relative`); with `announce`, reports each entry found (it
    /// may be new). With `rescan`, also looks below directories watched already.
    private func watchBelow(_ directory: Node, at relative: String, announce: Bool, rescan: Bool) {
        guard case .directory(let entries) = directory.content else { return }
        let searchable = directory.permissions & 0o100 != 0
        for (name, child) in entries.sorted(by: { $0.key < $1.key }) {
            guard subscriber != nil else { return }
            let path = join(relative, name)
            if announce { emit(.renamed, path) }
            guard case .directory = child.content else { continue }
            if watched[ObjectIdentifier(child)] != nil {
                if rescan { watchBelow(child, at: path, announce: false, rescan: true) }
                continue
            }
            guard searchable, child.permissions & 0o400 != 0 else {
                emit(.notWatched, path)
                continue
            }
            watch(child)
            watchBelow(child, at: path, announce: announce, rescan: rescan)
        }
    }

    /// Stops watching every directory deleted or moved out of the tree.
    private func dropUnreachable() {
        for (id, entry) in watched where entry.node !== rootNode && relative(entry.node) == nil {
            entry.unregister()
            watched[id] = nil
        }
    }

    // MARK: - Paths

    /// `node`'s path relative to the root, by its names in its parents; nil when it is not below the root.
    private func relative(_ node: Node) -> String? {
        var names: [String] = []
        var current = node
        while current !== rootNode {
            guard let parent = current.parent else { return nil }
            names.append(current.name)
            current = parent
        }
        return names.reversed().joined(separator: "/")
    }

    private func join(_ base: String, _ name: String) -> String { base.isEmpty ? name : base + "/" + name }

    private func fullPath(_ relative: String) -> String { (root == "/" ? "/" : root + "/") + relative }

    private func emit(_ kind: FileEvent.Kind, _ name: String, oldName: String? = nil) {
        let path = name == "." ? root : fullPath(name)
        subscriber?.sendNext(FileEvent(kind: kind, name: name, path: path, oldName: oldName, oldPath: oldName.map(fullPath)))
    }

    // MARK: - Ending

    private func end(_ error: any Error) {
        let ending = subscriber.take()
        abandon()
        ending?.sendError(error)
    }

    func abandon() {
        disposedFlag.store(true, ordering: .releasing)
        subscriber = nil
        for entry in watched.values { entry.unregister() }
        watched = [:]
        pairedHalves = []
        unregisterMoves.take()?()
        shutdownToken.take()?.dispose()
    }
}
