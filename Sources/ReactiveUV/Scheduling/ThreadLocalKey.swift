#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A pthread key holding one unretained object pointer per thread.
///
/// Used for the loop-thread key behind `EventLoop.current` and
/// `Scheduler.current` (the seeds' `currentScheduler`, with the thread
/// dictionary replaced by a key). The owner of the value must clear it before
/// the object can die, so the pointer is never stale.
///
/// Thread rule: safe from any thread; each thread sees only its own value.
@usableFromInline
struct ThreadLocalKey: Sendable {
    @usableFromInline let key: pthread_key_t

    init() {
        var key = pthread_key_t()
        let rc = pthread_key_create(&key, nil)
        precondition(rc == 0, "pthread_key_create failed with \(rc): the process is out of thread-local keys")
        self.key = key
    }

    /// The calling thread's value, or nil.
    @inlinable
    var value: UnsafeMutableRawPointer? {
        pthread_getspecific(key)
    }

    /// Sets the calling thread's value.
    func set(_ pointer: UnsafeMutableRawPointer?) {
        let rc = pthread_setspecific(key, pointer)
        precondition(rc == 0, "pthread_setspecific failed with \(rc)")
    }
}

/// The process-wide keys.
@usableFromInline
enum ThreadLocals {
    /// The scheduler that is current on this thread (a loop on its own thread,
    /// or a `TestScheduler` while it runs work).
    @usableFromInline static let currentScheduler = ThreadLocalKey()
    /// The event loop whose thread this is.
    @usableFromInline static let currentLoop = ThreadLocalKey()
}
