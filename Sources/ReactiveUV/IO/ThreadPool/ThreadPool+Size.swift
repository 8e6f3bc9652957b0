internal import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Synchronization

extension ThreadPool {
    /// The most threads libuv's pool takes (`MAX_THREADPOOL_SIZE` in libuv 1.44).
    ///
    /// Thread rule: safe from any thread.
    public static let maximumSize = 1024

    /// How many threads libuv's pool has, or will have when it starts.
    ///
    /// libuv starts its pool at the first request that needs it (a file request, a
    /// name lookup, `ThreadPool.run`, a `FilePoll`), reading `UV_THREADPOOL_SIZE`
    /// then: 4 threads by default, 1...1024 (0 counts as 1, more as 1024). After that
    /// the size is fixed for the life of the process. The pool is shared by everything
    /// in the process: file requests, DNS lookups (libuv lets those take at most half of
    /// the threads, so slow lookups cannot starve files) and `ThreadPool.run`.
    ///
    /// Thread rule: safe from any thread.
    public static var size: Int {
        PoolUse.state.withLock { state in state.sizeAtFirstUse ?? PoolUse.sizeFromEnvironment() }
    }

    /// Sets how many threads libuv's pool will start (it sets `UV_THREADPOOL_SIZE`).
    ///
    /// Call it at the start of the program, before anything uses the pool (and before
    /// other threads read the environment: `setenv` is not safe alongside them).
    ///
    /// - Parameter size: 1...`maximumSize`.
    /// - Throws: `UVError` `EINVAL` for a size outside 1...1024; `EBUSY` once this library has
    ///   queued work on the pool (the pool has started with its size and cannot change).
    ///
    /// Thread rule: safe from any thread.
    public static func setSize(_ size: Int) throws(UVError) {
        guard (1...maximumSize).contains(size) else {
            throw UVError(code: UVError.invalidArgumentCode,
                          message: "the thread pool's size must be 1...\(maximumSize), not \(size)", context: "ThreadPool.setSize")
        }
        let started: Int? = PoolUse.state.withLock { state in
            if let size = state.sizeAtFirstUse { return size }
            // Set under the lock: a first use racing with this call sees either the old size or the new.
            setenv("UV_THREADPOOL_SIZE", String(size), 1)
            return nil
        }
        if let started {
            throw UVError(code: PoolUse.busyCode,
                          message: "the thread pool has already started with \(started) threads (set its size before the first file request, DNS lookup or ThreadPool.run)",
                          context: "ThreadPool.setSize(\(size))")
        }
    }
}

/// Whether this library has queued work on libuv's pool yet, and the size the pool started with.
enum PoolUse {
    struct State {
        var sizeAtFirstUse: Int?
        /// How the pool's threads are to be scheduled when this library starts the pool.
        var scheduling = ThreadPool.ThreadScheduling.automatic
    }

    static let state = LockedValue(State())
    /// Set once the pool has started as `state.scheduling` says (by this loop's start or another's).
    private static let started = Atomic<Bool>(false)
    static let busyCode: Int32 = -EBUSY
    /// Tests only: runs on each loop that is about to start the pool, after it claimed the first use.
    static let beforeStartForTesting = LockedValue<(@Sendable (EventLoop) -> Void)?>(nil)

    /// Records the first use (call on `loop`'s thread before queueing pool work; cheap after the first time).
    ///
    /// The first use in the process starts the pool from `loop`'s thread as `ThreadPool.threadScheduling` says.
    static func noteUse(on loop: EventLoop) {
        guard !started.load(ordering: .acquiring) else { return }
        start(on: loop)
    }

    /// Starts the pool as `state.scheduling` says, from `loop`'s thread.
    ///
    /// Every loop that comes here before the pool is known to have started runs the start itself,
    /// not only the first: a loop that found the use already claimed by another, still on its way to
    /// its start request, would otherwise queue its own work at once, and libuv would make the pool's
    /// threads from that loop's thread, scheduled as it is. Whichever start reaches libuv first makes
    /// the threads (libuv's other submitters wait inside it until they exist); the others queue a
    /// request that does nothing, and find no new thread to lower.
    @inline(never)
    private static func start(on loop: EventLoop) {
        let scheduling = state.withLock { state in
            if state.sizeAtFirstUse == nil { state.sizeAtFirstUse = sizeFromEnvironment() }
            return state.scheduling
        }
        if let hook = beforeStartForTesting.withLock({ $0 }) { hook(loop) }
        switch scheduling {
        case .automatic where uv_available_parallelism() == 1, .batch:
            PoolStartRequest.start(on: loop)
        case .automatic:
            PoolStartRequest.startLowered(on: loop, by: ThreadPool.ThreadScheduling.automaticIncrement)
        case .lowered(let increment):
            PoolStartRequest.startLowered(on: loop, by: increment)
        case .inherited:
            break
        }
        started.store(true, ordering: .releasing)
    }

    /// The pool size libuv takes from the environment (its own rule, `uv_init_once`'s `init_threads`).
    static func sizeFromEnvironment() -> Int {
        guard let value = getenv("UV_THREADPOOL_SIZE") else { return 4 }
        let parsed = Int(atoi(value))
        if parsed <= 0 { return parsed == 0 ? 1 : ThreadPool.maximumSize }
        return min(parsed, ThreadPool.maximumSize)
    }
}
