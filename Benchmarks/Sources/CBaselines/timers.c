#include "baselines.h"

#include <stdlib.h>
#include <uv.h>

static int fired;
static int group_first_index; /* the fire count at which the last group begins */
static uint64_t last_fired_at;
static uint64_t group_first_at;

static void timer_cb(uv_timer_t *handle) {
    (void)handle;
    fired++;
    if (fired == group_first_index) group_first_at = uv_hrtime();
    last_fired_at = uv_hrtime();
}

void rawc_million_timers(int count, int cyclic, rawc_timers_result *result) {
    uv_loop_t loop;
    uv_loop_init(&loop);
    uv_timer_t *timers = malloc((size_t)count * sizeof(uv_timer_t));
    fired = 0;
    uint64_t longest = 0;
    int group = 0;
    for (int i = 0; i < count; i++) {
        uint64_t timeout = cyclic ? (uint64_t)(i % 1000) : (uint64_t)(1 + i / 1000);
        if (timeout > longest) { longest = timeout; group = 0; }
        if (timeout == longest) group++;
    }
    group_first_index = count - group + 1;
    uv_update_time(&loop);
    uint64_t begin = uv_hrtime();
    /* Where libuv reads CLOCK_MONOTONIC for its loop time (a coarse clock coarser than
     * 1 ms, as here), uv_now is uv_hrtime in whole milliseconds. */
    uint64_t loop_time_ns = uv_now(&loop) * 1000000;
    for (int i = 0; i < count; i++) {
        uint64_t timeout = cyclic ? (uint64_t)(i % 1000) : (uint64_t)(1 + i / 1000);
        uv_timer_init(&loop, &timers[i]);
        uv_timer_start(&timers[i], timer_cb, timeout, 0);
    }
    uint64_t started = uv_hrtime();
    uv_run(&loop, UV_RUN_DEFAULT);
    for (int i = 0; i < count; i++) uv_close((uv_handle_t *)&timers[i], NULL);
    uint64_t closing = uv_hrtime();
    uv_run(&loop, UV_RUN_DEFAULT);
    uint64_t closed = uv_hrtime();
    result->start_ns = started - begin;
    result->run_ns = last_fired_at - begin;
    result->close_ns = closed - closing;
    result->longest_ms = longest;
    result->due_base_ns = begin > loop_time_ns ? begin - loop_time_ns : 0;
    result->group_first_ns = group_first_at - begin;
    result->group_size = group;
    uv_loop_close(&loop);
    free(timers);
}
