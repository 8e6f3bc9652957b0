#ifndef REACTIVEUV_CLIBUV_SHIM_H
#define REACTIVEUV_CLIBUV_SHIM_H

#include <uv.h>
/* FileWatch reads its own inotify instance: libuv 1.44 drops IN_Q_OVERFLOW and names a
 * directory's own events like a child's. */
#include <sys/inotify.h>

/* ReactiveUV is written against libuv 1.44.2 (Debian 12's libuv1-dev): the
 * handle-size, metrics and error-name APIs it relies on are checked here so an
 * older library fails at compile time with a message rather than at run time. */
#if !defined(UV_VERSION_HEX) || UV_VERSION_HEX < ((1 << 16) | (44 << 8) | 2)
#error "ReactiveUV needs libuv >= 1.44.2: install it with `apt-get install libuv1-dev` (Debian 12 ships 1.44.2)"
#endif

/* glibc declares this only under _GNU_SOURCE, which an imported module cannot set. */
extern int pthread_setname_np(pthread_t thread, const char *name);

/* Names the calling thread (at most 15 bytes are kept). */
static inline void ruv_set_current_thread_name(const char *name) {
    (void)pthread_setname_np(pthread_self(), name);
}

/* uv_loop_configure is variadic, which Swift cannot call. */
static inline int ruv_loop_enable_idle_time_metric(uv_loop_t *loop) {
    return uv_loop_configure(loop, UV_METRICS_IDLE_TIME);
}

#endif
