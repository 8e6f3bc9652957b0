internal import CLibUV

/// A change seen by a stat-polling file watch: the status before and after.
///
/// Thread rule: a value type; safe from any thread.
public struct FileStatusChange: Sendable, Hashable, CustomStringConvertible {
    /// The status before the change; nil when the path did not exist.
    public let previous: FileStatus?
    /// The status after the change; nil when the path no longer exists.
    public let current: FileStatus?

    /// Creates a change.
    ///
    /// - Parameters:
    ///   - previous: The status before, or nil if the path did not exist.
    ///   - current: The status after, or nil if the path is gone.
    /// - Returns: The change.
    ///
    /// Thread rule: safe from any thread.
    public init(previous: FileStatus?, current: FileStatus?) {
        self.previous = previous
        self.current = current
    }

    /// `"(size 1, ...) -> (size 2, ...)"`, with "missing" for a path that does not exist.
    ///
    /// Thread rule: safe from any thread.
    public var description: String {
        "(\(previous?.description ?? "missing")) -> (\(current?.description ?? "missing"))"
    }
}

extension FileWatch {
    /// Polls `path` with `stat` every `interval` and sends the previous and current status whenever they differ.
    ///
    /// Works where inotify does not (network file systems, some containers),
    /// at the cost of the polling delay. The path must exist when the
    /// subscription starts (else the signal ends with `ENOENT`, `EACCES`...);
    /// later deletion and re-creation are reported as changes with a nil
    /// `current` and a nil `previous`. The signal never completes on its own.
    ///
    /// On a simulated loop (`Simulation`) it polls the in-memory tree on a timer of the loop, on virtual time.
    ///
    /// - Parameters:
    ///   - path: A file or directory; an empty path fails with `ENOENT`, one with a NUL byte with `EINVAL`,
    ///     before anything is polled.
    ///   - interval: Time between polls (at least 1 ms).
    ///   - loop: The loop that polls; nil for the subscription's home loop.
    /// - Returns: A signal of status changes.
    ///
    /// Thread rule: safe from any thread.
    public static func poll(at path: String, interval: Duration = .seconds(1), on loop: EventLoop? = nil) -> Signal<FileStatusChange> {
        Signal { subscriber in
            // libuv's poll takes a C string: a NUL would poll the path cut there.
            if let refusal = Files.pathRefusal(of: path, in: "FileWatch.poll") {
                subscriber.sendError(refusal)
                return nil
            }
            guard interval > .zero else {
                subscriber.sendError(UVError(code: UVError.invalidArgumentCode, message: "interval must be positive, got \(interval)",
                                             context: "FileWatch.poll(\(path))"))
                return nil
            }
            return LoopBinding.open(on: loop, for: subscriber, what: "FileWatch.poll") { loop in
                if loop.isSimulated { return SimulatedFilePoll.open(path, interval: interval, loop: loop, subscriber: subscriber) }
                let handle = FilePollHandle(loop: loop, path: path, subscriber: subscriber)
                return LoopBinding.started(handle, for: subscriber) { try handle.start(interval: interval) }
            }
        }.debugNamed("+FileWatch.poll(\(path))")
    }
}

/// One `uv_fs_poll_t` feeding a subscriber: `FileWatch.poll`'s side of the watch family's backend
/// seam (`InotifyHub` is `FileWatch.changes`'s).
///
/// Thread rule: loop thread only, except `init` and `dispose()`.
final class FilePollHandle: SubscriberHandle<FileStatusChange>, @unchecked Sendable {
    // `last` is loop thread only, like the rest of the handle (see `SubscriberHandle`); `path` is immutable.
    private let path: String
    /// The status last reported (or found at the start); nil while the path does not exist.
    private var last: FileStatus?

    init(loop: EventLoop, path: String, subscriber: Subscriber<FileStatusChange>) {
        self.path = path
        super.init(loop: loop, byteCount: uv_handle_size(UV_FS_POLL), subscriber: subscriber)
    }

    override var label: String { "fs_poll on \(path) from FileWatch.poll" }

    func start(interval: Duration) throws(UVError) {
        // libuv reports a missing path only from its first poll; checking now gives the error at once.
        last = try FileSystemQuery.status(of: path)
        let handle = pointer(as: uv_fs_poll_t.self)
        try uvCheck(uv_fs_poll_init(loop.uvLoop, handle), "uv_fs_poll_init")
        didOpen()
        let milliseconds = UInt32(clamping: max(1, interval.millisecondsRoundedUp))
        PoolUse.noteUse(on: loop)  // each poll is a stat request on the pool
        do {
            try uvCheck(uv_fs_poll_start(handle, filePollCallback, path, milliseconds), "poll \(path)")
        } catch {
            closeHandle()
            throw error
        }
    }

    /// `previous` comes from what was last reported rather than from libuv, whose first
    /// failed poll compares against a zeroed status and whose poll after a failure
    /// compares against the status from before it.
    fileprivate func deliver(status: Int32, current: UnsafePointer<uv_stat_t>?) {
        if status < 0 {
            guard status == UV_ENOENT.rawValue || status == UV_ENOTDIR.rawValue else {
                fail(UVError(code: status, context: "poll \(path)"))
                return
            }
            guard let previous = last else { return }
            last = nil
            subscriber?.sendNext(FileStatusChange(previous: previous, current: nil))
            return
        }
        let now = current.map { FileStatus($0.pointee) }
        let previous = last
        last = now
        subscriber?.sendNext(FileStatusChange(previous: previous, current: now))
    }

    override func willClose() {
        uvCheckReporting(uv_fs_poll_stop(pointer(as: uv_fs_poll_t.self)), "uv_fs_poll_stop")
    }
}

private let filePollCallback: uv_fs_poll_cb = { handle, status, _, current in
    guard let data = handle?.pointee.data else { return }
    Unmanaged<FilePollHandle>.fromOpaque(data).takeUnretainedValue().deliver(status: status, current: current)
}
