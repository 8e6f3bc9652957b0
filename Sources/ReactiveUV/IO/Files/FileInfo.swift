internal import CLibUV

/// What a file is, from its mode bits (`st_mode & S_IFMT`).
///
/// Thread rule: a value type; safe from any thread.
public enum FileType: Sendable, Hashable, CustomStringConvertible {
    /// A regular file.
    case regular
    /// A directory.
    case directory
    /// A symbolic link (only `lstat` and directory listings see one; `stat` follows it).
    case symbolicLink
    /// A named pipe (FIFO).
    case fifo
    /// A Unix-domain socket.
    case socket
    /// A character device (a terminal, `/dev/null`).
    case characterDevice
    /// A block device (a disk).
    case blockDevice
    /// A type this library does not name (or, in a listing, one the file system did not say).
    case unknown

    /// The type named by the `S_IFMT` bits of `mode`.
    ///
    /// Thread rule: safe from any thread.
    public init(mode: UInt32) {
        switch mode & 0o170000 {
        case 0o100000: self = .regular
        case 0o040000: self = .directory
        case 0o120000: self = .symbolicLink
        case 0o010000: self = .fifo
        case 0o140000: self = .socket
        case 0o020000: self = .characterDevice
        case 0o060000: self = .blockDevice
        default: self = .unknown
        }
    }

    /// `"regular file"`, `"directory"`, `"symbolic link"`...
    ///
    /// Thread rule: safe from any thread.
    public var description: String {
        switch self {
        case .regular: "regular file"
        case .directory: "directory"
        case .symbolicLink: "symbolic link"
        case .fifo: "FIFO"
        case .socket: "socket"
        case .characterDevice: "character device"
        case .blockDevice: "block device"
        case .unknown: "unknown type"
        }
    }
}

/// Everything `stat`, `lstat` and `fstat` say about a file.
///
/// Times are since the Unix epoch, with the nanoseconds the file system keeps.
/// `FileStatus` (what a watcher compares) is the part of this that changes
/// when a file's content does.
///
/// Thread rule: a value type; safe from any thread.
public struct FileInfo: Sendable, Hashable, CustomStringConvertible {
    /// What the file is.
    public let type: FileType
    /// Size in bytes (for a symbolic link under `lstat`: the length of its target).
    public let size: UInt64
    /// The permission bits, with set-user-ID, set-group-ID and sticky (`st_mode & 0o7777`).
    public let permissions: UInt32
    /// The whole `st_mode` (type and permissions).
    public let mode: UInt32
    /// The owner's user ID.
    public let userID: UInt32
    /// The owner's group ID.
    public let groupID: UInt32
    /// The inode number.
    public let inode: UInt64
    /// The device the file lives on (`st_dev`); with `inode`, it names the file.
    public let device: UInt64
    /// The device a device file stands for (`st_rdev`); 0 for other files.
    public let representedDevice: UInt64
    /// How many hard links name the file.
    public let linkCount: UInt64
    /// The file system's preferred I/O size for the file (`st_blksize`).
    public let blockSize: UInt64
    /// 512-byte blocks allocated to the file (`st_blocks`): less than `size` for a sparse file.
    public let allocatedBlocks: UInt64
    /// Last access (`st_atim`).
    public var accessTime: Duration { access.duration }
    /// Last change of the content (`st_mtim`).
    public var modificationTime: Duration { modification.duration }
    /// Last change of the content or of the inode: permissions, owner, links (`st_ctim`).
    public var statusChangeTime: Duration { statusChange.duration }
    /// Creation, where the file system records it (`statx`'s birth time), else 0.
    public var creationTime: Duration { creation.duration }

    // The four times as the kernel gave them: a `Duration` (128-bit arithmetic) is made only when
    // one is read, not four on every stat.
    private let access: Timestamp
    private let modification: Timestamp
    private let statusChange: Timestamp
    private let creation: Timestamp

    init(_ stat: uv_stat_t) {
        self = withUnsafePointer(to: stat) { FileInfo($0) }
    }

    /// The `stat` result a finished `uv_fs_stat`/`lstat`/`fstat` request holds (read in place, not copied).
    ///
    /// Inlined, with the reading below: written straight into the caller's result (a temporary
    /// returned from a closure would be copied once more per stat).
    @inline(__always)
    init(statOf request: UnsafeMutablePointer<uv_fs_t>) {
        self.init(UnsafePointer(request.pointer(to: \.statbuf)!))
    }

    /// Reads a `uv_stat_t` field by field, in place.
    @inline(__always)
    init(_ pointer: UnsafePointer<uv_stat_t>) {
        let mode = UInt32(truncatingIfNeeded: pointer.pointee.st_mode)
        self.type = FileType(mode: mode)
        self.size = pointer.pointee.st_size
        self.permissions = mode & 0o7777
        self.mode = mode
        self.userID = UInt32(truncatingIfNeeded: pointer.pointee.st_uid)
        self.groupID = UInt32(truncatingIfNeeded: pointer.pointee.st_gid)
        self.inode = pointer.pointee.st_ino
        self.device = pointer.pointee.st_dev
        self.representedDevice = pointer.pointee.st_rdev
        self.linkCount = pointer.pointee.st_nlink
        self.blockSize = pointer.pointee.st_blksize
        self.allocatedBlocks = pointer.pointee.st_blocks
        self.access = Timestamp(pointer.pointee.st_atim)
        self.modification = Timestamp(pointer.pointee.st_mtim)
        self.statusChange = Timestamp(pointer.pointee.st_ctim)
        self.creation = Timestamp(pointer.pointee.st_birthtim)
    }

    /// A time as `stat` gives it: seconds and nanoseconds since the epoch (nanoseconds below 10⁹, so
    /// two are equal exactly when their durations are).
    private struct Timestamp: Sendable, Hashable {
        let seconds: Int64
        let nanoseconds: Int64

        init(_ time: uv_timespec_t) {
            seconds = Int64(time.tv_sec)
            nanoseconds = Int64(time.tv_nsec)
        }

        var duration: Duration { .seconds(seconds) + .nanoseconds(nanoseconds) }
    }

    /// The parts a watcher compares (size, modification time, mode, inode, device).
    ///
    /// Thread rule: safe from any thread.
    public var status: FileStatus {
        FileStatus(size: size, modificationTime: modificationTime, mode: mode, inode: inode, device: device)
    }

    /// `"regular file, 12 bytes, mode 644, inode 1234 on device 2049"`.
    ///
    /// Thread rule: safe from any thread.
    public var description: String {
        "\(type), \(size) bytes, mode \(String(permissions, radix: 8)), inode \(inode) on device \(device)"
    }
}
