internal import CLibUV
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Set by a disposal while a pool job runs: a job that makes several system calls (a write split
/// into requests) stops between them.
final class JobStopFlag: Sendable {
    private let flag = Atomic<Bool>(false)
    /// Whether the job should stop. Thread rule: safe from any thread.
    var isSet: Bool { flag.load(ordering: .relaxed) }
    /// Asks the job to stop. Thread rule: safe from any thread.
    func set() { flag.store(true, ordering: .relaxed) }
}

/// A file's pool job as the file sees it when it closes.
protocol StoppableJob: AnyObject {
    /// Cancels the job if it has not started; with `stopping`, a running one also stops between its calls.
    func cancel(stopping: Bool)
}

/// One step of an open file's work on libuv's pool: `work` runs on a pool thread with the descriptor
/// (positional system calls, or libuv's synchronous `uv_fs_*` forms), `completion` gets its result on
/// the loop thread.
///
/// Why a pool job rather than an async `uv_fs_read`: the job reads straight into the array that is
/// delivered (no copy out of a reused buffer), and one job can make several calls (a short read at
/// a boundary, a write split into requests of at most 1 GiB) for one loop-thread callback.
final class FileJob<Value: Sendable>: PoolWorkBase, LoopDisposable, StoppableJob, @unchecked Sendable {
    // `work`, `context` and `stop` are immutable; `outcome` is written on the pool thread and read on the
    // loop thread after libuv hands the request back (its queue mutex orders the two); `completion` is
    // loop thread only (`dispose()` hops there); `disposedFlag` is atomic.
    private let work: @Sendable (JobStopFlag) throws -> Value
    private let context: String
    let stop = JobStopFlag()
    private var outcome: Result<Value, any Error>?
    private var completion: ((Result<Value, any Error>) -> Void)?
    /// Told after the completion (or the cancellation) on the loop thread, always once: the file counts its jobs.
    var onEnd: (() -> Void)?
    /// Told instead of the completion when the loop's shutdown cancels the job.
    var onShutdown: (() -> Void)?
    /// Gets a value that nobody will take (the job ran after a dispose or a shutdown): an opened descriptor closes here.
    var onDiscard: ((Value) -> Void)?
    let disposedFlag = Atomic<Bool>(false)

    init(loop: EventLoop, context: String, work: @escaping @Sendable (JobStopFlag) throws -> Value,
         completion: @escaping (Result<Value, any Error>) -> Void) {
        self.work = work
        self.context = context
        self.completion = completion
        super.init(loop: loop, type: UV_WORK)
    }

    override var label: String { context }

    /// Queues the job (loop thread).
    func queue() throws(UVError) {
        try queueOnPool(context)
    }

    override func runOnPool() {
        outcome = stop.isSet ? nil : Result { try work(stop) }
    }

    override func complete(status: Int32) {
        let completion = self.completion
        self.completion = nil
        let outcome = self.outcome
        self.outcome = nil
        if let completion {
            if status < 0 {
                completion(.failure(UVError(code: status, context: context)))
            } else if let outcome {
                completion(outcome)
            } else {
                completion(.failure(UVError(code: UVError.cancelledCode, message: "the operation was stopped before it ran", context: context)))
            }
        } else if case .success(let value)? = outcome {
            onDiscard?(value)
        }
        onDiscard = nil
        end()
    }

    private func end() {
        let onEnd = self.onEnd
        self.onEnd = nil
        onShutdown = nil
        onEnd?()
    }

    override func cancelForShutdown() {
        completion = nil
        stop.set()
        let onShutdown = self.onShutdown
        self.onShutdown = nil
        cancel()
        onShutdown?()
    }

    func cancel(stopping: Bool) {
        if stopping { stop.set() }
        cancel()
    }

    /// Drops the completion and cancels the job if it has not started; a running one stops between its calls.
    func abandon() {
        completion = nil
        onShutdown = nil
        stop.set()
        cancel()
    }
}

/// A `UVError` for a failed system call: `errno` as libuv's negative code.
func systemCallError(_ context: String) -> UVError {
    UVError(code: -errno, context: context)
}

/// The pool jobs of a file-system operation that runs them one at a time (a listing's readdir
/// batches, a tree removal's walk) and the resource they use (the directory stream, the walk's
/// descriptors): released when the operation ends, but only once no job can still be using it.
///
/// Both users wrote this out before: the job in flight, a job that is over though a newer one
/// is queued (its end must not clear the newer one), and the release held back while a job runs.
///
/// Thread rule: loop thread only.
final class SequentialFileJobs<Value: Sendable> {
    // Loop thread only.
    private let loop: EventLoop
    /// Cleared once run: it holds the operation's state, which holds this.
    private var release: (() -> Void)?
    /// The job queued or running, if any.
    private var job: FileJob<Value>?
    /// The operation ended while a job was out: the release waits for that job's end.
    private var releaseAfterJob = false

    /// - Parameters:
    ///   - loop: The operation's loop.
    ///   - release: Releases the jobs' resource, once.
    init(loop: EventLoop, release: @escaping () -> Void) {
        self.loop = loop
        self.release = release
    }

    /// Whether a job is queued or running.
    var hasJobOut: Bool { job != nil }

    /// Queues the next job; `failed` gets the refusal if libuv would not take it.
    ///
    /// - Parameters:
    ///   - context: The call, for errors (`"readdir /tmp/x"`).
    ///   - work: The job's work (pool thread).
    ///   - onShutdown: Told instead of the completion when the loop's shutdown cancels the job.
    ///   - failed: Told if the job could not be queued.
    ///   - completion: The job's result (loop thread), unless the operation ended first.
    func run(_ context: String, work: @escaping @Sendable (JobStopFlag) throws -> Value,
             onShutdown: (() -> Void)? = nil, failed: @escaping (any Error) -> Void,
             completion: @escaping (Result<Value, any Error>) -> Void) {
        let job = FileJob(loop: loop, context: context, work: work) { [self] result in
            self.job = nil
            completion(result)
        }
        let id = ObjectIdentifier(job)
        // Told once the job is over, whether it completed or was cancelled (after its completion, if any).
        job.onEnd = { [self] in
            if let current = self.job, ObjectIdentifier(current) == id { self.job = nil }
            if releaseAfterJob && self.job == nil { releaseNow() }
        }
        job.onShutdown = onShutdown
        self.job = job
        do {
            try job.queue()
        } catch {
            self.job = nil
            failed(error)
        }
    }

    /// The operation ended (completed, failed, disposed or shut down): abandons the job out, and
    /// releases the resource now, or once that job is over.
    func operationEnded() {
        if let job {
            releaseAfterJob = true
            job.abandon()
        } else {
            releaseNow()
        }
    }

    private func releaseNow() {
        releaseAfterJob = false
        let release = self.release
        self.release = nil
        release?()
    }
}
