internal import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension Files {
    /// Sets the permission bits of `path` to `mode` (`chmod(2)`, following links), then completes; a mode beyond
    /// 0o7777 fails with `EINVAL`, a file the caller does not own with `EPERM`. Thread rule: safe from any thread.
    public static func chmod(_ path: String, _ mode: UInt32, on loop: EventLoop? = nil) -> Signal<Void> {
        single(FileCallContext("chmod", path), on: loop, mode: UInt16(truncatingIfNeeded: mode), checks: { () throws(UVError) in
            try FileSystemArguments.check(path, in: "chmod")
            try FileSystemArguments.check(mode: mode, in: "chmod \(path)")
        }, { uv_fs_chmod($0, $1, path, Int32(mode), $3) })
    }

    /// Changes the owner (`user`) and/or group (`group`) of `path` (`chown(2)`, following links; nil leaves one),
    /// then completes; `EPERM` unless the caller may. Thread rule: safe from any thread.
    public static func chown(_ path: String, user: UInt32? = nil, group: UInt32? = nil, on loop: EventLoop? = nil) -> Signal<Void> {
        // -1 (all bits set) is "leave it" to chown(2).
        let uid = user ?? UInt32.max, gid = group ?? UInt32.max
        return single(FileCallContext("chown", path), on: loop, checks: { () throws(UVError) in
            try FileSystemArguments.check(path, in: "chown")
        }, { uv_fs_chown($0, $1, path, uid, gid, $3) })
    }

    /// `chown` of a symbolic link itself (`lchown(2)`): what it points to keeps its owner.
    /// Thread rule: safe from any thread.
    public static func lchown(_ path: String, user: UInt32? = nil, group: UInt32? = nil, on loop: EventLoop? = nil) -> Signal<Void> {
        let uid = user ?? UInt32.max, gid = group ?? UInt32.max
        return single(FileCallContext("lchown", path), on: loop, checks: { () throws(UVError) in
            try FileSystemArguments.check(path, in: "lchown")
        }, { uv_fs_lchown($0, $1, path, uid, gid, $3) })
    }

    /// Sets the access and modification times of `path` (since the Unix epoch; following links), to the
    /// nanosecond (`utimensat(2)` in a pool job: `uv_fs_utime` keeps microseconds), then completes. A time beyond
    /// ±2^63 seconds fails with `EINVAL`; the kernel clamps one the file system cannot store.
    /// Thread rule: safe from any thread.
    public static func setTimes(_ path: String, access: Duration, modification: Duration, on loop: EventLoop? = nil) -> Signal<Void> {
        setTimes(path, access: access, modification: modification, followLinks: true, call: "setTimes", on: loop)
    }

    /// `setTimes` of a symbolic link itself: what it points to keeps its times. Thread rule: safe from any thread.
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
        try FileSystemArguments.require(timeSpecRange.contains(time), "the \(which) time \(time) is outside what a timespec holds "
                                            + "(\(Int64.min) to \(Int64.max) seconds from 1970)", context: context)
        let (seconds, attoseconds) = time.components
        let nanoseconds = attoseconds / 1_000_000_000
        // A negative time's nanoseconds are below zero: borrow a second.
        return nanoseconds < 0 ? timespec(tv_sec: Int(seconds - 1), tv_nsec: Int(nanoseconds + 1_000_000_000))
                               : timespec(tv_sec: Int(seconds), tv_nsec: Int(nanoseconds))
    }

    /// Sets the size of the file at `path` (`truncate(2)`: cut, or extended with zeros), then completes; a
    /// negative size fails with `EINVAL`. libuv has only `ftruncate`: the file is opened, truncated and closed.
    /// Thread rule: safe from any thread.
    public static func truncate(_ path: String, to size: Int64, on loop: EventLoop? = nil) -> Signal<Void> {
        operation("truncate", on: loop, checks: { () throws(UVError) in
            try FileSystemArguments.check(path, in: "truncate")
            try FileSystemArguments.require(size >= 0, "the size must be 0 or more, not \(size)", context: "truncate \(path)")
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
