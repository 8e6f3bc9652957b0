internal import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The pool side of `Files.removeTree` below its root: a depth-first walk that removes what it finds,
/// a bounded number of system calls per pool job, never following a symbolic link.
///
/// Every call below the root names one component relative to a descriptor of the directory holding it
/// (`openat(parent, name, O_NOFOLLOW)`, `unlinkat(parent, name)`): a path of several components would be
/// resolved again by the kernel at each call, so a directory swapped for a link to elsewhere after it was
/// read would lead the removal out of the tree (Rust's CVE-2022-21658, the old `rm -r` races fts closed).
/// A directory opened with `O_NOFOLLOW` is the one that had the name; what it holds is removed through
/// its descriptor wherever it is moved meanwhile.
///
/// A tree can be deeper than a path can be long (`PATH_MAX`) or than descriptors can be held: at most
/// `descriptorLimit` directories are held open, the deepest ones. Going back up to a directory whose
/// descriptor was closed opens it again as `..` of its child and checks its device and inode against what
/// was recorded before its descriptor was closed: a mismatch means the tree was moved during the removal, which then ends
/// with `EBUSY` rather than remove names in whatever directory `..` is now.
///
/// Messages name each entry by its full path (kept as bytes: a name need not be UTF-8).
final class TreeRemovalWalk: @unchecked Sendable {
    // Used by one pool job at a time: the loop queues the next job only after the previous one called
    // back (libuv's queue mutex orders the two), and `close()` runs on the loop once no job is out.

    /// What a job did: the whole tree is gone, or there is more to remove.
    enum Progress: Sendable { case more, done }

    /// A directory's device and inode.
    private struct Identity: Equatable {
        let device: UInt64
        let inode: UInt64
    }

    /// One directory being emptied (a class: frames are updated in place, never copied).
    private final class Frame {
        /// Its name in its parent (bytes, no NUL); the root's path as given for the root.
        let name: [CChar]
        /// The full path, for messages.
        let path: BytePath
        /// Its descriptor while held open.
        var descriptor: Int32?
        /// Recorded when its descriptor is closed, to recognise it when it is opened again through `..`.
        var identity: Identity?
        /// Its entries not yet removed; nil until it was read.
        var entries: [(name: [CChar], type: FileType)]?

        init(name: [CChar], path: BytePath) {
            self.name = name
            self.path = path
        }
    }

    /// The most directory descriptors a walk holds at once (at least 2: a directory and its parent).
    let descriptorLimit: Int
    /// Told each directory's path before it is opened, and whether it is a parent opened again as `..`
    /// (tests count descriptors there, and move the tree).
    private let beforeOpening: ((BytePath, _ reopening: Bool) -> Void)?
    /// The directories from the root down to the one being emptied; the open ones are the deepest.
    private var frames: [Frame]
    /// How many frames hold a descriptor.
    private var openCount = 0
    private let reader = DirectoryReader()

    /// A walk that removes the directory `root` (known to be a directory, not a link) and all below it.
    init(root: String, descriptorLimit: Int = 64, beforeOpening: ((BytePath, _ reopening: Bool) -> Void)? = nil) {
        self.descriptorLimit = max(descriptorLimit, 2)
        self.beforeOpening = beforeOpening
        frames = [Frame(name: Array(root.utf8).map { CChar(bitPattern: $0) }, path: BytePath(root))]
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
                try removeDirectory(top)
            }
        }
        return frames.isEmpty ? .done : .more
    }

    /// Opens and reads the deepest directory; one that is gone or no longer a directory is dealt with in its parent.
    private func read(_ index: Int) throws(UVError) {
        let frame = frames[index]
        try makeRoomForADescriptor()
        beforeOpening?(frame.path, false)
        // The parent is open: the open frames are the deepest, and at least two may be.
        let descriptor = DirectoryReader.openDirectory(frame.name, in: index > 0 ? frames[index - 1].descriptor! : AT_FDCWD)
        guard descriptor >= 0 else {
            guard index > 0 else { throw UVError(code: descriptor, context: "scandir \(frame.path)") }
            frames.removeLast()
            if descriptor == -ENOENT { return }  // gone already
            // Replaced by a link or a file since its parent was read: removed, never followed.
            guard descriptor == -ELOOP || descriptor == -ENOTDIR else { throw UVError(code: descriptor, context: "scandir \(frame.path)") }
            try unlink(frame.name, in: index - 1, named: frame.path)
            return
        }
        frame.descriptor = descriptor
        openCount += 1
        do {
            frame.entries = try reader.entries(of: descriptor)
        } catch {
            throw UVError(code: error.code, context: "scandir \(frame.path)")
        }
    }

    /// Removes one entry of the directory at `index` (the deepest, open): a directory is descended into,
    /// anything else unlinked.
    private func remove(_ entry: (name: [CChar], type: FileType), in index: Int) throws(UVError) {
        let path = frames[index].path.appending(entry.name)
        var type = entry.type
        if type == .unknown {
            // The file system's entries do not say: look without following a link.
            var status = Glibc.stat()
            let result = entry.name.withNULTerminated { fstatat(frames[index].descriptor!, $0, &status, AT_SYMLINK_NOFOLLOW) }
            guard result == 0 else {
                let code = errno
                if code == ENOENT { return }
                throw UVError(code: -code, context: "lstat \(path)")
            }
            type = FileType(mode: UInt32(status.st_mode))
        }
        if type != .directory {
            do {
                try unlink(entry.name, in: index, named: path)
                return
            } catch let error where error.code == -EISDIR {
                // Made a directory since it was read: emptied like any other.
            }
        }
        frames.append(Frame(name: entry.name, path: path))
    }

    /// Removes the emptied deepest directory from its parent (the root by its path); a vanished one below
    /// the root is fine, the root's absence is an error.
    private func removeDirectory(_ index: Int) throws(UVError) {
        guard index > 0 else {
            let root = frames.removeLast()
            closeDescriptor(of: root)
            let result = root.name.withNULTerminated { unlinkat(AT_FDCWD, $0, AT_REMOVEDIR) }
            guard result == 0 else { throw UVError(code: -errno, context: "rmdir \(root.path)") }
            return
        }
        if frames[index - 1].descriptor == nil { try reopenParent(of: index) }
        let directory = frames.removeLast()
        closeDescriptor(of: directory)
        let result = directory.name.withNULTerminated { unlinkat(frames[index - 1].descriptor!, $0, AT_REMOVEDIR) }
        guard result == 0 else {
            let code = errno
            if code == ENOENT { return }
            throw UVError(code: -code, context: "rmdir \(directory.path)")
        }
    }

    /// Opens the parent of the directory at `index` again as its `..`, which must be the directory recorded when
    /// its descriptor was closed: a tree moved meanwhile puts another directory there, whose names are not the tree's.
    private func reopenParent(of index: Int) throws(UVError) {
        let parentPath = frames[index - 1].path
        beforeOpening?(parentPath, true)
        let descriptor = openat(frames[index].descriptor!, "..", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else { throw UVError(code: -errno, context: "open \(parentPath)") }
        var status = Glibc.stat()
        guard fstat(descriptor, &status) == 0 else {
            let code = errno
            _ = Glibc.close(descriptor)
            throw UVError(code: -code, context: "open \(parentPath)")
        }
        guard Identity(device: UInt64(status.st_dev), inode: UInt64(status.st_ino)) == frames[index - 1].identity else {
            _ = Glibc.close(descriptor)
            throw UVError(code: UV_EBUSY.rawValue,
                          message: "the tree was moved during the removal: the directory above \(frames[index].path) is no longer "
                              + "\(parentPath), so nothing more is removed (what is left stays where it was moved)",
                          context: "removeTree \(frames[0].path)")
        }
        // The child's descriptor closes next: the count of open descriptors does not grow.
        frames[index - 1].descriptor = descriptor
        openCount += 1
    }

    /// Closes the shallowest descriptor held when the walk holds as many as it may (before the deepest
    /// frame, not open yet, is opened: the open frames are the ones just above it).
    /// Its identity is recorded first, to recognise it when it is opened again.
    private func makeRoomForADescriptor() throws(UVError) {
        guard openCount >= descriptorLimit else { return }
        let shallowest = frames[frames.count - 1 - openCount]
        var status = Glibc.stat()
        guard fstat(shallowest.descriptor!, &status) == 0 else { throw UVError(code: -errno, context: "stat \(shallowest.path)") }
        shallowest.identity = Identity(device: UInt64(status.st_dev), inode: UInt64(status.st_ino))
        closeDescriptor(of: shallowest)
    }

    private func closeDescriptor(of frame: Frame) {
        guard let descriptor = frame.descriptor else { return }
        _ = Glibc.close(descriptor)
        frame.descriptor = nil
        openCount -= 1
    }

    /// Unlinks `name` from the open directory at `index`; one gone already is fine.
    private func unlink(_ name: [CChar], in index: Int, named path: BytePath) throws(UVError) {
        let result = name.withNULTerminated { unlinkat(frames[index].descriptor!, $0, 0) }
        guard result == 0 else {
            let code = errno
            if code == ENOENT { return }
            throw UVError(code: -code, context: "unlink \(path)")
        }
    }

    /// Closes the descriptors left open (the walk ended early). Loop thread, once no job is out.
    func close() {
        for frame in frames { closeDescriptor(of: frame) }
        frames.removeAll()
    }
}

extension Array where Element == CChar {
    /// Lends the bytes with a NUL after them to a C call.
    fileprivate func withNULTerminated<Result>(_ body: (UnsafePointer<CChar>) -> Result) -> Result {
        (self + [0]).withUnsafeBufferPointer { body($0.baseAddress!) }
    }
}
