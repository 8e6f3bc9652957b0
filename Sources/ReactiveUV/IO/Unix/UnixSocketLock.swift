internal import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The lock a Unix-socket server holds on its path: `flock` on a file beside the socket, named
/// the socket's path plus `.lock` (`/run/app.sock.lock`).
///
/// Binding a path is several steps (probe a stale file and unlink it, bind, listen): two servers
/// starting at once could interleave them, one unlinking the other's fresh file. So each server
/// takes this lock first and keeps it until its socket file is gone; a server that finds it taken
/// fails with `EADDRINUSE`, touching nothing. The holder removes the lock file after the socket
/// file; one left by a server that died is harmless (the kernel released the lock). An abstract
/// name needs no lock: its bind is one step.
final class UnixSocketLock {
    // Immutable but for `descriptor`, which only `release()` changes: owned by one listener, on its loop thread.
    let path: String
    private var descriptor: Int32
    private let identity: FileIdentity

    private init(path: String, descriptor: Int32, identity: FileIdentity) {
        self.path = path
        self.descriptor = descriptor
        self.identity = identity
    }

    /// Takes the lock of `socketPath`: at once or not at all (it never waits for another server).
    ///
    /// - Throws: `EADDRINUSE` when another server holds it; the bind's errors (`ENOENT`,
    ///   `EACCES`...) when the lock file cannot be made, as the socket file could not be either;
    ///   `ELOOP` for a symbolic link at the lock's path, `EISDIR` for a directory, `EADDRINUSE`
    ///   for another file that is not a regular one (a FIFO).
    static func acquire(for socketPath: UnixSocketPath, context: String,
                        openError: (Int32) -> UVError) throws(UVError) -> UnixSocketLock {
        let path = socketPath.path + ".lock"
        // A holder that removes the file between our open and our lock leaves us a lock on a file
        // no path names: then the lock is taken again on the file the path names now.
        for _ in 0..<16 {
            // O_NONBLOCK: a FIFO put there must not hold the loop thread in its open.
            let descriptor = open(path, O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0o644)
            guard descriptor >= 0 else { throw lockFileError(errno, path: path, socketPath: socketPath, context: context, openError: openError) }
            var status = stat()
            guard fstat(descriptor, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG else {
                close(descriptor)
                throw UVError(code: UV_EADDRINUSE.rawValue,
                              message: "\(path), the lock file beside the socket, is not a regular file: remove it", context: context)
            }
            var result: Int32
            repeat {
                result = flock(descriptor, LOCK_EX | LOCK_NB)
            } while result != 0 && errno == EINTR
            if result != 0 {
                let code = errno
                close(descriptor)
                if code == EWOULDBLOCK {
                    throw UVError(code: UV_EADDRINUSE.rawValue,
                                  message: "another server is binding or serving \(socketPath): it holds the lock file \(path)",
                                  context: context)
                }
                throw UVError(code: -code, message: "could not lock \(path), the lock file beside the socket", context: context)
            }
            let identity = FileIdentity(status)
            if FileIdentity(path: path) == identity {
                return UnixSocketLock(path: path, descriptor: descriptor, identity: identity)
            }
            close(descriptor)
        }
        throw UVError(code: UV_EADDRINUSE.rawValue,
                      message: "the lock file \(path) kept being replaced while this server tried to lock it", context: context)
    }

    /// Removes the lock file (if the path still names it) and releases the lock. Once; later calls do nothing.
    func release() {
        guard descriptor >= 0 else { return }
        // Removed while still held: a server that opened it meanwhile sees it replaced and opens again.
        if FileIdentity(path: path) == identity, unlink(path) != 0, errno != ENOENT {
            reportMisuse("the lock file \(path) could not be removed: \(String(cString: strerror(errno)))")
        }
        close(descriptor)
        descriptor = -1
    }

    deinit { release() }

    private static func lockFileError(_ code: Int32, path: String, socketPath: UnixSocketPath, context: String,
                                      openError: (Int32) -> UVError) -> UVError {
        switch code {
        case ELOOP:
            return UVError(code: -code, message: "\(path), the lock file beside the socket, is a symbolic link: it is never followed; remove it",
                           context: context)
        case EISDIR:
            return UVError(code: -code, message: "\(path), the lock file beside the socket, is a directory: remove it", context: context)
        default:
            // The directory refuses a new file: the socket's own bind would fail the same way, and says why.
            return openError(code)
        }
    }
}
