#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A value behind a `pthread_mutex_t`.
///
/// Used instead of `Synchronization.Mutex` where several loop threads share a value: on Linux
/// that Mutex waits on a futex directly, which ThreadSanitizer cannot see, so it reported the
/// echo server's client table (taken under the Mutex) as a race between two group loops.
final class PthreadLocked<Value>: @unchecked Sendable {
    // `value` is read and written only between `pthread_mutex_lock` and `pthread_mutex_unlock` of `mutex`.
    private var value: Value
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    init(_ value: Value) {
        self.value = value
        mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with the value, under the lock (never call out to other code from `body`).
    func withLock<Result>(_ body: (inout Value) -> Result) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return body(&value)
    }
}
