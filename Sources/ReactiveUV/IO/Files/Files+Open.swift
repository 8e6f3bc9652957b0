internal import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension OpenFile {
    /// What an open file may do: read, write, or both. Thread rule: a value type; safe from any thread.
    public enum Mode: Sendable, Hashable {
        /// `O_RDONLY`: writes fail with `EBADF`. Thread rule: safe from any thread.
        case read
        /// `O_RDWR`. Thread rule: safe from any thread.
        case readWrite
        /// `O_WRONLY`: reads fail with `EBADF`. Thread rule: safe from any thread.
        case write
    }

    /// How `Files.open` treats the path. Thread rule: a value type; safe from any thread.
    public struct Options: OptionSet, Sendable, Hashable {
        /// The bits. Thread rule: safe from any thread.
        public let rawValue: UInt8
        /// Makes an option set from its bits. Thread rule: safe from any thread.
        public init(rawValue: UInt8) { self.rawValue = rawValue }

        /// `O_CREAT`: create the file (with `permissions`) if it does not exist. Thread rule: safe from any thread.
        public static let create = Options(rawValue: 1)
        /// `O_TRUNC`: empty the file when it is opened (needs a mode that writes). Thread rule: safe from any thread.
        public static let truncate = Options(rawValue: 2)
        /// `O_APPEND`: every write lands at the end (needs a mode that writes). Thread rule: safe from any thread.
        public static let append = Options(rawValue: 4)
        /// `O_EXCL` with `create`: fail with `EEXIST` if the path exists (needs `create`). Thread rule: safe from any thread.
        public static let exclusive = Options(rawValue: 8)
    }
}

extension Files {
    /// Opens the file at `path` and sends it as an `OpenFile`, then stays subscribed: the subscription owns the file
    /// (disposing it closes the file once running operations end). It completes when `close()` closes the file, and
    /// fails with `EventLoopError.shutDown` when its loop shuts down; `FileSystem.withOpenFile` is the scoped form.
    /// The file is opened with `O_NONBLOCK` (a FIFO for writing with no reader fails with `ENXIO`), then made blocking.
    ///
    /// - Parameters:
    ///   - path: The file.
    ///   - mode: `.read` (default), `.readWrite` or `.write`.
    ///   - options: `create`, `truncate`, `append`, `exclusive`. `truncate` or `append` with `.read`, or `exclusive`
    ///     without `create`, fail with `EINVAL`.
    ///   - permissions: The mode of a file that `create` makes, 0...0o7777 (default 0o644, less the umask); others
    ///     fail with `EINVAL`.
    ///   - loop: The loop that owns the file and runs its requests; nil for the subscription's home loop.
    ///
    /// Thread rule: safe from any thread.
    public static func open(_ path: String, mode: OpenFile.Mode = .read, options: OpenFile.Options = [],
                            permissions: UInt32 = 0o644, on loop: EventLoop? = nil) -> Signal<OpenFile> {
        var flags: Int32 = 0
        return operation("open", on: loop, checks: { () throws(UVError) in
            try FileSystemArguments.check(path, in: "open")
            flags = try openFlags(mode: mode, options: options, permissions: permissions, path: path)
        }, simulated: { simulateOpen($0, path, flags: flags, permissions: permissions) }) { operation in
            let flags = flags
            openFile(operation, "open \(path)", removeIfUnwanted: false) {
                let file = try Files.callNow("open \(path)", { uv_fs_open(nil, $0, path, flags, Int32(bitPattern: permissions), nil) },
                                             read: { result, _ in result })
                Files.setBlocking(file)
                return (file, path)
            }
        }
    }

    /// Creates a new file named `prefix` (a `/` fails with `EINVAL`) and six random characters in `directory` (nil:
    /// `$TMPDIR`, else `/tmp`), opened for reading and writing with mode 0600 (`mkstemp`), and sends it; then as `open`.
    /// Its `path` is the name made; closing does not remove it, but a file made for a subscriber disposed before it
    /// was sent is removed. Thread rule: safe from any thread.
    public static func makeTemporaryFile(prefix: String = "reactiveuv-", in directory: String? = nil,
                                         on loop: EventLoop? = nil) -> Signal<OpenFile> {
        let folder = directory ?? temporaryDirectory()
        let template = temporaryTemplate(prefix, in: folder)
        return operation("makeTemporaryFile", on: loop, checks: { () throws(UVError) in
            try FileSystemArguments.require(!prefix.contains("/"), "the prefix is a name, without '/': \(prefix)", context: "mkstemp \(folder)")
            // An empty directory would put the file in `/`; a NUL would cut the template elsewhere than asked.
            try FileSystemArguments.check(folder, "directory", in: "mkstemp")
            try FileSystemArguments.check(template, "prefix", in: "mkstemp")
        }, simulated: { simulateMakeTemporaryFile($0, template) }) { operation in
            openFile(operation, "open \(template)", removeIfUnwanted: true) {
                // libuv fills the X's of its copy of the template in.
                try Files.callNow("mkstemp \(template)", { uv_fs_mkstemp(nil, $0, template, nil) }) { result, fs in
                    (result, fs.pointee.path.map { String(cString: $0) } ?? template)
                }
            }
        }
    }

    /// `$TMPDIR`, else `/tmp`.
    static func temporaryDirectory() -> String {
        if let value = getenv("TMPDIR"), value.pointee != 0 { return String(cString: value) }
        return "/tmp"
    }

    /// The `mkstemp`/`mkdtemp` template: `prefix` and six X's in `directory`.
    static func temporaryTemplate(_ prefix: String, in directory: String) -> String {
        (directory.hasSuffix("/") ? directory : directory + "/") + prefix + "XXXXXX"
    }

    /// The `open(2)` flags for a mode and options, or `EINVAL` for a combination that makes no sense.
    static func openFlags(mode: OpenFile.Mode, options: OpenFile.Options, permissions: UInt32, path: String) throws(UVError) -> Int32 {
        let context = "Files.open \(path)"
        try FileSystemArguments.require(permissions <= 0o7777, "permissions must be 0...0o7777, not 0o\(String(permissions, radix: 8))",
                                        context: context)
        var flags: Int32 = O_NONBLOCK
        switch mode {
        case .read: flags |= O_RDONLY
        case .readWrite: flags |= O_RDWR
        case .write: flags |= O_WRONLY
        }
        try FileSystemArguments.require(mode != .read || options.isDisjoint(with: [.truncate, .append]),
                                        "truncate and append need a mode that writes (.write or .readWrite), not .read", context: context)
        try FileSystemArguments.require(!options.contains(.exclusive) || options.contains(.create), "exclusive needs create", context: context)
        if options.contains(.create) { flags |= O_CREAT }
        if options.contains(.truncate) { flags |= O_TRUNC }
        if options.contains(.append) { flags |= O_APPEND }
        if options.contains(.exclusive) { flags |= O_EXCL }
        return flags
    }

    /// Runs `open` (it returns the descriptor and its path) in a pool job and sends the file, which the operation
    /// owns until it is closed. With `removeIfUnwanted` (a temporary file) an unwanted file is removed too.
    private static func openFile(_ operation: FileOperation<OpenFile>, _ context: String, removeIfUnwanted: Bool,
                                 _ open: @escaping @Sendable () throws -> (Int32, String)) {
        let discard = { (opened: (Int32, String)) in
            closeNow(opened.0)
            if removeIfUnwanted { runNow("unlink \(opened.1)") { uv_fs_unlink(nil, $0, opened.1, nil) } }
        }
        operation.job(context, { _ in try open() }, discard: discard) { opened in
            deliver(opened: opened, by: operation, discard: discard)
        }
    }

    /// Sends the file `open` made (its descriptor and path), which the operation owns until it is closed; one nobody
    /// wants any more is given to `discard`.
    static func deliver(opened: (Int32, String), by operation: FileOperation<OpenFile>, discard: ((Int32, String)) -> Void) {
        // Disposed on another thread while the job ran: the file sent now would be dropped.
        if operation.isUnwanted { return discard(opened) }
        let file = OpenFile(loop: operation.loop, path: opened.1, descriptor: opened.0)
        // The loop began shutting down while the file opened: it is closed already.
        if file.isClosed { return operation.finish(EventLoopError.shutDown(loop: operation.loop.name)) }
        file.onClose = { closer in
            switch closer {
            case .close: operation.finish()
            case .shutdown: operation.finish(EventLoopError.shutDown(loop: file.loop.name))
            case .dispose, .open: break
            }
        }
        operation.onEnd {
            file.onClose = nil
            file.requestClose(by: .dispose)
        }
        operation.send(file)
    }
}
