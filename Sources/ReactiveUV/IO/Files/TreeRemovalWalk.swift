internal import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The pool side of `Files.removeTree` below its root: a depth-first walk that removes what it finds, a bounded
/// number of system calls per pool job, never following a symbolic link.
///
/// Every call names one component relative to its directory's descriptor (`openat(O_NOFOLLOW)`, `unlinkat`):
/// a longer path would be resolved again, and a directory swapped for a link would lead the removal out of the
/// tree (Rust's CVE-2022-21658). At most `descriptorLimit` directories, the deepest, are held open; one whose
/// descriptor was closed is opened again as `..` of its child and must have the device and inode recorded, or
/// the tree was moved and the walk ends with `EBUSY`. Messages name entries by full path, kept as bytes.
final class TreeRemovalWalk: @unchecked Sendable {
    // Used by one pool job at a time (each queued after the previous one called back); `close()` once none is out.

    /// What a job did: the whole tree is gone, or there is more to remove.
    enum Progress: Sendable { case more, done }

    /// A directory's device and inode.
    private struct Identity: Equatable {
        let device: UInt64
        let inode: UInt64

        /// The open directory's, or `fstat`'s error naming `context`.
        init(of descriptor: Int32, context: @autoclosure () -> String) throws(UVError) {
            var status = Glibc.stat()
            guard fstat(descriptor, &status) == 0 else { throw UVError(code: -errno, context: context()) }
            (device, inode) = (UInt64(status.st_dev), UInt64(status.st_ino))
        }
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
    /// Told each directory's path before it is opened, and whether it is a parent opened again as `..` (tests).
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

    /// Removes entries until `budget` calls were made, `stop` is set, or the root is gone; throws a failure.
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
        let descriptor = frame.name.withNULTerminated { DirectoryReader.openDirectory($0, in: index > 0 ? frames[index - 1].descriptor! : AT_FDCWD) }
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

    /// Removes one entry of the deepest directory: a directory is descended into, anything else unlinked.
    private func remove(_ entry: (name: [CChar], type: FileType), in index: Int) throws(UVError) {
        let path = frames[index].path.appending(entry.name)
        var type = entry.type
        if type == .unknown {
            // The file system's entries do not say: look without following a link.
            var status = Glibc.stat()
            let result = entry.name.withNULTerminated { fstatat(frames[index].descriptor!, $0, &status, AT_SYMLINK_NOFOLLOW) }
            guard try succeeded(result, "lstat", path) else { return }
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

    /// Removes the emptied deepest directory from its parent (the root by its path, which must exist).
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
        _ = try succeeded(result, "rmdir", directory.path)
    }

    /// Opens the parent of the directory at `index` again as its `..`, which must be the directory recorded.
    private func reopenParent(of index: Int) throws(UVError) {
        let parentPath = frames[index - 1].path
        beforeOpening?(parentPath, true)
        let descriptor = openat(frames[index].descriptor!, "..", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else { throw UVError(code: -errno, context: "open \(parentPath)") }
        let identity: Identity
        do { identity = try Identity(of: descriptor, context: "open \(parentPath)") } catch {
            _ = Glibc.close(descriptor)
            throw error
        }
        guard identity == frames[index - 1].identity else {
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

    /// Closes the shallowest descriptor held, recording its identity, when the walk holds as many as it may.
    private func makeRoomForADescriptor() throws(UVError) {
        guard openCount >= descriptorLimit else { return }
        let shallowest = frames[frames.count - 1 - openCount]
        shallowest.identity = try Identity(of: shallowest.descriptor!, context: "stat \(shallowest.path)")
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
        _ = try succeeded(name.withNULTerminated { unlinkat(frames[index].descriptor!, $0, 0) }, "unlink", path)
    }

    /// Whether a call below the root succeeded: false when its entry was gone already; other failures are thrown.
    private func succeeded(_ result: Int32, _ call: String, _ path: BytePath) throws(UVError) -> Bool {
        if result == 0 { return true }
        let code = errno
        if code == ENOENT { return false }
        throw UVError(code: -code, context: "\(call) \(path)")
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
