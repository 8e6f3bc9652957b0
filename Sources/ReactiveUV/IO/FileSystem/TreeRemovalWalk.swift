#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The pool side of `Files.removeTree` below its root: a depth-first walk that removes what it finds,
/// a bounded number of system calls per pool job, never following a symbolic link.
///
/// Why directory descriptors (`openat`, `unlinkat`, `fdopendir`) and not paths: a tree can be deeper
/// than a path can be long (`PATH_MAX`, 4,096 bytes: a copy made inside its own source reaches it
/// at a few dozen levels), and every path call below that depth fails with `ENAMETOOLONG`, leaving
/// the tree half removed where `rm -r` removes it. Each entry is reached relative to an anchor: the
/// working directory near the root, else a descriptor opened on a directory above it, so no path given
/// to the kernel passes `anchorLimit` bytes or `anchorLevels` levels. The kernel resolves a path one
/// component at a time, so short paths also keep each call cheap (2,000 levels from one anchor cost
/// about 300 µs per `openat`). The walk holds one descriptor per `anchorLevels` levels of depth.
///
/// Messages still name each entry by its full path (kept as bytes: a name need not be UTF-8).
final class TreeRemovalWalk: @unchecked Sendable {
    // Used by one pool job at a time: the loop queues the next job only after the previous one called
    // back (libuv's queue mutex orders the two), and `close()` runs on the loop once no job is out.

    /// What a job did: the whole tree is gone, or there is more to remove.
    enum Progress: Sendable { case more, done }

    /// One directory being emptied.
    private struct Frame {
        /// The index in `anchors` of the directory `relative` starts from.
        let anchor: Int
        /// The directory's path from its anchor (bytes, no NUL).
        let relative: [CChar]
        /// The full path, for messages.
        let path: BytePath
        /// Its entries not yet removed; nil until it was read.
        var entries: [(name: [CChar], type: FileType)]?
        /// How many components `relative` has.
        let levels: Int
        /// A descriptor on this directory, opened once its entries' paths from `anchor` would be too long.
        var childAnchor: Int?
    }

    /// Relative paths stay below this many bytes (with a 255-byte name: half of `PATH_MAX`).
    static let anchorLimit = 2048
    /// Relative paths below the root have at most this many components.
    static let anchorLevels = 16

    /// The anchors' descriptors: the working directory first, then one per directory opened as an anchor,
    /// in the order of the frames that opened them (so the deepest anchor closes first).
    private var anchors: [Int32] = [AT_FDCWD]
    private var frames: [Frame]

    /// A walk that removes the directory `root` (known to be a directory, not a link) and all below it.
    init(root: String) {
        frames = [Frame(anchor: 0, relative: Array(root.utf8).map { CChar(bitPattern: $0) }, path: BytePath(root), levels: 1)]
    }

    /// Removes entries until `budget` system calls were made, `stop` is set, or the root itself is gone.
    /// An entry below the root that vanished meanwhile is fine; any other failure is thrown, naming the path.
    func advance(budget: Int, stop: JobStopFlag) throws(UVError) -> Progress {
        var calls = 0
        while calls < budget && !stop.isSet {
            guard let top = frames.indices.last else { return .done }
            calls += 1
            guard frames[top].entries != nil else {
                try read(top)
                continue
            }
            if let entry = frames[top].entries!.popLast() {
                try remove(entry, in: top)
            } else {
                try removeDirectory(frames.removeLast())
            }
        }
        return frames.isEmpty ? .done : .more
    }

    /// Reads the entries of the deepest directory; one that is no longer a directory is removed as a file.
    private func read(_ index: Int) throws(UVError) {
        let frame = frames[index]
        let descriptor = open(frame.relative, from: frame.anchor)
        guard descriptor >= 0 else {
            let code = errno
            if index > 0 && code == ENOENT {
                frames.removeLast()  // gone already
            } else if index > 0 && (code == ELOOP || code == ENOTDIR) {
                // Replaced by a link or a file since its parent was read: removed, never followed.
                frames.removeLast()
                try unlink(frame.relative, from: frame.anchor, named: frame.path)
            } else {
                throw UVError(code: -code, context: "scandir \(frame.path)")
            }
            return
        }
        guard let stream = fdopendir(descriptor) else {
            let code = errno
            _ = Glibc.close(descriptor)
            throw UVError(code: -code, context: "scandir \(frame.path)")
        }
        defer { closedir(stream) }
        var entries: [(name: [CChar], type: FileType)] = []
        while true {
            errno = 0
            guard let entry = readdir(stream) else {
                if errno != 0 { throw UVError(code: -errno, context: "scandir \(frame.path)") }
                break
            }
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                Array(raw.bindMemory(to: CChar.self).prefix { $0 != 0 })
            }
            if name == [0x2E] || name == [0x2E, 0x2E] { continue }
            entries.append((name, FileType(direntType: entry.pointee.d_type)))
        }
        frames[index].entries = entries
    }

    /// Removes one entry of the directory at `index`: a directory is descended into, anything else unlinked.
    private func remove(_ entry: (name: [CChar], type: FileType), in index: Int) throws(UVError) {
        let (anchor, relative, levels) = try location(of: entry.name, in: index)
        let path = frames[index].path.appending(entry.name)
        var type = entry.type
        if type == .unknown {
            // The file system's entries do not say: look without following a link.
            var status = Glibc.stat()
            let result = relative.withNULTerminated { fstatat(anchors[anchor], $0, &status, AT_SYMLINK_NOFOLLOW) }
            guard result == 0 else {
                let code = errno
                if code == ENOENT { return }
                throw UVError(code: -code, context: "lstat \(path)")
            }
            type = FileType(mode: UInt32(status.st_mode))
        }
        if type == .directory {
            frames.append(Frame(anchor: anchor, relative: relative, path: path, levels: levels))
        } else {
            try unlink(relative, from: anchor, named: path)
        }
    }

    /// Where an entry of the directory at `index` is reached from: that directory's own anchor with the
    /// path joined, or (when that path would be too long) a descriptor opened on the directory.
    private func location(of name: [CChar], in index: Int) throws(UVError) -> (anchor: Int, relative: [CChar], levels: Int) {
        if let anchor = frames[index].childAnchor { return (anchor, name, 1) }
        let frame = frames[index]
        if frame.relative.count + 1 + name.count < Self.anchorLimit && frame.levels < Self.anchorLevels {
            return (frame.anchor, frame.relative + [CChar(UInt8(ascii: "/"))] + name, frame.levels + 1)
        }
        let descriptor = open(frame.relative, from: frame.anchor)
        guard descriptor >= 0 else { throw UVError(code: -errno, context: "open \(frame.path)") }
        anchors.append(descriptor)
        frames[index].childAnchor = anchors.count - 1
        return (anchors.count - 1, name, 1)
    }

    /// Removes an emptied directory (the root's absence is an error, a vanished one below it is not).
    private func removeDirectory(_ frame: Frame) throws(UVError) {
        if frame.childAnchor != nil, let descriptor = anchors.popLast() { _ = Glibc.close(descriptor) }
        let result = frame.relative.withNULTerminated { unlinkat(anchors[frame.anchor], $0, AT_REMOVEDIR) }
        guard result == 0 else {
            let code = errno
            if code == ENOENT && !frames.isEmpty { return }
            throw UVError(code: -code, context: "rmdir \(frame.path)")
        }
    }

    private func unlink(_ relative: [CChar], from anchor: Int, named path: BytePath) throws(UVError) {
        let result = relative.withNULTerminated { unlinkat(anchors[anchor], $0, 0) }
        guard result == 0 else {
            let code = errno
            if code == ENOENT { return }
            throw UVError(code: -code, context: "unlink \(path)")
        }
    }

    /// Opens a directory to read or to anchor paths at, never through a symbolic link.
    private func open(_ relative: [CChar], from anchor: Int) -> Int32 {
        relative.withNULTerminated { openat(anchors[anchor], $0, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
    }

    /// Closes the anchors left open (the walk ended early). Loop thread, once no job is out.
    func close() {
        while anchors.count > 1, let descriptor = anchors.popLast() { _ = Glibc.close(descriptor) }
        frames.removeAll()
    }
}

extension Array where Element == CChar {
    /// Lends the bytes with a NUL after them to a C call.
    fileprivate func withNULTerminated<Result>(_ body: (UnsafePointer<CChar>) -> Result) -> Result {
        (self + [0]).withUnsafeBufferPointer { body($0.baseAddress!) }
    }
}
