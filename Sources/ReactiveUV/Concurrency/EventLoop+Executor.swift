import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// An event loop is a serial executor (an actor can run on it) and a task executor
/// (`Task(executorPreference: loop)` runs its code on the loop thread).
///
/// Jobs go through the loop's run queues as they are, with no closure or other
/// allocation per job; each runs on the loop thread, isolated to the loop as
/// both its serial and its task executor, in the order it was enqueued.
extension EventLoop: SerialExecutor, TaskExecutor {
    /// Runs a job on the loop thread.
    ///
    /// While the loop is shutting down its thread still takes jobs. Once it has
    /// closed, a job cannot be dropped (its task would never resume) and the
    /// thread is gone: late jobs then run on the thread that enqueued them, one
    /// at a time in order (the isolation checks accept that thread while it runs
    /// them), and a message says so.
    ///
    /// - Parameter job: The job.
    ///
    /// Thread rule: safe from any thread.
    public func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        if enqueueItem(.job(unowned)) == .accepted { return }
        runLate(unowned)
    }

    /// A job for a loop that has closed: run here, serially with the loop's other late jobs.
    @inline(never)
    private func runLate(_ job: UnownedJob) {
        // The runtime calls us through an unowned executor reference, and a job run here may
        // drop the last reference to this loop (its task finishes, and the program with it lets
        // go of the loop): hold one of our own until the drain is over.
        let keptAlive = Unmanaged.passRetained(self)
        defer { keptAlive.release() }
        guard lateJobs.push(job, loopName: name) else { return }  // the thread draining them runs it
        while let next = lateJobs.next() {
            next.runSynchronously(isolatedTo: asUnownedSerialExecutor(), taskExecutor: asUnownedTaskExecutor())
        }
    }

    /// This loop as an unowned serial executor (for an actor's `unownedExecutor`).
    ///
    /// - Returns: The executor reference.
    ///
    /// Thread rule: safe from any thread.
    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    /// This loop as an unowned task executor.
    ///
    /// - Returns: The executor reference.
    ///
    /// Thread rule: safe from any thread.
    public func asUnownedTaskExecutor() -> UnownedTaskExecutor {
        UnownedTaskExecutor(ordinary: self)
    }

    /// Traps unless called on the loop thread (Swift calls it for `assumeIsolated`).
    ///
    /// Thread rule: safe from any thread.
    public func checkIsolated() {
        precondition(inEventLoop || lateJobs.isDrainingOnCallingThread,
                     "expected to run on EventLoop '\(name)', but this is another thread")
    }

    /// Whether the calling code runs on this loop's thread.
    ///
    /// - Returns: `inEventLoop`.
    ///
    /// Thread rule: safe from any thread.
    public func isIsolatingCurrentContext() -> Bool? {
        inEventLoop || lateJobs.isDrainingOnCallingThread
    }
}

/// Executor jobs enqueued on a loop after it closed, run serially by the threads that enqueue them.
///
/// The first thread to find the queue idle becomes its drainer and runs jobs
/// until the queue is empty, including those other threads add meanwhile; so
/// two late jobs never run at once and an actor on the loop keeps its isolation.
final class LateJobQueue: @unchecked Sendable {
    // `jobs`, `head` and `count` are protected by `lock`; `drainer` is written under it and read anywhere (atomic).
    private let lock = SpinLock()
    @exclusivity(unchecked) private var jobs: [UnownedJob] = []
    @exclusivity(unchecked) private var head = 0
    /// The thread running late jobs now, 0 when none.
    private let drainer = Atomic<UInt>(0)

    /// How many late jobs there were (the first few are reported).
    @exclusivity(unchecked) private var count = 0

    /// Adds a job; true when the caller became the drainer and must run `next()` until nil.
    func push(_ job: UnownedJob, loopName: String) -> Bool {
        let (drain, number): (Bool, Int) = lock.withLock {
            count += 1
            jobs.append(job)
            if drainer.load(ordering: .relaxed) != 0 { return (false, count) }
            drainer.store(UInt(pthread_self()), ordering: .releasing)
            return (true, count)
        }
        // Every late job is counted; the first few are spelled out (as refused submissions are).
        if number <= 10 {
            reportMisuse("a job was enqueued on EventLoop '\(loopName)' after it shut down (late job #\(number)); it runs on the calling thread, serially with the loop's other late jobs")
        }
        return drain
    }

    /// The next job for the drainer, or nil (and the drainer role is given up) when none is left.
    func next() -> UnownedJob? {
        lock.withLock {
            guard head < jobs.count else {
                jobs.removeAll()
                head = 0
                drainer.store(0, ordering: .releasing)
                return nil
            }
            head += 1
            return jobs[head - 1]
        }
    }

    /// Whether the calling thread is running this loop's late jobs.
    var isDrainingOnCallingThread: Bool { drainer.load(ordering: .acquiring) == UInt(pthread_self()) }
}
