internal import CLibUV

/// A recursive watch's subdirectories: found by scans (at the start, for a directory made or moved in, after
/// events were lost) and dropped when they go. Each is opened from its parent's descriptor (`WatchedTree`),
/// never by a path the kernel would resolve again, so a directory swapped for a link never widens the watch.
extension FileWatchSession {
    /// Levels of subdirectories whose descriptors a scan holds while it is below them; deeper, each directory
    /// is opened from the root (bounded descriptors for any depth).
    static let heldLevels = 32

    /// Watches a directory made or moved in below the root, and everything in it, reporting each entry found.
    func watchNewSubdirectory(_ relative: String, nameIsExact: Bool) throws(UVError) {
        guard let (added, directory) = try watchSubdirectory(relative, nameIsExact: nameIsExact, in: nil) else { return }
        defer { WatchedTree.close(directory) }
        if case .added = added {
            let held = relative.split(separator: "/").count < Self.heldLevels ? directory : nil
            try watchSubdirectories(of: relative, in: held, announce: true, rescan: false)
        }
    }

    /// A subdirectory's watch and its open descriptor (the caller closes it), opened inside `parent` (else from
    /// the root); nil when it is gone already or not a directory (a link, unless links are followed), or
    /// (reported) unreadable, or (reported) named by bytes that are not UTF-8 (`nameIsExact` false: its
    /// `String` names no file, so opening it could only answer `ENOENT`, which would read as "gone").
    private func watchSubdirectory(_ relative: String, nameIsExact: Bool, in parent: Int32?) throws(UVError) -> (Added, Int32)? {
        guard nameIsExact else {
            emit(.notWatched, relative)
            return nil
        }
        guard let tree else { return nil }
        var directory: Int32 = -1
        do {
            directory = if let parent { try tree.openChild(lastComponent(relative), in: parent, relative: relative) } else { try tree.open(relative) }
            return (try watchDirectory(relative, open: directory), directory)
        } catch {
            if directory >= 0 { WatchedTree.close(directory) }
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

    /// Watches every directory below `relative`, open as `held` (nil: opened from the root to be read); with
    /// `announce`, reports each entry found (it may be new). With `rescan`, also looks inside directories
    /// watched already (after events were lost).
    func watchSubdirectories(of relative: String, in held: Int32?, announce: Bool, rescan: Bool) throws(UVError) {
        guard let tree else { return }
        let entries: [WatchedTree.Entry]
        do {
            if let held {
                entries = try tree.entries(of: held, relative: relative)
            } else {
                let directory = try tree.open(relative)
                defer { WatchedTree.close(directory) }
                entries = try tree.entries(of: directory, relative: relative)
            }
        } catch {
            switch error.code {
            case UV_ENOENT.rawValue, UV_ENOTDIR.rawValue, UV_ELOOP.rawValue:
                try checkRootStillAtItsPath()
                return  // gone already: its parent reports it
            case UV_EACCES.rawValue, UV_EPERM.rawValue: emit(.notWatched, relative); return
            default: throw error
            }
        }
        // Below `heldLevels`, children are opened inside this directory and held while scanned.
        let holdsChildren = held != nil && relative.split(separator: "/").count + 1 < Self.heldLevels
        for entry in entries {
            guard subscriber != nil else { return }  // the subscriber may dispose while it hears of an entry
            let name = relative.isEmpty ? entry.name : relative + "/" + entry.name
            if announce { emit(.renamed, name) }
            guard subscriber != nil, isDirectoryToWatch(name, listedAsDirectory: entry.isDirectory),
                  let (added, child) = try watchSubdirectory(name, nameIsExact: entry.nameIsExact, in: held) else { continue }
            defer { WatchedTree.close(child) }
            switch added {
            case .added: try watchSubdirectories(of: name, in: holdsChildren ? child : nil, announce: announce, rescan: rescan)
            case .alreadyThere where rescan: try watchSubdirectories(of: name, in: holdsChildren ? child : nil, announce: false, rescan: true)
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
    func isDirectoryToWatch(_ relative: String, listedAsDirectory: Bool) -> Bool {
        if listedAsDirectory { return true }
        guard followSymlinks else { return false }
        // A link that leads nowhere (or nowhere readable) is not a directory to watch.
        return (try? FileSystemQuery.status(of: fullPath(relative)))?.isDirectory ?? false
    }

    /// Drops the watches of `relative` and of every directory below it (deleted or moved away).
    func dropTree(_ relative: String) {
        let prefix = relative + "/"
        for (path, descriptor) in directories where path == relative || path.hasPrefix(prefix) { forget(descriptor) }
    }

    /// Whether `relative` still names the directory watched by `descriptor` (a watch of the path now gives that
    /// descriptor back). A watch this added on another directory is given up again: that directory's own event adds it.
    func nameStillLeads(to descriptor: Int32, _ relative: String) -> Bool {
        guard let hub, hub.isHandleOpen, let directory = try? tree?.open(relative) else { return false }
        defer { WatchedTree.close(directory) }
        guard let current = try? hub.addWatch(directory: directory, named: fullPath(relative), for: self) else { return false }
        if current == descriptor { return true }
        if watches[current] == nil { hub.removeWatch(current, for: self) }
        return false
    }
}
