internal import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Synchronization

extension ThreadPool {
    /// The most threads libuv's pool takes (`MAX_THREADPOOL_SIZE`).
    ///
    /// Thread rule: safe from any thread.
    public static let maximumSize = 1024

    /// How many threads libuv's pool has, or will have when it starts.
    ///
    /// libuv reads `UV_THREADPOOL_SIZE` at the first request that needs the pool (4 by default,
    /// clamped to 1...1024) and keeps it for the life of the process. The pool is shared by file
    /// requests, DNS lookups (at most half of the threads) and `ThreadPool.run`.
    ///
    /// Thread rule: safe from any thread.
    public static var size: Int {
        PoolUse.state.withLock { state in state.sizeAtFirstUse ?? PoolUse.sizeFromEnvironment() }
    }

    /// Sets how many threads libuv's pool will start (`UV_THREADPOOL_SIZE`). Call it at the start of
    /// the program, before anything uses the pool or other threads read the environment.
    ///
    /// - Parameter size: 1...`maximumSize`.
    /// - Throws: `UVError` `EINVAL` for a size outside 1...1024; `EBUSY` once this library has
    ///   queued work on the pool.
    ///
    /// Thread rule: safe from any thread.
    public static func setSize(_ size: Int) throws(UVError) {
        guard (1...maximumSize).contains(size) else {
            throw UVError(code: UVError.invalidArgumentCode,
                          message: "the thread pool's size must be 1...\(maximumSize), not \(size)", context: "ThreadPool.setSize")
        }
        let started: Int? = PoolUse.state.withLock { state in
            if let size = state.sizeAtFirstUse { return size }
            // Under the lock: a racing first use sees either the old size or the new.
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
    /// Set once the pool has started as `state.scheduling` says.
    private static let started = Atomic<Bool>(false)
    static let busyCode: Int32 = -EBUSY
    /// Tests only: runs on each loop about to start the pool, after it claimed the first use.
    static let beforeStartForTesting = LockedValue<(@Sendable (EventLoop) -> Void)?>(nil)

    /// Records the first use; call on `loop`'s thread before queueing pool work.
    static func noteUse(on loop: EventLoop) {
        guard !started.load(ordering: .acquiring) else { return }
        start(on: loop)
    }

    /// Starts the pool as `state.scheduling` says, from `loop`'s thread.
    ///
    /// Every loop arriving before the pool is known started runs the start itself: one that found
    /// the use claimed by another would otherwise queue its own work first, and libuv would make the
    /// threads from its thread, scheduled as it is. The first start to reach libuv makes the
    /// threads; the others queue a request that does nothing.
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

    /// The pool size libuv takes from the environment (its own rule).
    static func sizeFromEnvironment() -> Int {
        guard let value = getenv("UV_THREADPOOL_SIZE") else { return 4 }
        let parsed = Int(atoi(value))
        if parsed <= 0 { return parsed == 0 ? 1 : ThreadPool.maximumSize }
        return min(parsed, ThreadPool.maximumSize)
    }
}
