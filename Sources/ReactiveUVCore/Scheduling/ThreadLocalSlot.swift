import CReactiveUVThreadLocal

/// One per-thread object pointer (unretained) in a C `__thread` variable: the key behind
/// `EventLoop.current` and `Scheduler.current`, read in one load on every event. The owner clears
/// it before the object can die.
/// Thread rule: safe from any thread; each thread sees and sets only its own value.
@usableFromInline
package struct ThreadLocalSlot: Sendable {
    @usableFromInline let isLoop: Bool

    @inlinable
    init(isLoop: Bool) {
        self.isLoop = isLoop
    }

    @inlinable
    package var value: UnsafeMutableRawPointer? {
        isLoop ? reactiveuv_current_loop() : reactiveuv_current_scheduler()
    }

    @inlinable
    package func set(_ pointer: UnsafeMutableRawPointer?) {
        if isLoop {
            reactiveuv_set_current_loop(pointer)
        } else {
            reactiveuv_set_current_scheduler(pointer)
        }
    }
}

@usableFromInline
package enum ThreadLocals {
    /// The scheduler current on this thread (a loop on its own thread, or a `TestScheduler` running work).
    @inlinable package static var currentScheduler: ThreadLocalSlot { ThreadLocalSlot(isLoop: false) }
    /// The event loop whose thread this is.
    @inlinable package static var currentLoop: ThreadLocalSlot { ThreadLocalSlot(isLoop: true) }
}
