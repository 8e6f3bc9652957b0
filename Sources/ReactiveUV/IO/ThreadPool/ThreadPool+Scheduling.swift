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
        /// The default: `.batch` when the process may run on one CPU only (`uv_available_parallelism()`
        /// is 1 when the pool starts), `.lowered(by: 5)` otherwise.
        ///
        /// On one CPU a woken pool thread can never run beside the loop, so preempting the loop for it
        /// buys nothing. With more CPUs it should still take a CPU from another process at once, which
        /// `.batch` forbids; a lower weight only makes the loop win where the two meet (BENCHMARKS.md).
        ///
        /// Thread rule: safe from any thread.
        case automatic
        /// `SCHED_BATCH`: a woken pool thread does not preempt the running thread; it runs at the next
        /// scheduling point, with the same CPU share. Pool work may start up to a tick later while
        /// other processes keep the CPUs busy.
        ///
        /// Thread rule: safe from any thread.
        case batch
        /// The pool's threads at `increment` (1 to 19) above the nice value of the loop thread that
        /// starts the pool, under the default policy: each weighs less than a loop thread sharing its
        /// CPU, and still takes a CPU from another process when it wakes.
        ///
        /// Thread rule: safe from any thread.
        case lowered(by: Int32)
        /// What libuv does: the pool threads inherit the policy and nice value of the thread that
        /// starts the pool.
        ///
        /// Thread rule: safe from any thread.
        case inherited

        /// How far `.automatic` lowers the pool's threads on several CPUs.
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
    /// libuv makes its pool threads once, at the first pool request, and they inherit the scheduling
    /// of the thread that makes them. ReactiveUV makes that request itself, from the loop thread:
    /// for batch threads with the loop thread briefly under `SCHED_BATCH`; for lowered threads, then
    /// raising the nice value of each thread libuv made meanwhile.
    ///
    /// libuv's behaviour stays when the loop thread's policy is not `SCHED_OTHER`, or when other code
    /// started the pool first. If the system refuses the policy or nice value, a line on standard
    /// error says so and the threads keep what they inherited.
    ///
    /// Thread rule: safe from any thread.
    public static var threadScheduling: ThreadScheduling {
        PoolUse.state.withLock { $0.scheduling }
    }

    /// Sets how libuv's pool threads will be scheduled; call it before anything uses the pool.
    ///
    /// - Parameter scheduling: `.automatic` (the default), `.batch`, `.lowered(by:)` or `.inherited`
    ///   (libuv's own behaviour).
    /// - Throws: `UVError` `EINVAL` for `.lowered(by:)` outside 1...19; `EBUSY` once this library
    ///   has queued work on the pool.
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

/// The request that starts libuv's pool with batch or lowered threads: one `uv_queue_work` that
/// does nothing, from the loop thread. Tracked like any request, so shutdown waits for it.
/// Thread rule: loop thread only.
final class PoolStartRequest: LoopRequest {
    private init(loop: EventLoop) {
        // Not a use to note: it is the pool's start, which would come back to itself.
        super.init(loop: loop, type: UV_WORK, notingPoolUse: false)
    }

    override var label: String { "thread pool start" }

    /// `SCHED_BATCH` (`<sched.h>` defines it only under `_GNU_SOURCE`, unseen by Swift's Glibc module).
    static let batchPolicy: Int32 = 3

    /// Queues the request (libuv starts its pool inside this call).
    private func queue() -> Int32 {
        willStart()
        let result = uv_queue_work(loop.uvLoop, pointer(as: uv_work_t.self), poolStartWork, poolStartDone)
        if result < 0 { startFailed() }
        return result
    }

    /// Starts the pool from `loop`'s thread with batch threads.
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
    /// loop thread's nice value.
    ///
    /// libuv makes every pool thread inside the first `uv_queue_work` and waits until each started,
    /// so the threads that appear during the call, named as the loop thread (they inherit the
    /// name), are the pool's. A pool already running makes none.
    static func startLowered(on loop: EventLoop, by increment: Int32) {
        loop.assertInEventLoop()
        // A real-time or idle loop thread: the pool inherits its policy, as with libuv.
        guard sched_getscheduler(0) == SCHED_OTHER else { return }
        let before = PoolThreads.taskIDs()
        let request = PoolStartRequest(loop: loop)
        // Without /proc the pool's threads cannot be found: started as libuv does, and said.
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
