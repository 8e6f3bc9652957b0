#include "baselines.h"

#include <stdlib.h>
#include <uv.h>

static int ticks_left;

static void idle_cb(uv_idle_t *handle) {
    if (--ticks_left == 0) uv_idle_stop(handle);
}

uint64_t rawc_loop_count(int ticks) {
    uv_loop_t loop;
    uv_idle_t idle;
    uv_loop_init(&loop);
    uv_idle_init(&loop, &idle);
    ticks_left = ticks;
    uv_idle_start(&idle, idle_cb);
    uint64_t begin = uv_hrtime();
    uv_run(&loop, UV_RUN_DEFAULT);
    uint64_t elapsed = uv_hrtime() - begin;
    uv_close((uv_handle_t *)&idle, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    return elapsed;
}

/* A local run queue drained from an idle callback in batches, each item
 * enqueuing the next: what EventLoop.execute does on the loop thread. */
typedef void (*work_fn)(void *argument);
typedef struct { work_fn fn; void *argument; } item_t;
typedef struct {
    uv_idle_t idle;
    item_t *items, *draining;
    size_t count, capacity, draining_capacity;
    int remaining;
} chain_t;

static chain_t chain;
static void chain_idle(uv_idle_t *handle);

static void chain_post(work_fn fn, void *argument) {
    if (chain.count == chain.capacity) {
        chain.capacity = chain.capacity ? chain.capacity * 2 : 64;
        chain.items = realloc(chain.items, chain.capacity * sizeof(item_t));
    }
    chain.items[chain.count].fn = fn;
    chain.items[chain.count].argument = argument;
    if (chain.count++ == 0 && !uv_is_active((uv_handle_t *)&chain.idle)) uv_idle_start(&chain.idle, chain_idle);
}

static void chain_step(void *argument) {
    (void)argument;
    if (--chain.remaining > 0) chain_post(chain_step, NULL);
}

static void chain_idle(uv_idle_t *handle) {
    size_t ran = 0;
    while (chain.count > 0 && ran < 4096) {
        item_t *batch = chain.items;
        size_t n = chain.count, capacity = chain.capacity;
        chain.items = chain.draining;
        chain.capacity = chain.draining_capacity;
        chain.count = 0;
        chain.draining = batch;
        chain.draining_capacity = capacity;
        for (size_t i = 0; i < n; i++) batch[i].fn(batch[i].argument);
        ran += n;
    }
    if (chain.count == 0) uv_idle_stop(handle);
}

uint64_t rawc_local_chain(int count) {
    uv_loop_t loop;
    uv_loop_init(&loop);
    uv_idle_init(&loop, &chain.idle);
    chain.items = chain.draining = NULL;
    chain.count = chain.capacity = chain.draining_capacity = 0;
    chain.remaining = count;
    uint64_t begin = uv_hrtime();
    chain_post(chain_step, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    uint64_t elapsed = uv_hrtime() - begin;
    uv_close((uv_handle_t *)&chain.idle, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    free(chain.items);
    free(chain.draining);
    return elapsed;
}
