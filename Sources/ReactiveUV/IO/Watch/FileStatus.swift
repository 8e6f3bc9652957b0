internal import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What `stat` says about a file: the parts a watcher compares.
///
/// Thread rule: a value type; safe from any thread.
public struct FileStatus: Sendable, Hashable, CustomStringConvertible {
    /// Size in bytes.
    public let size: UInt64
    /// Last modification, as time since the Unix epoch (nanosecond precision where the file system has it).
    public let modificationTime: Duration
    /// The mode bits (type and permissions), as `st_mode`.
    public let mode: UInt32
    /// The inode number.
    public let inode: UInt64
    /// The device the file lives on (`st_dev`); with `inode`, it names the file.
    public let device: UInt64

    /// Whether it is a directory.
    ///
    /// Thread rule: safe from any thread.
    public var isDirectory: Bool { mode & 0o170000 == 0o040000 }

    init(_ stat: uv_stat_t) {
        self = FileInfo(stat).status
    }

    init(size: UInt64, modificationTime: Duration, mode: UInt32, inode: UInt64, device: UInt64) {
        self.size = size
        self.modificationTime = modificationTime
        self.mode = mode
        self.inode = inode
        self.device = device
    }

    /// `"size 12, mode 100644, mtime 1700000000.123456789"` (`mtime -9.750000000` before 1970).
    ///
    /// Thread rule: safe from any thread.
    public var description: String {
        // Both components of a negative duration are negative (-9.75 s is -9 s and -0.75 s): the sign is
        // written once, before the magnitude's.
        let negative = modificationTime < .zero
        let (seconds, attoseconds) = (negative ? .zero - modificationTime : modificationTime).components
        var fraction = String(attoseconds / 1_000_000_000)
        while fraction.count < 9 { fraction = "0" + fraction }
        return "size \(size), mode \(String(mode, radix: 8)), mtime \(negative ? "-" : "")\(seconds).\(fraction)"
    }
}

/// Synchronous file-system queries made on the loop thread (`uv_fs_*` with no callback).
///
/// Used to check a path before watching it and what it leads to since: each
/// call is one quick system call on a local file system, cheaper than a trip
/// through the thread pool.
enum FileSystemQuery {
    /// `stat` (following symlinks) or `lstat`.
    static func status(of path: String, followLinks: Bool = true) throws(UVError) -> FileStatus {
        try status(ofCString: path, named: path, followLinks: followLinks)
    }

    private static func status(ofCString path: UnsafePointer<CChar>, named name: String, followLinks: Bool) throws(UVError) -> FileStatus {
        var request = uv_fs_t()
        defer { uv_fs_req_cleanup(&request) }
        let result = followLinks ? uv_fs_stat(nil, &request, path, nil) : uv_fs_lstat(nil, &request, path, nil)
        try uvCheck(result, "stat \(name)")
        return FileStatus(request.statbuf)
    }
}
