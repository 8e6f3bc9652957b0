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
        /// the pool starts), `.inherited` otherwise.
        ///
        /// On one CPU a pool thread can never run beside the loop that queued its work, so
        /// switching the loop out to start that work at once buys nothing and costs two context
        /// switches per request: there `.batch` took `stat` throughput from 0.5× a raw libuv C
        /// program's to 1.1–1.2×, also with a CPU hog on the same CPU (BENCHMARKS.md). With more
        /// CPUs a woken pool thread can take one from another process at once, which `.batch`
        /// forbids: with two CPU hogs beside it on two CPUs, `.batch` made it 0.56–0.72× where
        /// libuv's way measured 0.87–1.12×.
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
        /// What libuv does: the pool threads inherit the policy of the thread that starts the
        /// pool (the loop making the process's first pool request).
        ///
        /// Thread rule: safe from any thread.
        case inherited

        /// `"automatic"`, `"batch"` or `"inherited"`.
        ///
        /// Thread rule: safe from any thread.
        public var description: String {
            switch self {
            case .automatic: "automatic"
            case .batch: "batch"
            case .inherited: "inherited"
            }
        }
    }

    /// How libuv's pool threads are, or will be, scheduled: `.automatic` unless `setThreadScheduling(_:)` said otherwise.
    ///
    /// libuv makes its pool threads once, at the first request that needs the pool, and they
    /// inherit the scheduling policy of the thread that makes them. For batch threads
    /// (`.batch`, or `.automatic` on one CPU), ReactiveUV makes that first request itself (a
    /// request that does nothing) with the loop thread switched to `SCHED_BATCH`, then switches
    /// the loop thread straight back. Two cases keep libuv's behaviour: a loop thread whose
    /// policy is not the default `SCHED_OTHER` (a real-time or idle loop: the pool inherits
    /// that, as with libuv), and a pool that other code in the process (C code using libuv
    /// directly) started first. If the system refuses the policy (a seccomp filter), a line on
    /// standard error says so and the pool starts with the default policy.
    ///
    /// Thread rule: safe from any thread.
    public static var threadScheduling: ThreadScheduling {
        PoolUse.state.withLock { $0.scheduling }
    }

    /// Sets how libuv's pool threads will be scheduled (see `ThreadScheduling`).
    ///
    /// Call it at the start of the program, before anything uses the pool.
    ///
    /// - Parameter scheduling: `.automatic` (the default), `.batch` or `.inherited` (libuv's own behaviour).
    /// - Throws: `UVError` `EBUSY` once this library has queued work on the pool (its threads
    ///   exist and keep their policy).
    ///
    /// Thread rule: safe from any thread.
    public static func setThreadScheduling(_ scheduling: ThreadScheduling) throws(UVError) {
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

/// The request that starts libuv's pool with `SCHED_BATCH` threads: one `uv_queue_work` that does
/// nothing, queued from the loop thread while that thread is switched to `SCHED_BATCH`.
///
/// Made only when the pool is to have batch threads (`PoolUse.noteUse`).
///
/// A tracked request like any other: shutdown waits for it, and `uv_loop_close` never sees it pending.
///
/// Thread rule: loop thread only.
final class PoolStartRequest: LoopRequest {
    private init(loop: EventLoop) {
        super.init(loop: loop, type: UV_WORK)
    }

    override var label: String { "thread pool start" }

    /// `SCHED_BATCH` (`<sched.h>` defines it only under `_GNU_SOURCE`, which Swift's Glibc module does not see).
    static let batchPolicy: Int32 = 3

    /// Starts the pool from `loop`'s thread with batch threads (`PoolUse.noteUse`, at the process's first pool use).
    static func start(on loop: EventLoop) {
        loop.assertInEventLoop()
        let request = PoolStartRequest(loop: loop)
        let outcome = withBatchScheduling {
            // `willStart` keeps the request alive in `req.data` until `poolStartDone` takes it back.
            request.willStart()
            let result = uv_queue_work(loop.uvLoop, request.pointer(as: uv_work_t.self), poolStartWork, poolStartDone)
            if result < 0 { request.startFailed() }
            return result
        }
        switch outcome {
        case .ran(let result) where result < 0:
            reportMisuse("could not start libuv's thread pool with batch-scheduled threads: \(UVError(code: result, context: "uv_queue_work").description); the first pool request starts it with the default policy")
        case .refused(let errorNumber):
            reportMisuse("the system refused SCHED_BATCH for libuv's thread pool (\(UVError(code: -errorNumber, context: "sched_setscheduler").description)); its threads run with the default policy")
        case .ran, .notDefaultPolicy:
            break
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

/// Runs on a pool thread: nothing (the request exists to make libuv start its threads).
private let poolStartWork: uv_work_cb = { _ in }

/// Back on the loop: balances `willStart()`.
private let poolStartDone: uv_after_work_cb = { request, _ in
    guard let data = request?.pointee.data else { return }
    let start = Unmanaged<PoolStartRequest>.fromOpaque(data).takeRetainedValue()
    start.didFinish()
}
