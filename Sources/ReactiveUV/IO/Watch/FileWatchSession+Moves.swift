internal import CLibUV

/// Entries that leave, arrive, or are renamed within a directory watch. A rename whose two halves both reach
/// this session (`InotifyHub` pairs them) is one `.moved` event; in a recursive watch a renamed directory keeps
/// its watches: the kernel's descriptors follow the inode, so only the paths they are known by change.
extension FileWatchSession {
    func inotifyMoved(from: InotifyEvent, to: InotifyEvent) {
        guard subscriber != nil else { return }
        guard case .directory(let fromDirectory)? = watches[from.descriptor], case .directory(let toDirectory)? = watches[to.descriptor],
              !from.name.isEmpty, !to.name.isEmpty else {
            // A watched file's directory: the file follows its name, half by half.
            inotify(from)
            inotify(to)
            return
        }
        let oldName = entryName(from.name, in: fromDirectory)
        let newName = entryName(to.name, in: toDirectory)
        emitMove(from: oldName, to: newName)
        guard recursive, subscriber != nil else { return }
        do {
            try moveWatches(from: oldName, to: newName, from, to)
        } catch {
            fail(error)
        }
    }

    /// Drops the watches of an entry deleted or moved out, and of all below it.
    func entryLeft(_ name: String, _ event: InotifyEvent) {
        // A move-from this old can come after the name was watched again: two directories exchanged
        // (`renameat2` `RENAME_EXCHANGE`, `mv --exchange`) whose halves were not paired report "b" moved in
        // before "b" moved out. The watch added meanwhile is on what the name leads to now, and stays.
        if event.has(IN_MOVED_FROM), let descriptor = directories[name], nameStillLeads(to: descriptor, name) { return }
        dropTree(name)
    }

    /// Watches an entry made or moved in when it is a directory to watch, and reports what it holds.
    func entryArrived(_ name: String, _ event: InotifyEvent) throws(UVError) {
        guard event.has(IN_ISDIR) || isDirectoryToWatch(name, listedAsDirectory: false) else { return }
        try watchNewSubdirectory(name, nameIsExact: event.nameIsExact)
    }

    /// Moves the watches of a directory renamed within the tree. The queue may lag the file system (a scan, or a
    /// check of a name, saw it later), so where the directory is now is asked: back at its old name (an exchange
    /// or a rename undone since), it stays there; at neither, it moved on and a later event says where.
    private func moveWatches(from oldName: String, to newName: String, _ from: InotifyEvent, _ to: InotifyEvent) throws(UVError) {
        // A non-directory moves no watch; a link's target may differ from its new place, and a name that is not
        // UTF-8 cannot be watched by path: those are taken as the two halves would be.
        guard to.has(IN_ISDIR), to.nameIsExact else {
            entryLeft(oldName, from)
            try entryArrived(newName, to)
            return
        }
        let moving = directories[oldName]
        if let occupant = directories[newName], occupant != moving {
            try settleDisplaced([oldName, newName], arrived: newName, moving: moving)
            return
        }
        guard let moving else {
            // Not watched before: taken in, unless a scan watched it under the new name already.
            entryLeft(oldName, from)
            try entryArrived(newName, to)
            return
        }
        if !nameStillLeads(to: moving, newName), nameStillLeads(to: moving, oldName) { return }
        moveTree(takeTree(oldName), from: oldName, to: newName)
    }

    /// Removes `name` and every directory below it from `directories`, and returns them (path, descriptor).
    private func takeTree(_ name: String) -> [(path: String, descriptor: Int32)] {
        let prefix = name + "/"
        let tree = directories.filter { $0.key == name || $0.key.hasPrefix(prefix) }.map { (path: $0.key, descriptor: $0.value) }
        for (path, _) in tree { directories[path] = nil }
        return tree
    }

    /// Puts a tree taken from `oldName` back under `newName`: the same descriptors, known by new paths.
    private func moveTree(_ tree: [(path: String, descriptor: Int32)], from oldName: String, to newName: String) {
        for (path, descriptor) in tree {
            let moved = newName + path.dropFirst(oldName.count)
            directories[moved] = descriptor
            watches[descriptor] = .directory(moved)
        }
    }

    /// A watched directory had the new name already: renamed over (it is gone), or exchanged with the moved one
    /// (`renameat2` `RENAME_EXCHANGE`; the second pair, the other way, follows). Which directory each name leads
    /// to now is asked of the file system, and each tree goes where its directory is; the moved one, at neither
    /// name, moved on since and takes the new name; any other tree at neither name is dropped.
    private func settleDisplaced(_ names: [String], arrived: String, moving: Int32?) throws(UVError) {
        var taken: [Int32: (name: String, tree: [(path: String, descriptor: Int32)])] = [:]
        for name in names {
            if let root = directories[name] { taken[root] = (name, takeTree(name)) }
        }
        for name in names {
            guard let descriptor = descriptorNamed(name) else { continue }
            if let (oldName, tree) = taken.removeValue(forKey: descriptor) {
                moveTree(tree, from: oldName, to: name)
            } else if watches[descriptor] == nil {
                // A directory not watched before: the entry moved in is taken in; any other has its own event coming.
                hub?.removeWatch(descriptor, for: self)
                if name == arrived { try watchNewSubdirectory(name, nameIsExact: true) }
            }
        }
        if let moving, directories[arrived] == nil, let (oldName, tree) = taken.removeValue(forKey: moving) {
            moveTree(tree, from: oldName, to: arrived)
        }
        for (_, tree) in taken.values {
            for (_, descriptor) in tree { forget(descriptor) }
        }
    }

    /// The watch descriptor of the directory `name` leads to now (added if it was not watched), or nil when it
    /// leads to no directory that can be watched.
    private func descriptorNamed(_ name: String) -> Int32? {
        guard let hub, hub.isHandleOpen, let directory = try? tree?.open(name) else { return nil }
        defer { WatchedTree.close(directory) }
        return try? hub.addWatch(directory: directory, named: fullPath(name), for: self)
    }
}
