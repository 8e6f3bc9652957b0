internal import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension Files {
    /// Sets the permission bits of `path` (`chmod(2)`, following symbolic links).
    ///
    /// - Parameters:
    ///   - path: The file.
    ///   - mode: 0...0o7777 (permissions, set-user-ID, set-group-ID, sticky); more is `EINVAL` before any request.
    ///   - loop: The loop that runs the request; nil for the subscription's home loop.
    /// - Returns: A signal that completes with no value; `EPERM` when the caller does not own the file.
    ///
    /// Thread rule: safe from any thread.
    public static func chmod(_ path: String, _ mode: UInt32, on loop: EventLoop? = nil) -> Signal<Void> {
        single(FileCallContext("chmod", path), on: loop, checks: { () throws(UVError) in
            try FileSystemArguments.check(path, in: "chmod")
            try FileSystemArguments.check(mode: mode, in: "chmod \(path)")
        }, { uv_fs_chmod($0, $1, path, Int32(mode), $3) })
    }

    /// Changes the owner and/or group of `path` (`chown(2)`, following symbolic links).
    ///
    /// - Parameters:
    ///   - path: The file.
    ///   - user: The new owner's user ID; nil leaves it.
    ///   - group: The new group ID; nil leaves it.
    ///   - loop: The loop that runs the request; nil for the subscription's home loop.
    /// - Returns: A signal that completes with no value; `EPERM` unless the caller may.
    ///
    /// Thread rule: safe from any thread.
    public static func chown(_ path: String, user: UInt32? = nil, group: UInt32? = nil, on loop: EventLoop? = nil) -> Signal<Void> {
        // -1 (all bits set) is "leave it" to chown(2).
        let uid = user ?? UInt32.max, gid = group ?? UInt32.max
        return single(FileCallContext("chown", path), on: loop, checks: { () throws(UVError) in
            try FileSystemArguments.check(path, in: "chown")
        }, { uv_fs_chown($0, $1, path, uid, gid, $3) })
    }

    /// `chown` of a symbolic link itself (`lchown(2)`): what it points to keeps its owner.
    ///
    /// - Parameters:
    ///   - path: The link (or any file: then as `chown`).
    ///   - user: The new owner's user ID; nil leaves it.
    ///   - group: The new group ID; nil leaves it.
    ///   - loop: The loop that runs the request; nil for the subscription's home loop.
    /// - Returns: A signal that completes with no value.
    ///
    /// Thread rule: safe from any thread.
    public static func lchown(_ path: String, user: UInt32? = nil, group: UInt32? = nil, on loop: EventLoop? = nil) -> Signal<Void> {
        let uid = user ?? UInt32.max, gid = group ?? UInt32.max
        return single(FileCallContext("lchown", path), on: loop, checks: { () throws(UVError) in
            try FileSystemArguments.check(path, in: "lchown")
        }, { uv_fs_lchown($0, $1, path, uid, gid, $3) })
    }

    /// Sets the access and modification times of `path` (following symbolic links), to the nanosecond
    /// (`utimensat(2)` in a pool job: libuv's `uv_fs_utime` keeps microseconds).
    ///
    /// A time beyond ±2^63 seconds fails with `EINVAL`; the kernel clamps one the file system cannot store.
    ///
    /// - Parameters:
    ///   - path: The file.
    ///   - access: The new access time, since the Unix epoch (negative for before 1970).
    ///   - modification: The new modification time, since the Unix epoch.
    ///   - loop: The loop that runs the job; nil for the subscription's home loop.
    /// - Returns: A signal that completes with no value.
    ///
    /// Thread rule: safe from any thread.
    public static func setTimes(_ path: String, access: Duration, modification: Duration, on loop: EventLoop? = nil) -> Signal<Void> {
        setTimes(path, access: access, modification: modification, followLinks: true, call: "setTimes", on: loop)
    }

    /// `setTimes` of a symbolic link itself (`AT_SYMLINK_NOFOLLOW`): what it points to keeps its times.
    ///
    /// - Parameters:
    ///   - path: The link (or any file: then as `setTimes`).
    ///   - access: The new access time, since the Unix epoch.
    ///   - modification: The new modification time, since the Unix epoch.
    ///   - loop: The loop that runs the job; nil for the subscription's home loop.
    /// - Returns: A signal that completes with no value.
    ///
    /// Thread rule: safe from any thread.
    public static func setLinkTimes(_ path: String, access: Duration, modification: Duration, on loop: EventLoop? = nil) -> Signal<Void> {
        setTimes(path, access: access, modification: modification, followLinks: false, call: "setLinkTimes", on: loop)
    }

    private static func setTimes(_ path: String, access: Duration, modification: Duration, followLinks: Bool, call: StaticString,
                                 on loop: EventLoop?) -> Signal<Void> {
        let context = "utimensat \(path)"
        var times: [timespec] = []
        return operation(call, on: loop, checks: { () throws(UVError) in
            try FileSystemArguments.check(path, in: "utimensat")
            times = [try timeSpec(access, "access", context: context), try timeSpec(modification, "modification", context: context)]
        }) { operation in
            let times = times
            operation.job(context, { _ in
                let result = times.withUnsafeBufferPointer { utimensat(AT_FDCWD, path, $0.baseAddress, followLinks ? 0 : AT_SYMLINK_NOFOLLOW) }
                if result != 0 { throw systemCallError(context) }
            }) { operation.finish() }
        }
    }

    /// The times a `timespec` holds.
    private static let timeSpecRange = Duration.seconds(Int64.min)..<(Duration.seconds(Int64.max) + .seconds(1))

    /// A time since the epoch as a `timespec` (nanoseconds in 0..<1e9), or `EINVAL` for one it cannot hold
    /// (`components` would trap on seconds beyond `Int64`).
    private static func timeSpec(_ time: Duration, _ which: String, context: String) throws(UVError) -> timespec {
        guard timeSpecRange.contains(time) else {
            throw UVError(code: UVError.invalidArgumentCode,
                          message: "the \(which) time \(time) is outside what a timespec holds (\(Int64.min) to \(Int64.max) seconds from 1970)",
                          context: context)
        }
        let (seconds, attoseconds) = time.components
        var nanoseconds = attoseconds / 1_000_000_000
        var wholeSeconds = seconds
        if nanoseconds < 0 {
            nanoseconds += 1_000_000_000
            wholeSeconds -= 1
        }
        return timespec(tv_sec: Int(wholeSeconds), tv_nsec: Int(nanoseconds))
    }

    /// Sets the size of the file at `path` (`truncate(2)`): cut, or extended with zeros (a sparse hole); libuv has
    /// only `ftruncate`, so it opens, truncates and closes the file.
    ///
    /// - Parameters:
    ///   - path: The file (a missing one is `ENOENT`, a directory `EISDIR`).
    ///   - size: The new size, 0 or more (a negative one is `EINVAL` before any request).
    ///   - loop: The loop that runs the requests; nil for the subscription's home loop.
    /// - Returns: A signal that completes with no value.
    ///
    /// Thread rule: safe from any thread.
    public static func truncate(_ path: String, to size: Int64, on loop: EventLoop? = nil) -> Signal<Void> {
        operation("truncate", on: loop, checks: { () throws(UVError) in
            try FileSystemArguments.check(path, in: "truncate")
            guard size >= 0 else {
                throw UVError(code: UVError.invalidArgumentCode, message: "the size must be 0 or more, not \(size)", context: "truncate \(path)")
            }
        }) { operation in
            // The descriptor, once open: closed by the close step, or at the end if that never ran.
            var file: uv_file = -1
            operation.open(path, flags: O_WRONLY | O_NONBLOCK | O_CLOEXEC) { opened in
                file = opened
                operation.onEnd { if file >= 0 { closeNow(file) } }
                operation.request("ftruncate \(path)", { uv_fs_ftruncate($0, $1, opened, size, $2) }) {
                    // A close that ran released the descriptor, whatever its result; one cancelled before it ran did not.
                    operation.request("close \(path)", { uv_fs_close($0, $1, opened, $2) }, onResult: { result in
                        if result != Int(UVError.cancelledCode) { file = -1 }
                    }) { operation.finish() }
                }
            }
        }
    }
}
