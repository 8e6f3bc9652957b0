internal import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Synchronization

/// The directories of a recursive `FileWatch`, opened from its root one component at a time.
///
/// A path below the root is resolved again by the kernel at each call: a directory of the tree swapped for
/// a symbolic link to elsewhere between two calls (listed as a directory, then watched or listed by a path
/// through the link) would widen the watch beyond the tree and report the other directory's entries as the
/// tree's. So each directory is opened relative to its parent's descriptor, never through a link unless
/// links are followed, read through its descriptor and watched through it (`InotifyHub.addWatch(directory:)`).
/// The root is opened by the path the caller gave, and must still be the directory the watch started on.
///
/// Thread rule: the session's loop thread only.
struct WatchedTree {
    /// One entry of a watched directory: its name, whether it is a directory (a link is not, whatever it
    /// points to), and whether `name` is exact (false when the bytes are not UTF-8: it then names no file).
    typealias Entry = (name: String, isDirectory: Bool, nameIsExact: Bool)

    /// The root as the caller named it, without trailing slashes.
    let root: String
    /// The device and inode the watch started on.
    let rootID: FileID
    /// Whether symbolic links to directories are followed (`followSymlinks`).
    let followsLinks: Bool
    private let reader = DirectoryReader()

    /// Test seam: directories listed by every recursive watch in the process.
    static let listings = Atomic<Int>(0)

    init(root: String, rootID: FileID, followsLinks: Bool) {
        self.root = root
        self.rootID = rootID
        self.followsLinks = followsLinks
    }

    /// Opens `relative` ("" for the root) from the root, one component at a time. A root that is no longer
    /// the watched directory, or a component that is gone, a file, or (unless links are followed) a link,
    /// is `ENOENT` / `ENOTDIR` / `ELOOP` naming the path.
    func open(_ relative: String) throws(UVError) -> Int32 {
        var current = Glibc.open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard current >= 0 else { throw UVError(code: -errno, context: "watch \(root)") }
        var status = Glibc.stat()
        guard fstat(current, &status) == 0, FileID(device: UInt64(status.st_dev), inode: UInt64(status.st_ino)) == rootID else {
            _ = Glibc.close(current)
            throw UVError(code: UV_ENOENT.rawValue, context: "watch \(root)")
        }
        for component in relative.split(separator: "/") {
            let next: Int32
            do {
                next = try openChild(String(component), in: current, relative: relative)
            } catch {
                _ = Glibc.close(current)
                throw error
            }
            _ = Glibc.close(current)
            current = next
        }
        return current
    }

    /// Opens the directory `name` inside the open directory `parent`; `relative` names it in errors.
    func openChild(_ name: String, in parent: Int32, relative: String) throws(UVError) -> Int32 {
        let descriptor = followsLinks
            ? openat(parent, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            : DirectoryReader.openDirectory(name, in: parent)
        guard descriptor >= 0 else { throw UVError(code: followsLinks ? -errno : descriptor, context: "watch \(path(relative))") }
        return descriptor
    }

    /// The entries of the open directory `descriptor` (but `.` and `..`); `relative` names it in errors.
    func entries(of descriptor: Int32, relative: String) throws(UVError) -> [Entry] {
        Self.listings.add(1, ordering: .relaxed)
        let raw: [DirectoryReader.Entry]
        do {
            raw = try reader.entries(of: descriptor)
        } catch {
            throw UVError(code: error.code, context: "scandir \(path(relative))")
        }
        return raw.map { entry in
            let exact = String(validating: entry.name.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            let name = exact ?? String(decoding: entry.name.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            var isDirectory = entry.type == .directory
            if entry.type == .unknown {
                // The file system's entries do not say: look, without following a link.
                var status = Glibc.stat()
                isDirectory = (entry.name + [0]).withUnsafeBufferPointer {
                    fstatat(descriptor, $0.baseAddress!, &status, AT_SYMLINK_NOFOLLOW) == 0
                } && FileType(mode: UInt32(status.st_mode)) == .directory
            }
            return (name, isDirectory, exact != nil)
        }
    }

    /// Closes a descriptor `open` or `openChild` returned.
    static func close(_ descriptor: Int32) {
        _ = Glibc.close(descriptor)
    }

    /// The full path of `relative`, for messages and events.
    func path(_ relative: String) -> String {
        relative.isEmpty ? root : (root == "/" ? "/" : root + "/") + relative
    }
}
