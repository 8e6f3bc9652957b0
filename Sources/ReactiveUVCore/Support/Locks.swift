import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// Not `Synchronization.Mutex`: on Linux the thread sanitizer does not see its lock and unlock
// (an uninstrumented library), so it reports every access it protects as a race.

/// A lock held briefly and rarely contended: an atomic flag, spinning, then yielding.
/// Stored inline, so per-subscription objects can have one. Never held while calling out.
///
/// Thread rule: safe from any thread.
@usableFromInline
package struct SpinLock: ~Copyable, @unchecked Sendable {
    // The atomic flag is the lock itself.
    @usableFromInline let word = Atomic<Bool>(false)

    @inlinable
    package init() {}

    @inlinable
    package func lock() {
        if !word.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged {
            lockContended()
        }
    }

    @inlinable
    package func unlock() {
        word.store(false, ordering: .releasing)
    }

    @inlinable
    package func withLock<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        lock()
        defer { unlock() }
        return try body()
    }

    @usableFromInline
    func lockContended() {
        var spins = 0
        while true {
            if !word.load(ordering: .relaxed),
               word.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged {
                return
            }
            spins += 1
            if spins > 32 { sched_yield() }
        }
    }
}

/// A pthread mutex, for state that several threads contend for (a loop's inbox, a test scheduler's queue).
///
/// Thread rule: safe from any thread.
final class Lock: @unchecked Sendable {
    // The mutex lives in its own allocation so it never moves.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    init() {
        mutex = .allocate(capacity: 1)
        let rc = pthread_mutex_init(mutex, nil)
        precondition(rc == 0, "pthread_mutex_init failed with \(rc)")
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    package func lock() { pthread_mutex_lock(mutex) }

    package func unlock() { pthread_mutex_unlock(mutex) }

    package func withLock<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        lock()
        defer { unlock() }
        return try body()
    }
}

/// A value behind a `Lock`.
///
/// Thread rule: safe from any thread; `withLock` never holds the lock while the caller's code calls out.
package final class LockedValue<Value>: @unchecked Sendable {
    // `value` is protected by `lock`.
    private let lock = Lock()
    @exclusivity(unchecked) private var value: Value

    package init(_ value: Value) { self.value = value }

    package func withLock<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
