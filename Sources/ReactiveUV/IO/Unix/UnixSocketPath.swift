internal import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A Unix-domain socket's name, checked at the door and turned into a `sockaddr_un`.
///
/// libuv 1.44's `uv_pipe_bind` and `uv_pipe_connect` copy the path into
/// `sun_path` with a silent truncation, and do not take abstract names; so
/// ReactiveUV makes the socket, binds or connects it itself, and hands the
/// descriptor to libuv with `uv_pipe_open`.
struct UnixSocketPath: CustomStringConvertible {
    /// `sun_path` holds 108 bytes: a path of at most 107 and its terminating NUL,
    /// or an abstract name of at most 107 after its leading NUL.
    static let maxByteCount = 107

    /// The name as given ("/run/app.sock", or "\0name" for an abstract name).
    let path: String
    /// The bytes that go into `sun_path` (with the leading NUL for an abstract name, without a terminating NUL).
    private let bytes: [UInt8]

    /// A name in Linux's abstract namespace (a leading NUL): no file, gone with its socket.
    var isAbstract: Bool { bytes.first == 0 }

    /// The path for messages; an abstract name is shown as `ss` shows it, `@name`.
    var description: String { Self.display(path) }

    /// `path` for a message: an abstract name as `ss` shows it, each NUL an `@` ("\0app" is "@app"),
    /// so that no error or log line carries a NUL byte (a log reader takes the line for binary data).
    static func display(_ path: String) -> String {
        path.utf8.first == 0 ? String(path.map { $0 == "\0" ? "@" : $0 }) : path
    }

    /// Checks `path`: not empty, no NUL inside a file path, and within `sun_path`.
    ///
    /// - Throws: `EINVAL` for an empty path or a NUL inside a file path;
    ///   `ENAMETOOLONG` naming the 107-byte limit.
    init(_ path: String, context: String) throws(UVError) {
        let bytes = Array(path.utf8)
        guard !bytes.isEmpty else {
            throw UVError(code: UVError.invalidArgumentCode, message: "the socket path is empty", context: context)
        }
        if bytes[0] != 0, bytes.contains(0) {
            throw UVError(code: UVError.invalidArgumentCode,
                          message: "the socket path contains a NUL byte (only an abstract name starts with one)",
                          context: context)
        }
        let nameCount = bytes[0] == 0 ? bytes.count - 1 : bytes.count
        guard nameCount <= UnixSocketPath.maxByteCount else {
            throw UVError(code: UV_ENAMETOOLONG.rawValue,
                          message: "the socket \(bytes[0] == 0 ? "abstract name" : "path") is \(nameCount) bytes; a Unix socket's name holds at most \(UnixSocketPath.maxByteCount) (sun_path is 108 bytes including the NUL), and it is never truncated",
                          context: context)
        }
        if bytes[0] == 0 && bytes.count == 1 {
            throw UVError(code: UVError.invalidArgumentCode, message: "the abstract socket name is empty", context: context)
        }
        self.path = path
        self.bytes = bytes
    }

    /// Calls `body` with the `sockaddr_un` and its length.
    func withSockaddr<Result>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> Result) -> Result {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { destination in
            destination.copyBytes(from: bytes)  // checked in init: at most 108 bytes
        }
        let pathOffset = MemoryLayout<sockaddr_un>.offset(of: \sockaddr_un.sun_path) ?? 2
        // A file path counts its terminating NUL (the rest of sun_path is zero); an abstract name is exactly its bytes.
        let length = pathOffset + bytes.count + (isAbstract ? 0 : 1)
        return withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(length)) }
        }
    }

    /// The directory a file path is in, for messages.
    var directory: String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }
}

/// A file's identity (device and inode), to remove only the socket file this process created.
struct FileIdentity: Equatable {
    let device: UInt64
    let inode: UInt64

    /// The identity of the file at `path` (not following a symbolic link), or nil when there is none.
    init?(path: String) {
        var status = stat()
        guard lstat(path, &status) == 0 else { return nil }
        self.init(status)
    }

    /// The identity `status` (of `stat` or `fstat`) names.
    init(_ status: stat) {
        device = UInt64(status.st_dev)
        inode = UInt64(status.st_ino)
    }
}

/// The socket descriptors behind `UnixSocket`: made, bound or connected here, then handed to libuv.
enum UnixSocketDescriptor {
    /// A new non-blocking, close-on-exec `AF_UNIX` stream socket.
    static func make(context: String) throws(UVError) -> Int32 {
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw UVError(code: -errno, context: "socket(AF_UNIX) for \(context)") }
        return descriptor
    }

    /// A bound socket not listening yet: its descriptor, and for a file path the socket file it
    /// created and the path's lock (see `UnixSocketLock`), both to be let go of when it stops listening.
    struct Bound {
        let descriptor: Int32
        let createdFile: FileIdentity?
        let lock: UnixSocketLock?
    }

    /// Takes the path's lock, binds a new socket to `path` (removing a stale socket file first when
    /// asked), and applies `permissions`.
    static func bind(_ path: UnixSocketPath, options: UnixSocketOptions, context: String) throws(UVError) -> Bound {
        if path.isAbstract && options.permissions != nil {
            throw UVError(code: UVError.invalidArgumentCode,
                          message: "permissions apply to a socket file; an abstract name (\(path)) has none",
                          context: context)
        }
        // chmod would drop the bits beyond 0o7777 (file type bits, a typo) without a word, as `Files.chmod` refuses them.
        if let permissions = options.permissions, permissions > 0o7777 {
            throw UVError(code: UVError.invalidArgumentCode,
                          message: "permissions 0o\(String(permissions, radix: 8)) have bits beyond 0o7777 (permissions, set-ID and sticky)",
                          context: context)
        }
        // Taken before the probe, the unlink and the bind: no other server of ours interleaves with them (see UnixSocketLock).
        let lock = path.isAbstract ? nil : try UnixSocketLock.acquire(for: path, context: context) { code in
            bindError(code, path: path, options: options, context: context)
        }
        let descriptor: Int32
        do throws(UVError) {
            descriptor = try make(context: context)
        } catch {
            lock?.release()
            throw error
        }
        do throws(UVError) {
            var result = path.withSockaddr { Glibc.bind(descriptor, $0, $1) }
            if result != 0 && errno == EADDRINUSE && !path.isAbstract && options.removeStaleSocketFile {
                try removeStaleSocketFile(path, context: context)
                result = path.withSockaddr { Glibc.bind(descriptor, $0, $1) }
            }
            if result != 0 { throw bindError(errno, path: path, options: options, context: context) }
            guard !path.isAbstract else { return Bound(descriptor: descriptor, createdFile: nil, lock: nil) }
            let identity = FileIdentity(path: path.path)
            if let permissions = options.permissions, chmod(path.path, permissions) != 0 {
                let error = UVError(code: -errno, message: "could not set the socket file's permissions to \(String(permissions, radix: 8))",
                                    context: context)
                if let identity { removeSocketFile(path.path, ifStill: identity) }
                throw error
            }
            return Bound(descriptor: descriptor, createdFile: identity, lock: lock)
        } catch {
            Glibc.close(descriptor)
            lock?.release()
            throw error
        }
    }

    /// Connects a new socket to `path` (at once: a Unix socket's connect does not wait).
    static func connect(_ path: UnixSocketPath, context: String) throws(UVError) -> Int32 {
        let descriptor = try make(context: context)
        var result: Int32
        repeat {
            result = path.withSockaddr { Glibc.connect(descriptor, $0, $1) }
        } while result != 0 && errno == EINTR
        if result != 0 {
            let code = errno
            Glibc.close(descriptor)
            throw connectError(code, path: path, context: context)
        }
        return descriptor
    }

    /// Removes `path` if it is a socket nobody listens on (a connection attempt is refused).
    private static func removeStaleSocketFile(_ path: UnixSocketPath, context: String) throws(UVError) {
        var status = stat()
        guard lstat(path.path, &status) == 0 else { return }  // gone since: bind again
        guard (status.st_mode & S_IFMT) == S_IFSOCK else {
            throw UVError(code: UV_EADDRINUSE.rawValue,
                          message: "\(path) exists and is not a socket: removeStaleSocketFile removes only a socket file nobody listens on",
                          context: context)
        }
        let probe = try make(context: context)
        defer { Glibc.close(probe) }
        var result: Int32
        repeat {
            result = path.withSockaddr { Glibc.connect(probe, $0, $1) }
        } while result != 0 && errno == EINTR
        // Accepted, or refused for a full backlog (EAGAIN): a server is there. Refused outright: nobody listens.
        if result == 0 || errno != ECONNREFUSED {
            throw UVError(code: UV_EADDRINUSE.rawValue,
                          message: "a server is listening on \(path): the socket file is not stale, so it was not removed",
                          context: context)
        }
        if unlink(path.path) != 0 && errno != ENOENT {
            throw UVError(code: -errno, message: "could not remove the stale socket file \(path)", context: context)
        }
    }

    /// Unlinks `path` only if it is still the file `identity` names (another server may have replaced it).
    static func removeSocketFile(_ path: String, ifStill identity: FileIdentity) {
        guard FileIdentity(path: path) == identity else { return }
        if unlink(path) != 0 && errno != ENOENT {
            reportMisuse("the socket file \(path) could not be removed: \(String(cString: strerror(errno)))")
        }
    }

    private static func bindError(_ code: Int32, path: UnixSocketPath, options: UnixSocketOptions, context: String) -> UVError {
        let message: String
        switch code {
        case EADDRINUSE where path.isAbstract:
            message = "the abstract name \(path) is taken: another socket is bound to it"
        case EADDRINUSE:
            message = "\(path) already exists (a socket file left by a process that ended, another server's socket, or another file); pass removeStaleSocketFile: true to remove a socket file nobody listens on"
        case ENOENT where FileIdentity(path: path.directory) != nil:
            // The directory is there, but its file system makes no socket files (/proc).
            message = "could not create \(path): the file system of \(path.directory) does not make socket files there"
        case ENOENT:
            message = "the directory \(path.directory) does not exist"
        case EACCES:
            message = "permission denied: this process may not create \(path) (write and search permission on \(path.directory) are needed)"
        default:
            return UVError(code: -code, context: "\(context): bind to \(path)")
        }
        return UVError(code: -code, message: message, context: context)
    }

    /// "a regular file", "a directory"... (`FileType`'s words): what is at a file path when it is there and
    /// is not a socket; else nil.
    private static func nonSocketKind(at path: UnixSocketPath) -> String? {
        var status = stat()
        guard !path.isAbstract, stat(path.path, &status) == 0 else { return nil }
        switch FileType(mode: UInt32(status.st_mode)) {
        case .socket: return nil
        case .unknown: return "a file of unknown type"
        case let type: return "a \(type)"
        }
    }

    private static func connectError(_ code: Int32, path: UnixSocketPath, context: String) -> UVError {
        let message: String
        switch code {
        case ENOENT: message = "no socket at \(path)"
        case ECONNREFUSED:
            // Linux refuses a connect to any file that is not a socket the same way: say which it is.
            if let kind = nonSocketKind(at: path) {
                message = "\(path) is \(kind), not a socket: nothing can listen there"
            } else if path.isAbstract {
                message = "nobody listens on the abstract name \(path) (it has no file: its server is not running)"
            } else {
                message = "nobody listens on \(path) (a socket file left by a server that ended?)"
            }
        case EAGAIN: message = "the server on \(path) has a full accept backlog"
        case EACCES: message = "permission denied: this process may not connect to \(path) (write permission on the socket file is needed)"
        default: return UVError(code: -code, context: "\(context): connect to \(path)")
        }
        return UVError(code: -code, message: message, context: context)
    }
}
