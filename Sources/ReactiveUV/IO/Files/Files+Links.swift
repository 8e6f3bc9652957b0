internal import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension Files {
    /// Renames (moves) `source` to `destination` on one file system (`rename(2)`), replacing what is there
    /// atomically (a non-empty directory is `ENOTEMPTY`), then completes; across file systems it fails with `EXDEV`.
    /// Errors name both paths. Thread rule: safe from any thread.
    public static func rename(from source: String, to destination: String, on loop: EventLoop? = nil) -> Signal<Void> {
        single(FileCallContext("rename", source, destination), on: loop, checks: { () throws(UVError) in
            try FileSystemArguments.check(source, "source", in: "rename")
            try FileSystemArguments.check(destination, "destination", in: "rename")
        }, { uv_fs_rename($0, $1, source, destination, $3) })
    }

    /// Copies the file `source` to `destination` with its mode (`uv_fs_copyfile`: a clone sharing the blocks where
    /// the file system can), then completes; errors name both paths. A directory is `EISDIR`; a FIFO, socket, device
    /// or `/proc` file fails with `EINVAL` (the copy would be empty). An existing `destination` is `EEXIST` unless
    /// `overwrite`; one that is not a regular file (`/dev/null`) fails with `EINVAL` and is left alone.
    /// Thread rule: safe from any thread.
    public static func copy(from source: String, to destination: String, overwrite: Bool = false,
                            on loop: EventLoop? = nil) -> Signal<Void> {
        let flags = UV_FS_COPYFILE_FICLONE | (overwrite ? 0 : UV_FS_COPYFILE_EXCL)
        let context = "copyfile \(source) -> \(destination)"
        return operation("copy", on: loop, checks: { () throws(UVError) in
            try FileSystemArguments.check(source, "source", in: "copyfile")
            try FileSystemArguments.check(destination, "destination", in: "copyfile")
        }) { operation in
            // libuv's copy sends as many bytes as `stat` gives the source: look at both ends first.
            operation.job(context, { _ in
                try checkCopySource(source, context: context)
                if overwrite { try checkCopyDestination(destination, context: context) }
            }) {
                operation.request(context, { uv_fs_copyfile($0, $1, source, destination, flags, $2) }) { operation.finish() }
            }
        }
    }

    /// Refuses (pool thread) an existing destination that is not a regular file: libuv's copy truncates it and,
    /// when that fails, removes it (`/dev/null` as root). What `stat` fails on is left to the copy to report.
    private static func checkCopyDestination(_ destination: String, context: String) throws(UVError) {
        var status = Glibc.stat()
        guard fstatat(AT_FDCWD, destination, &status, 0) == 0 else { return }
        let type = FileType(mode: UInt32(status.st_mode))
        // A directory: the copy says EISDIR.
        try FileSystemArguments.require(type == .regular || type == .directory, "the destination is a \(type), not a regular file; copy "
            + "truncates what it replaces and removes it when that fails, so it is left alone: write to it with Files.write or an OpenFile",
                                        context: context)
    }

    /// Refuses (pool thread) a source `uv_fs_copyfile` would copy as empty: anything but a regular file or a
    /// directory, and a regular file whose size is 0 but which holds bytes. What fails here is left to the copy.
    private static func checkCopySource(_ source: String, context: String) throws(UVError) {
        var status = Glibc.stat()
        guard fstatat(AT_FDCWD, source, &status, 0) == 0 else { return }
        let type = FileType(mode: UInt32(status.st_mode))
        // A directory: the copy says EISDIR.
        try FileSystemArguments.require(type == .regular || type == .directory, "the source is a \(type), not a regular file; copy sends "
            + "the size the file system gives (0 for it), so the copy would be empty: stream it with Files.chunks instead", context: context)
        guard type == .regular, status.st_size <= 0 else { return }
        // O_NONBLOCK: the name may have become a FIFO since the stat.
        let descriptor = Glibc.open(source, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard descriptor >= 0 else { return }
        defer { Glibc.close(descriptor) }
        var byte: UInt8 = 0
        try FileSystemArguments.require(pread(descriptor, &byte, 1, 0) != 1, "the source says its size is 0 but holds bytes (a /proc or /sys "
            + "file); copy sends the size the file system gives, so the copy would be empty: read it with Files.read and write it with Files.write",
                                        context: context)
    }

    /// Makes `path` another name (a hard link) of the existing file `existing` (`link(2)`), then completes: an
    /// existing `path` is `EEXIST`, a directory `EPERM`, another file system `EXDEV`. Thread rule: safe from any thread.
    public static func link(at path: String, pointingTo existing: String, on loop: EventLoop? = nil) -> Signal<Void> {
        single(FileCallContext("link", path, existing), on: loop, checks: { () throws(UVError) in
            try FileSystemArguments.check(path, in: "link")
            try FileSystemArguments.check(existing, "target", in: "link")
        }, { uv_fs_link($0, $1, existing, path, $3) })
    }

    /// Makes a symbolic link at `path` whose content is `target` (`symlink(2)`, unchecked; a relative target is
    /// resolved from the link's directory), then completes; an existing `path` is `EEXIST`. Thread rule: safe from any thread.
    public static func symbolicLink(at path: String, pointingTo target: String, on loop: EventLoop? = nil) -> Signal<Void> {
        single(FileCallContext("symlink", path, target), on: loop, checks: { () throws(UVError) in
            try FileSystemArguments.check(path, in: "symlink")
            try FileSystemArguments.check(target, "target", in: "symlink")
        }, { uv_fs_symlink($0, $1, target, path, 0, $3) })
    }

    /// Sends what the symbolic link at `path` contains (`readlink(2)`), unresolved; anything else is `EINVAL`, and a
    /// target that is not valid UTF-8 fails with `EILSEQ` (a `String` would change it). Thread rule: safe from any thread.
    public static func readLink(_ path: String, on loop: EventLoop? = nil) -> Signal<String> {
        pathAnswer("readLink", "readlink", path, on: loop, simulated: { files throws(UVError) in
            try files.readLink(path, context: "readlink \(path)")
        }) { uv_fs_readlink($0, $1, path, $2) }
    }

    /// Sends the absolute path of `path` with every link, `.` and `..` resolved (`realpath(3)`); a missing path is
    /// `ENOENT`, one that is not valid UTF-8 `EILSEQ`. Thread rule: safe from any thread.
    public static func realPath(_ path: String, on loop: EventLoop? = nil) -> Signal<String> {
        pathAnswer("realPath", "realpath", path, on: loop) { uv_fs_realpath($0, $1, path, $2) }
    }

    /// A call whose answer is a path (`readlink`, `realpath`): sent if it is valid UTF-8, else `EILSEQ`.
    private static func pathAnswer(
        _ name: StaticString, _ call: StaticString, _ path: String, on loop: EventLoop?,
        simulated: ((SimulatedFileSystem) throws(UVError) -> String)? = nil,
        _ start: @escaping (UnsafeMutablePointer<uv_loop_t>, UnsafeMutablePointer<uv_fs_t>, @escaping uv_fs_cb) -> Int32
    ) -> Signal<String> {
        operation(name, on: loop, checks: { () throws(UVError) in try FileSystemArguments.check(path, in: "\(call)") },
                  simulated: simulated.map { answer in { operation in operation.simulate("\(call) \(path)", answer) } }) { operation in
            let context = "\(call) \(path)"
            operation.request(context, start, read: { _, fs in
                String(validatingCString: fs.pointee.ptr.assumingMemoryBound(to: CChar.self))
            }) { answer in
                guard let answer else {
                    let message = "the answer is not valid UTF-8, so a String cannot hold it exactly"
                    return operation.finish(UVError(code: UV_EILSEQ.rawValue, message: message, context: context))
                }
                operation.send(answer)
                operation.finish()
            }
        }
    }
}
