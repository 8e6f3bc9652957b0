import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// Why not `Synchronization.Mutex`: on Linux the thread sanitizer does not see
// its lock and unlock (they happen in an uninstrumented library), so every
// access it protects is reported as a race. These locks are built from what
// the sanitizer does see: atomics compiled into this module, and pthread mutexes.

/// A lock held for a few instructions and rarely contended: an atomic flag, spinning briefly then yielding.
///
/// Stored inline (no allocation), so per-subscription objects can have one for
/// free. Never held while calling out.
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

/// A reference set at most once, from any thread: `Synchronization.AtomicLazyReference`'s job,
/// compiled into this module so its calls are specialized and inlined (the standard library's
/// are generic calls that look up `Unmanaged<Instance>`'s metadata each time, about 330
/// instructions per call, which a TCP connection paid twice).
///
/// Thread rule: safe from any thread.
package struct LazyObject<Instance: AnyObject>: ~Copyable, @unchecked Sendable {
    // The atomic word is the only state; the object it points to is retained once, by this value.
    private let word = Atomic<UnsafeMutableRawPointer?>(nil)

    package init() {}

    deinit {
        if let object = word.load(ordering: .acquiring) { Unmanaged<Instance>.fromOpaque(object).release() }
    }

    /// The object, or nil when none was stored yet.
    package func load() -> Instance? {
        guard let object = word.load(ordering: .acquiring) else { return nil }
        return Unmanaged<Instance>.fromOpaque(object).takeUnretainedValue()
    }

    /// Stores `desired` unless an object is there already; returns the one that stays.
    package func storeIfNil(_ desired: Instance) -> Instance {
        let retained = Unmanaged.passRetained(desired)
        let (exchanged, original) = word.compareExchange(expected: nil, desired: retained.toOpaque(), ordering: .acquiringAndReleasing)
        guard !exchanged, let original else { return desired }
        retained.release()
        return Unmanaged<Instance>.fromOpaque(original).takeUnretainedValue()
    }
}
