internal import CLibUV
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A file opened by `Files.open` or `Files.makeTemporaryFile`: positional reads and writes, `fstat`, sync,
/// truncate and close, each a cold signal run on libuv's thread pool (and an `async throws` function on
/// `FileSystem` that takes the file first).
///
/// The file belongs to the subscription that opened it and to its `loop`: disposing the subscription, `close()`
/// or the loop's shutdown closes it, once. Operations may start from any thread and run at once (`pread`,
/// `pwrite`: no shared offset); appends run one after another. A close waits for the operations running on the
/// pool (a descriptor is never reused under them); queued and later ones fail with `EBADF` naming who closed
/// the file. A path renamed over or deleted meanwhile leaves the file on the old inode. On a simulated loop each
/// operation is one callback answered from the simulation's in-memory tree.
/// Thread rule: safe from any thread.
public final class OpenFile: @unchecked Sendable, CustomStringConvertible {
    // `path` and `loop` are immutable, `closedBy` atomic; the rest is loop thread only (operations hop there).
    /// Who closed a file: named in the `EBADF` of later operations.
    enum Closer: UInt8 {
        case open = 0, dispose, close, shutdown

        var phrase: String {
            switch self {
            case .open: "open"
            case .dispose: "closed when the subscription of its Files.open was disposed"
            case .close: "closed by its close()"
            case .shutdown: "closed by the shutdown of its loop"
            }
        }
    }

    private enum State {
        case open(Int32)
        /// A close was asked while jobs ran on the pool: the descriptor closes when the last one ends.
        case closing(Int32, Closer)
        case closed(Closer)
    }

    /// The path the file was opened at (for a temporary file: the name made). Thread rule: safe from any thread.
    public let path: String

    /// The loop whose thread runs the file's requests and owns its descriptor. Thread rule: safe from any thread.
    public let loop: EventLoop

    private var state: State
    private let closedBy = Atomic<UInt8>(Closer.open.rawValue)
    /// Jobs queued or running with the descriptor (by identity).
    private var jobs: [ObjectIdentifier: FileSystemRequest] = [:]
    private var closeWaiters: [(UVError?) -> Void] = []
    private var shutdownRegistration: (any Disposable)?
    /// Appends waiting for the one in flight (each starts the next when it ends).
    var appends: [() -> Void] = []
    var appendRunning = false
    /// Told once when the descriptor is closed (the open subscription ends its subscriber).
    var onClose: ((Closer) -> Void)?

    /// Takes over `descriptor` (loop thread); the loop's shutdown closes it.
    init(loop: EventLoop, path: String, descriptor: Int32) {
        self.loop = loop
        self.path = path
        self.state = .open(descriptor)
        shutdownRegistration = loop.shutdownObservers.add { [self] in
            shutdownRegistration = nil
            requestClose(by: .shutdown)
        }
        // The loop is already closing its handles: nothing else will close this.
        if shutdownRegistration == nil { requestClose(by: .shutdown) }
    }

    deinit {
        if case .open(let descriptor) = state {
            assertionFailure("OpenFile \(path) (descriptor \(descriptor)) was released while open: its subscription leaked")
        }
    }

    /// `OpenFile(<path>)`. Thread rule: safe from any thread.
    public var description: String { "OpenFile(\(path))" }

    /// Whether the file has been closed (or its close has begun), by `close()`, a dispose or a shutdown.
    /// Thread rule: safe from any thread.
    public var isClosed: Bool { closedBy.load(ordering: .acquiring) != Closer.open.rawValue }

    /// The `EBADF` of an operation on a closed file, or nil while it is open (any thread).
    func closedError(_ operation: String) -> UVError? {
        let closer = Closer(rawValue: closedBy.load(ordering: .acquiring)) ?? .close
        guard closer != .open else { return nil }
        return UVError(code: UV_EBADF.rawValue, message: "the file was \(closer.phrase)", context: "\(operation) \(path)")
    }

    // MARK: - jobs (loop thread)

    /// Queues `work` with the descriptor on the pool; `completion` gets its result on the loop thread. Returns the
    /// job (the caller's disposable), or nil after `completion` got the failure.
    /// On a simulated loop `simulated` runs instead, as one callback of the loop (without it the job is refused).
    @discardableResult
    func run<Value: Sendable>(_ operation: String,
                              _ work: @escaping @Sendable (Int32, JobStopFlag) throws -> Value,
                              simulated: SimulatedFileWork<Value>? = nil,
                              completion: @escaping (Result<Value, any Error>) -> Void) -> FileOperation<Value>? {
        guard case .open(let descriptor) = state else {
            completion(.failure(closedError(operation) ?? UVError(code: UV_EBADF.rawValue, context: "\(operation) \(path)")))
            return nil
        }
        let job = FileOperation<Value>(loop: loop, output: .handler { [self] result in
            // Cancelled by a close before it ran: say who closed the file.
            if case .failure(let error as UVError) = result, error.code == UVError.cancelledCode, let closed = closedError(operation) {
                completion(.failure(UVError(code: closed.code, message: "\(closed.message) (\(error.message))", context: closed.context)))
            } else {
                completion(result)
            }
        })
        let key = ObjectIdentifier(job)
        jobs[key] = job
        job.onEnd { [self] in jobEnded(key) }
        if let simulated, loop.isSimulated {
            job.simulate("\(operation) \(path)") { files throws(UVError) in try simulated(files, descriptor) }
        } else {
            job.job("\(operation) \(path)", { stop in try work(descriptor, stop) }) { [job] value in
                job.send(value)
                job.finish()
            }
        }
        return job.isRunning ? job : nil
    }

    private func jobEnded(_ key: ObjectIdentifier) {
        jobs[key] = nil
        if jobs.isEmpty, case .closing(let descriptor, let closer) = state {
            closeNow(descriptor, by: closer)
        }
    }

    // MARK: - closing (loop thread)

    /// Closes the descriptor now, or once the running jobs end; `waiter` learns the outcome (nil for a second close).
    func requestClose(by closer: Closer, waiter: ((UVError?) -> Void)? = nil) {
        switch state {
        case .open(let descriptor):
            closedBy.store(closer.rawValue, ordering: .releasing)
            if let waiter { closeWaiters.append(waiter) }
            shutdownRegistration?.dispose()
            shutdownRegistration = nil
            if jobs.isEmpty {
                closeNow(descriptor, by: closer)
            } else {
                state = .closing(descriptor, closer)
                // Queued jobs never run; the last running one closes the descriptor (a dispose or a shutdown stops a long write).
                for job in Array(jobs.values) { job.cancel(stopping: closer != .close) }
            }
        case .closing:
            if let waiter { closeWaiters.append(waiter) }
        case .closed:
            waiter?(nil)
        }
    }

    /// Closes now on the loop thread (closing a local file does not block).
    private func closeNow(_ descriptor: Int32, by closer: Closer) {
        state = .closed(closer)
        let error = Files.refusal { () throws(UVError) in
            if let files = loop.simulatedFiles { return try files.close(descriptor, context: "close \(path)") }
            try Files.callNow("close \(path)", { uv_fs_close(nil, $0, descriptor, nil) }) { _, _ in }
        }
        let waiters = closeWaiters
        closeWaiters = []
        let onClose = self.onClose.take()
        if let error, waiters.isEmpty {
            // Nobody asked for the close's outcome (a dispose or a shutdown): say it somewhere.
            reportMisuse("closing \(path) failed (\(closer.phrase)): \(error)")
        }
        for waiter in waiters { waiter(error) }
        onClose?(closer)
    }
}
