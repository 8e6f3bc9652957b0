#include "baselines.h"

#include <stdlib.h>
#include <uv.h>

static int fired;
static uint64_t last_fired_at;

static void timer_cb(uv_timer_t *handle) {
    (void)handle;
    fired++;
    last_fired_at = uv_hrtime();
}

void rawc_million_timers(int count, int cyclic, rawc_timers_result *result) {
    uv_loop_t loop;
    uv_loop_init(&loop);
    uv_timer_t *timers = malloc((size_t)count * sizeof(uv_timer_t));
    fired = 0;
    uv_update_time(&loop);
    uint64_t begin = uv_hrtime();
    uint64_t longest = 0;
    for (int i = 0; i < count; i++) {
        uint64_t timeout = cyclic ? (uint64_t)(i % 1000) : (uint64_t)(1 + i / 1000);
        if (timeout > longest) longest = timeout;
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
    uv_loop_close(&loop);
    free(timers);
}
