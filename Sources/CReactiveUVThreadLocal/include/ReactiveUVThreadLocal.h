#ifndef REACTIVEUV_THREAD_LOCAL_H
#define REACTIVEUV_THREAD_LOCAL_H

// The two per-thread pointers behind `Scheduler.current` and `EventLoop.current`.
//
// C `__thread` variables rather than pthread keys: every send on a loop thread
// asks "which scheduler is current here?", and reading a `__thread` variable
// inlines to a load relative to the thread pointer (%fs on x86_64), where
// `pthread_getspecific` is a function call. Each variable is
// written only by its own thread, so no synchronisation is needed. The owner of
// a value clears it before the object can die, so the pointer is never stale.

#if __has_feature(nullability)
#pragma clang assume_nonnull begin
#endif

extern __thread void *_Nullable reactiveuv_tls_current_scheduler;
extern __thread void *_Nullable reactiveuv_tls_current_loop;

/// The scheduler current on the calling thread (unretained), or NULL.
static inline __attribute__((always_inline)) void *_Nullable reactiveuv_current_scheduler(void) {
    return reactiveuv_tls_current_scheduler;
}

/// Sets the scheduler current on the calling thread.
static inline __attribute__((always_inline)) void reactiveuv_set_current_scheduler(void *_Nullable scheduler) {
    reactiveuv_tls_current_scheduler = scheduler;
}

/// The event loop whose thread the calling thread is (unretained), or NULL.
static inline __attribute__((always_inline)) void *_Nullable reactiveuv_current_loop(void) {
    return reactiveuv_tls_current_loop;
}

/// Sets the event loop of the calling thread.
static inline __attribute__((always_inline)) void reactiveuv_set_current_loop(void *_Nullable loop) {
    reactiveuv_tls_current_loop = loop;
}

#if __has_feature(nullability)
#pragma clang assume_nonnull end
#endif

#endif
