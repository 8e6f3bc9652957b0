#ifndef REACTIVEUV_BASELINES_H
#define REACTIVEUV_BASELINES_H

#include <stdint.h>

/* Raw libuv C baselines: the physical limit for a runtime on libuv. Each runs
 * the same workload as the Swift scenario of the same name. Times are in
 * nanoseconds of uv_hrtime(). */

/* A foreign thread posts `count` items (function + argument, no allocation) to a
 * loop thread through one uv_async_t and a mutex-guarded array swapped out per
 * wake-up. Returns the time from the first post until the last item ran. */
uint64_t rawc_execute_throughput(int count, uint64_t *wakeups);

/* `count` round trips: the calling thread posts one item, the loop signals a
 * condition variable, the caller waits for it. Fills latencies[count] (ns). */
void rawc_execute_pingpong(int count, uint64_t *latencies);

/* Two threads and a condition variable, no loop: the floor for a round trip. */
void rawc_condvar_pingpong(int count, uint64_t *latencies);

/* libuv's million_timers: `count` one-shot timers, timeout 1 + i/1000 ms
 * (cyclic: i % 1000 ms), started on the loop thread before uv_run. */
typedef struct {
    uint64_t start_ns;      /* initializing and starting every timer */
    uint64_t run_ns;        /* from the start of scheduling until the last timer fired */
    uint64_t close_ns;      /* closing every timer */
    uint64_t longest_ms;    /* the longest timeout */
} rawc_timers_result;
void rawc_million_timers(int count, int cyclic, rawc_timers_result *result);

/* libuv's loop_count: an idle handle counting `ticks` loop iterations. Returns ns. */
uint64_t rawc_loop_count(int ticks);

/* A run queue drained from an idle callback, each item enqueuing the next, `count`
 * items: the C limit for a chain of loop-thread work. Returns ns. */
uint64_t rawc_local_chain(int count);

#endif
