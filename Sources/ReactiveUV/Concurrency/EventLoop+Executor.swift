import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// An event loop is a serial executor (an actor can run on it) and a task executor
/// (`Task(executorPreference: loop)` runs its code on the loop thread). Jobs run on the loop
/// thread in the order enqueued.
///
/// As a serial executor it is `LoopSerialExecutor`, an identity of its own: Swift calls one
/// `enqueue` for both roles, and the two kinds of job run differently (see `runJob`).
extension EventLoop: SerialExecutor, TaskExecutor {
    /// Runs a job on the loop thread, as the job of a task that prefers this loop.
    ///
    /// Once the loop has closed, a job cannot be dropped (its task would never resume): late jobs
    /// run serially on a thread started for them (the isolation checks accept it) and a message
    /// says so. Never on the enqueuing thread, which may hold a lock (Swift runs a cancellation
    /// handler under the task's lock).
    ///
    /// Thread rule: safe from any thread.
    public func enqueue(_ job: consuming ExecutorJob) {
        enqueueJob(UnownedJob(job), asTaskJob: true)
    }

    /// Queues a job of either kind, or runs it late when the loop has closed.
    func enqueueJob(_ job: UnownedJob, asTaskJob: Bool) {
        if enqueueItem(asTaskJob ? .taskJob(job) : .actorJob(job)) == .accepted { return }
        runLate(job, asTaskJob: asTaskJob)
    }

    /// Runs a job on the calling thread, as the executor it was enqueued on asks.
    ///
    /// Swift runs code inline only when both the serial and the task executor match what it needs.
    /// A task's job runs with this loop as task executor and no serial executor, so its
    /// nonisolated calls and returns from `await` continue inline. An actor's job runs isolated to
    /// the serial executor with no task executor, so actors on one loop call each other inline.
    @inline(__always)
    func runJob(_ job: UnownedJob, asTaskJob: Bool) {
        if asTaskJob {
            job.runSynchronously(on: asUnownedTaskExecutor())
        } else {
            job.runSynchronously(on: serialExecutor.asUnownedSerialExecutor())
        }
    }

    /// A job for a loop that has closed: queued for the late jobs' thread, serially with the others.
    ///
    /// Never run here, inside `enqueue`: a resumer expects `resume` to return before the task goes
    /// on (run inline, a task cancelled while waiting on a bridge would free the bridge its
    /// cancellation handler still uses).
    @inline(never)
    private func runLate(_ job: UnownedJob, asTaskJob: Bool) {
        guard lateJobs.push(job, asTaskJob: asTaskJob, loopName: name) else { return }  // the drain under way runs it
        // The closure holds the loop until the drain is over: a late job may drop its last reference.
        runOnNewThread { [self] in
            lateJobs.beginDraining()
            while let next = lateJobs.next() {
                runJob(next.job, asTaskJob: next.asTaskJob)
            }
        }
    }

    /// This loop's serial executor, for an actor's `unownedExecutor`: the actor's code then runs on
    /// the loop thread, and calls between actors on the same loop need no hop.
    ///
    /// The reference is unowned: an actor that uses it must keep the loop alive (store it, as
    /// `LoopIsolation` does), or it would call into freed memory.
    ///
    /// Thread rule: safe from any thread.
    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        serialExecutor.asUnownedSerialExecutor()
    }

    /// This loop as an unowned task executor.
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
    /// Thread rule: safe from any thread.
    public func isIsolatingCurrentContext() -> Bool? {
        inEventLoop || lateJobs.isDrainingOnCallingThread
    }
}

/// A loop's serial executor: the identity actors on the loop share, so their jobs can be told
/// from tasks' jobs. One per loop for its life; holds the loop unowned, as an executor reference does.
final class LoopSerialExecutor: SerialExecutor, @unchecked Sendable {
    // Sendable: `loop` is written once, in EventLoop.init before any other thread sees the loop.
    private unowned(unsafe) var loop: EventLoop?

    func attach(to loop: EventLoop) { self.loop = loop }

    /// Runs an actor's job on the loop thread (late jobs: see `EventLoop.enqueue`).
    func enqueue(_ job: consuming ExecutorJob) {
        loop.unsafelyUnwrapped.enqueueJob(UnownedJob(job), asTaskJob: false)
    }

    func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    func checkIsolated() {
        loop.unsafelyUnwrapped.checkIsolated()
    }

    func isIsolatingCurrentContext() -> Bool? {
        loop.unsafelyUnwrapped.isIsolatingCurrentContext()
    }
}

/// Executor jobs enqueued on a loop after it closed, run serially by a thread started for them:
/// the first job to find the queue idle starts a drain, which takes jobs added meanwhile too,
/// so an actor on the loop keeps its isolation.
final class LateJobQueue: @unchecked Sendable {
    // Sendable: `lock` guards `jobs`, `head`, `count` and `draining`; `drainer` is atomic.
    private let lock = SpinLock()
    @exclusivity(unchecked) private var jobs: [(job: UnownedJob, asTaskJob: Bool)] = []
    @exclusivity(unchecked) private var head = 0
    /// A drain is started or running: jobs pushed now are left to it.
    @exclusivity(unchecked) private var draining = false
    /// The thread running late jobs now, 0 when none.
    private let drainer = Atomic<UInt>(0)

    /// How many late jobs there were (the first few are reported).
    @exclusivity(unchecked) private var count = 0

    /// Adds a job; true when no drain is under way and the caller must start one.
    func push(_ job: UnownedJob, asTaskJob: Bool, loopName: String) -> Bool {
        let (drain, number): (Bool, Int) = lock.withLock {
            count += 1
            jobs.append((job, asTaskJob))
            if draining { return (false, count) }
            draining = true
            return (true, count)
        }
        // Every late job is counted; the first few are spelled out.
        if number <= 10 {
            reportMisuse("a job was enqueued on EventLoop '\(loopName)' after it shut down (late job #\(number)); it runs on a thread started for the loop's late jobs, serially with them")
        }
        return drain
    }

    /// Called first by the thread that drains: the isolation checks accept it until `next()` returns nil.
    func beginDraining() {
        drainer.store(UInt(pthread_self()), ordering: .releasing)
    }

    /// The next job for the drainer, or nil (and the drain is over) when none is left.
    func next() -> (job: UnownedJob, asTaskJob: Bool)? {
        lock.withLock {
            guard head < jobs.count else {
                jobs.removeAll()
                head = 0
                draining = false
                drainer.store(0, ordering: .releasing)
                return nil
            }
            head += 1
            return jobs[head - 1]
        }
    }

    var isDrainingOnCallingThread: Bool { drainer.load(ordering: .acquiring) == UInt(pthread_self()) }
}
