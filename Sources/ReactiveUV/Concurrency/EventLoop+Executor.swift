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
/// allocation per job, and each runs on the loop thread in the order it was enqueued.
///
/// The two roles have two identities. As a task executor the loop is itself; as a
/// serial executor it is `LoopSerialExecutor`, an object of its own, because Swift
/// calls one `enqueue` for both roles and the two kinds of job must run differently
/// (see `runJob`): a task's nonisolated code continues inline across its awaits, and
/// actors on one loop call each other inline.
extension EventLoop: SerialExecutor, TaskExecutor {
    /// Runs a job on the loop thread, as the job of a task that prefers this loop.
    ///
    /// Swift calls this for tasks created with `Task(executorPreference: loop)` or inside
    /// `withTaskExecutorPreference(loop)`. Actors on the loop use `asUnownedSerialExecutor()`,
    /// whose jobs come through `LoopSerialExecutor` instead.
    ///
    /// While the loop is shutting down its thread still takes jobs. Once it has
    /// closed, a job cannot be dropped (its task would never resume) and the
    /// thread is gone: late jobs then run on a thread of their own, started for
    /// them and ending when none is left, one at a time in order (the isolation
    /// checks accept that thread while it runs them), and a message says so.
    /// Never on the thread that enqueued them: that thread may be resuming a
    /// continuation under a lock, or cancelling the task (Swift runs the
    /// cancellation handler under the task's own lock).
    ///
    /// - Parameter job: The job.
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
    /// Swift runs code inline, with no hop through the queue, only when the serial
    /// executor *and* the task executor it is running with are the ones the code
    /// needs (`swift_task_switch`). A task's job (`enqueue(_:)`, a task that prefers
    /// this loop) asks for nonisolated code on this loop: it runs with this loop as
    /// its task executor and no serial executor, so every nonisolated async call and
    /// every return from an `await` in that task continues inline. (Run isolated to
    /// the loop's serial executor as well, each of them would go through the loop's
    /// queue once more.) An actor's job
    /// (`LoopSerialExecutor`) runs isolated to the loop's serial executor with no task
    /// executor, as Swift runs actors' jobs, so actors on one loop call each other
    /// inline; a task that prefers the loop enters such an actor through the queue and
    /// returns the same way (code isolated to the loop, `loop.task`, enters it inline).
    @inline(__always)
    func runJob(_ job: UnownedJob, asTaskJob: Bool) {
        if asTaskJob {
            job.runSynchronously(on: asUnownedTaskExecutor())
        } else {
            job.runSynchronously(on: serialExecutor.asUnownedSerialExecutor())
        }
    }

    /// A job for a loop that has closed: queued for the late jobs' thread, serially with the loop's other late jobs.
    ///
    /// It never runs here, inside `enqueue`: whoever resumes a task expects `resume` to return
    /// before the task goes on. Run inline, a task cancelled while it waited on a bridge ran to its
    /// end inside its own cancellation handler, under its status lock, and freed the bridge that
    /// handler was still using (a crash, in release and debug builds).
    @inline(never)
    private func runLate(_ job: UnownedJob, asTaskJob: Bool) {
        guard lateJobs.push(job, asTaskJob: asTaskJob, loopName: name) else { return }  // the drain under way runs it
        // The closure holds the loop until the drain is over: a late job may drop the program's last
        // reference to it (its task finishes, and the program with it lets go of the loop).
        runOnNewThread { [self] in
            lateJobs.beginDraining()
            while let next = lateJobs.next() {
                runJob(next.job, asTaskJob: next.asTaskJob)
            }
        }
    }

    /// This loop's serial executor, for an actor's `unownedExecutor`: the actor's code
    /// then runs on the loop thread, and calls between actors on the same loop need no hop.
    ///
    /// The reference is unowned, as every executor reference is: an actor that uses it must
    /// keep the loop alive (store the loop, as `LoopIsolation` does). A loop that has shut down
    /// and that nothing references is freed, and an actor left holding only this reference
    /// would call into freed memory.
    ///
    /// - Returns: The executor reference (of `LoopSerialExecutor`, the loop's serial face).
    ///
    /// Thread rule: safe from any thread.
    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        serialExecutor.asUnownedSerialExecutor()
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

/// A loop's serial executor: the identity actors on the loop share, apart from the loop's
/// identity as a task executor, so that their jobs can be told from tasks' jobs.
///
/// Each loop has one for its whole life (`EventLoop.serialExecutor`); it holds the loop
/// unowned, as an executor reference does.
final class LoopSerialExecutor: SerialExecutor, @unchecked Sendable {
    // `loop` is written once, in EventLoop.init before the loop is published to any other thread.
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

/// Executor jobs enqueued on a loop after it closed, run serially by a thread started for them.
///
/// The first job to find the queue idle starts a drain: a new thread that runs jobs until
/// the queue is empty, including those added meanwhile; so two late jobs never run at once
/// and an actor on the loop keeps its isolation.
final class LateJobQueue: @unchecked Sendable {
    // `jobs`, `head`, `count` and `draining` are protected by `lock`; `drainer` is written by the
    // draining thread and read anywhere (atomic).
    private let lock = SpinLock()
    @exclusivity(unchecked) private var jobs: [(job: UnownedJob, asTaskJob: Bool)] = []
    @exclusivity(unchecked) private var head = 0
    /// A drain is started or running: jobs pushed now are left to it.
    @exclusivity(unchecked) private var draining = false
    /// The thread running late jobs now, 0 when none.
    private let drainer = Atomic<UInt>(0)

    /// How many late jobs there were (the first few are reported).
    @exclusivity(unchecked) private var count = 0

    /// Adds a job; true when no drain is under way: the caller must start one (`beginDraining`, then `next()` until nil).
    func push(_ job: UnownedJob, asTaskJob: Bool, loopName: String) -> Bool {
        let (drain, number): (Bool, Int) = lock.withLock {
            count += 1
            jobs.append((job, asTaskJob))
            if draining { return (false, count) }
            draining = true
            return (true, count)
        }
        // Every late job is counted; the first few are spelled out (as refused submissions are).
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

    /// Whether the calling thread is running this loop's late jobs.
    var isDrainingOnCallingThread: Bool { drainer.load(ordering: .acquiring) == UInt(pthread_self()) }
}
