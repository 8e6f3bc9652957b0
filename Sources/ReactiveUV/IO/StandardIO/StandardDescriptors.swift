#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
internal import CLibUV

/// What the standard I/O family asks of the process's descriptors: its backend seam, beside the
/// streams' `UVStream` and `TerminalSettings`. A second backend answers these for its scripted process.
///
/// Descriptors 0, 1 or 2 closed when the first loop is made are opened on `/dev/null`, as Node
/// does: else the next file opened (the loop's epoll instance, which libuv never closes as 0–2)
/// would take the number. `StandardIO` reports them as not open (`EBADF`).
/// Thread rule: safe from any thread.
enum StandardDescriptors {
    /// Bit `n` set: descriptor `n` was closed and now holds `/dev/null`. Computed once, by the first `EventLoop`.
    static let closedAtStart: Int = {
        var mask = 0
        for descriptor: Int32 in 0...2 where fcntl(descriptor, F_GETFD) < 0 && errno == EBADF {
            // `open` returns the lowest free number: this one.
            let opened = open("/dev/null", O_RDWR)
            if opened == descriptor {
                mask |= 1 << Int(descriptor)
            } else if opened >= 0 {
                closeDescriptor(opened)
            }
        }
        return mask
    }()

    static func wasClosedAtStart(_ descriptor: Int32) -> Bool {
        (0...2).contains(descriptor) && closedAtStart & (1 << Int(descriptor)) != 0
    }

    /// What `descriptor` is connected to, or why it cannot be used as a stream (`StandardIO.kind(of:)`).
    static func kind(of descriptor: Int32, name: String) -> Result<StandardIO.Kind, UVError> {
        if StandardDescriptors.wasClosedAtStart(descriptor) {
            return .failure(UVError(code: UV_EBADF.rawValue,
                                    message: "\(name) was not open when the process started (descriptor \(descriptor) was closed; ReactiveUV keeps /dev/null there so that no other file takes its number)",
                                    context: "StandardIO on \(name)"))
        }
        var status = stat()
        if fstat(descriptor, &status) != 0 {
            let code = errno
            if code == EBADF {
                return .failure(UVError(code: UV_EBADF.rawValue,
                                        message: "\(name) is not open (descriptor \(descriptor) is closed)",
                                        context: "StandardIO on \(name)"))
            }
            return .failure(UVError(code: -code, context: "fstat of \(name)"))
        }
        if status.st_mode & S_IFMT == S_IFDIR {
            return .failure(UVError(code: UV_EISDIR.rawValue,
                                    message: "\(name) is a directory, not a byte stream",
                                    context: "StandardIO on \(name)"))
        }
        switch uv_guess_handle(descriptor) {
        case UV_TTY: return .success(.terminal)
        case UV_NAMED_PIPE: return .success(.pipe)
        case UV_TCP: return .success(.tcp)
        case UV_FILE: return .success(.file)
        case UV_UDP:
            return .failure(UVError(code: UV_ENOTSUP.rawValue, message: "\(name) is a datagram socket, not a byte stream",
                                    context: "StandardIO on \(name)"))
        default:
            return .failure(UVError(code: UV_ENOTSUP.rawValue,
                                    message: "\(name) is neither a terminal, a pipe, a stream socket nor a file",
                                    context: "StandardIO on \(name)"))
        }
    }

    /// A close-on-exec duplicate of `descriptor` above 2, for a file read on the pool.
    static func duplicate(_ descriptor: Int32, name: String) -> Result<Int32, UVError> {
        let duplicate = fcntl(descriptor, F_DUPFD_CLOEXEC, 3)
        return duplicate >= 0 ? .success(duplicate) : .failure(UVError(code: -errno, context: "dup of \(name)"))
    }

    /// Writes all of `bytes` to a file or device on `descriptor` now: nil, or the error.
    static func writeAll(_ bytes: [UInt8], to descriptor: Int32, name: String) -> UVError? {
        bytes.withUnsafeBytes { buffer -> UVError? in
            var offset = 0
            while offset < buffer.count {
                let written = write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    return UVError(code: -errno, context: "write to \(name)")
                }
                if written == 0 {
                    return UVError(code: UV_EIO.rawValue, message: "the file accepted none of \(buffer.count - offset) bytes",
                                   context: "write to \(name)")
                }
                offset += written
            }
            return nil
        }
    }
}
