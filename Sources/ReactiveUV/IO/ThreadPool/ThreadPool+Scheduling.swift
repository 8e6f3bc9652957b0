internal import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension ThreadPool {
    /// How the threads of libuv's pool are scheduled (`ThreadPool.setThreadScheduling(_:)`).
    ///
    /// Thread rule: a value type; safe from any thread.
    public enum ThreadScheduling: Sendable, Hashable, CustomStringConvertible {
        /// The default: `.batch` when the process may run on one CPU only (its affinity, as
        /// `taskset -c 0` or a one-CPU `cpuset` leaves it; `uv_available_parallelism()` is 1 when
        /// the pool starts), `.lowered(by: 5)` otherwise.
        ///
        /// A pool thread woken by a loop's request competes with that loop for a CPU. On one CPU it
        /// can never run beside the loop, so switching the loop out to start that work at once buys
        /// nothing and costs two context switches per request, so `.batch`. With more CPUs a woken
        /// pool thread should still take a CPU from another process at once, which `.batch`
        /// forbids; a lower weight only makes the loop win when the two meet on one CPU. The
        /// figures behind both choices are in BENCHMARKS.md.
        ///
        /// Thread rule: safe from any thread.
        case automatic
        /// `SCHED_BATCH`: a pool thread woken by new work does not preempt the thread that is
        /// running; it runs at the next scheduling point (when that thread waits, or at the
        /// scheduler's tick), with the same share of the CPU as before. A loop handing work to the
        /// pool keeps running its callbacks; pool work (file requests, DNS lookups,
        /// `ThreadPool.run`) may start up to a tick later while other processes keep the CPUs busy.
        ///
        /// Thread rule: safe from any thread.
        case batch
        /// The pool's threads at `increment` (1 to 19) above the nice value of the loop thread
        /// that starts the pool (at most 19), under the default policy: each weighs less than a
        /// loop thread where they share a CPU (nice 5: about a third of its weight), and still
        /// takes a CPU from a thread of another process when it wakes. Pool work gets less CPU
        /// where the CPUs are short and other threads of the same scheduling group want them.
        ///
        /// Thread rule: safe from any thread.
        case lowered(by: Int32)
        /// What libuv does: the pool threads inherit the policy and nice value of the thread that
        /// starts the pool (the loop making the process's first pool request).
        ///
        /// Thread rule: safe from any thread.
        case inherited

        /// How far `.automatic` lowers the pool's threads on several CPUs: nice 5 weighs about a third
        /// of nice 0 (less changes little, more loses to libuv's way beside CPU hogs).
        static let automaticIncrement: Int32 = 5

        /// `"automatic"`, `"batch"`, `"lowered(by: 5)"` or `"inherited"`.
        ///
        /// Thread rule: safe from any thread.
        public var description: String {
            switch self {
            case .automatic: "automatic"
            case .batch: "batch"
            case .lowered(let increment): "lowered(by: \(increment))"
            case .inherited: "inherited"
            }
        }
    }

    /// How libuv's pool threads are, or will be, scheduled: `.automatic` unless `setThreadScheduling(_:)` said otherwise.
    ///
    /// libuv makes its pool threads once, at the first request that needs the pool, and they
    /// inherit the scheduling policy and nice value of the thread that makes them. ReactiveUV
    /// makes that first request itself (a request that does nothing) from the loop thread:
    /// - for batch threads (`.batch`, or `.automatic` on one CPU), with the loop thread switched
    ///   to `SCHED_BATCH`, then switched straight back;
    /// - for lowered threads (`.lowered(by:)`, or `.automatic` on several CPUs), then it raises
    ///   the nice value of each thread libuv made during that request (the new threads of the
    ///   process named as the loop thread, whose name they inherit). A nice value is set on the
    ///   pool's threads, not inherited: an unprivileged thread could not lower its own again.
    ///
    /// Two cases keep libuv's behaviour: a loop thread whose policy is not the default
    /// `SCHED_OTHER` (a real-time or idle loop: the pool inherits that, as with libuv), and a
    /// pool that other code in the process (C code using libuv directly) started first. If the
    /// system refuses the policy or the nice value (a seccomp filter), a line on standard error
    /// says so and the pool's threads keep what they inherited.
    ///
    /// Thread rule: safe from any thread.
    public static var threadScheduling: ThreadScheduling {
        PoolUse.state.withLock { $0.scheduling }
    }

    /// Sets how libuv's pool threads will be scheduled (see `ThreadScheduling`).
    ///
    /// Call it at the start of the program, before anything uses the pool.
    ///
    /// - Parameter scheduling: `.automatic` (the default), `.batch`, `.lowered(by:)` or `.inherited`
    ///   (libuv's own behaviour).
    /// - Throws: `UVError` `EINVAL` for `.lowered(by:)` outside 1...19; `EBUSY` once this library
    ///   has queued work on the pool (its threads exist and keep their scheduling).
    ///
    /// Thread rule: safe from any thread.
    public static func setThreadScheduling(_ scheduling: ThreadScheduling) throws(UVError) {
        if case .lowered(let increment) = scheduling, !(1...19).contains(increment) {
            throw UVError(code: UVError.invalidArgumentCode,
                          message: "a nice increment of \(increment) is outside 1...19 (nice values run from -20 to 19; use .inherited for the loop's own)",
                          context: "ThreadPool.setThreadScheduling(.\(scheduling))")
        }
        let started: ThreadScheduling? = PoolUse.state.withLock { state in
            if state.sizeAtFirstUse != nil { return state.scheduling }
            state.scheduling = scheduling
            return nil
        }
        if let started {
            throw UVError(code: PoolUse.busyCode,
                          message: "the thread pool has already started, its threads scheduled as \(started) (set the scheduling before the first file request, DNS lookup or ThreadPool.run)",
                          context: "ThreadPool.setThreadScheduling(.\(scheduling))")
        }
    }
}

/// The request that starts libuv's pool with batch or lowered threads: one `uv_queue_work` that does
/// nothing, queued from the loop thread (switched to `SCHED_BATCH` meanwhile, for batch threads).
///
/// Made only when the pool's threads are to differ from the loop thread's (`PoolUse.noteUse`).
///
/// A tracked request like any other: shutdown waits for it, and `uv_loop_close` never sees it pending.
///
/// Thread rule: loop thread only.
final class PoolStartRequest: LoopRequest {
    private init(loop: EventLoop) {
        // Not a use to note: it is the pool's start (`PoolUse.start`), which would otherwise come back to itself.
        super.init(loop: loop, type: UV_WORK, notingPoolUse: false)
    }

    override var label: String { "thread pool start" }

    /// `SCHED_BATCH` (`<sched.h>` defines it only under `_GNU_SOURCE`, which Swift's Glibc module does not see).
    static let batchPolicy: Int32 = 3

    /// Queues the request (libuv starts its pool inside this call, at the process's first pool request).
    private func queue() -> Int32 {
        // `willStart` keeps the request alive in `req.data` until `poolStartDone` takes it back.
        willStart()
        let result = uv_queue_work(loop.uvLoop, pointer(as: uv_work_t.self), poolStartWork, poolStartDone)
        if result < 0 { startFailed() }
        return result
    }

    /// Starts the pool from `loop`'s thread with batch threads (`PoolUse.noteUse`, at the process's first pool use).
    static func start(on loop: EventLoop) {
        loop.assertInEventLoop()
        let request = PoolStartRequest(loop: loop)
        let outcome = withBatchScheduling { request.queue() }
        switch outcome {
        case .ran(let result) where result < 0:
            reportMisuse("could not start libuv's thread pool with batch-scheduled threads: \(UVError(code: result, context: "uv_queue_work").description); the first pool request starts it with the default policy")
        case .refused(let errorNumber):
            reportMisuse("the system refused SCHED_BATCH for libuv's thread pool (\(UVError(code: -errorNumber, context: "sched_setscheduler").description)); its threads run with the default policy")
        case .ran, .notDefaultPolicy:
            break
        }
    }

    /// Starts the pool from `loop`'s thread, then sets each of its threads `increment` above the
    /// loop thread's nice value (`PoolUse.noteUse`, at the process's first pool use).
    ///
    /// libuv makes every pool thread inside the first `uv_queue_work` and waits there until each
    /// has started (`init_threads`), so the threads that appear during that call, named as the
    /// loop thread (a new thread inherits its maker's name), are the pool's. A pool that was
    /// already running makes none: nothing changes then.
    static func startLowered(on loop: EventLoop, by increment: Int32) {
        loop.assertInEventLoop()
        // A real-time or idle loop thread: the pool inherits its policy, as with libuv.
        guard sched_getscheduler(0) == SCHED_OTHER else { return }
        let before = PoolThreads.taskIDs()
        let request = PoolStartRequest(loop: loop)
        // Without /proc (not mounted) the pool's threads cannot be found: started as libuv does, and said.
        guard !before.isEmpty, let name = PoolThreads.name(of: "/proc/thread-self/comm") else {
            reportMisuse("cannot list this process's threads (/proc/self/task): libuv's pool threads keep the loop thread's nice value")
            return
        }
        let result = request.queue()
        guard result >= 0 else {
            reportMisuse("could not start libuv's thread pool with lowered threads: \(UVError(code: result, context: "uv_queue_work").description); the first pool request starts it as libuv does")
            return
        }
        errno = 0
        let loopNice = getpriority(PoolThreads.processWhich, 0)
        let nice = errno == 0 ? min(19, loopNice + increment) : increment
        for id in PoolThreads.taskIDs().subtracting(before).sorted() where PoolThreads.name(of: "/proc/self/task/\(id)/comm") == name {
            if setpriority(PoolThreads.processWhich, id_t(id), nice) != 0 {
                let error = UVError(code: -errno, context: "setpriority")
                reportMisuse("the system refused nice \(nice) for libuv's pool threads (\(error.description)); they keep the loop thread's")
                return
            }
        }
    }

    /// What `withBatchScheduling` did.
    enum Outcome<Result> {
        /// `body` ran with the calling thread under `SCHED_BATCH`, and the thread is back to `SCHED_OTHER`.
        case ran(Result)
        /// The thread's policy is not `SCHED_OTHER` (left alone; `body` did not run).
        case notDefaultPolicy
        /// `sched_setscheduler` failed with this errno (`body` did not run).
        case refused(Int32)
    }

    /// Runs `body` with the calling thread under `SCHED_BATCH`, then puts `SCHED_OTHER` back.
    static func withBatchScheduling<Result>(_ body: () -> Result) -> Outcome<Result> {
        guard sched_getscheduler(0) == SCHED_OTHER else { return .notDefaultPolicy }
        var parameters = sched_param()
        guard sched_setscheduler(0, batchPolicy, &parameters) == 0 else { return .refused(errno) }
        let result = body()
        // From SCHED_BATCH back to SCHED_OTHER is always allowed (both are normal policies).
        _ = sched_setscheduler(0, SCHED_OTHER, &parameters)
        return .ran(result)
    }
}

/// The threads of this process, as `/proc/self` lists them (for `PoolStartRequest.startLowered`).
enum PoolThreads {
    /// `PRIO_PROCESS`, which with a thread ID names that thread on Linux.
    static var processWhich: __priority_which_t { __priority_which_t(PRIO_PROCESS.rawValue) }

    /// The IDs of the process's threads.
    static func taskIDs() -> Set<Int32> {
        var ids = Set<Int32>()
        guard let directory = opendir("/proc/self/task") else { return ids }
        defer { closedir(directory) }
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if let id = Int32(name) { ids.insert(id) }
        }
        return ids
    }

    /// A thread's name, from its `comm` file (`/proc/thread-self/comm`, `/proc/self/task/<ID>/comm`), or nil if it is gone.
    static func name(of commFile: String) -> String? {
        let descriptor = open(commFile, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes = [UInt8](repeating: 0, count: 32)
        let count = bytes.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        return count > 0 ? String(decoding: bytes[..<count], as: UTF8.self) : nil
    }
}

/// Runs on a pool thread: nothing (the request exists to make libuv start its threads).
private let poolStartWork: uv_work_cb = { _ in }

/// Back on the loop: balances `willStart()`.
private let poolStartDone: uv_after_work_cb = { request, _ in
    guard let data = request?.pointee.data else { return }
    let start = Unmanaged<PoolStartRequest>.fromOpaque(data).takeRetainedValue()
    start.didFinish()
}
