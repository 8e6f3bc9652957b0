#include "baselines.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <uv.h>

typedef void (*work_fn)(void *argument);
typedef struct { work_fn fn; void *argument; } item_t;

typedef struct {
    uv_loop_t loop;
    uv_async_t async;
    uv_mutex_t mutex;
    item_t *items;      /* producer side, guarded by mutex */
    size_t count, capacity;
    item_t *draining;   /* loop side */
    size_t draining_capacity;
    uint64_t wakeups;
    int closing;
} queue_loop_t;

static void drain(uv_async_t *handle) {
    queue_loop_t *q = handle->data;
    uv_mutex_lock(&q->mutex);
    item_t *batch = q->items;
    size_t n = q->count, capacity = q->capacity;
    q->items = q->draining;
    q->capacity = q->draining_capacity;
    q->count = 0;
    int closing = q->closing;
    uv_mutex_unlock(&q->mutex);
    q->draining = batch;
    q->draining_capacity = capacity;
    q->wakeups++;
    for (size_t i = 0; i < n; i++) batch[i].fn(batch[i].argument);
    if (closing) uv_close((uv_handle_t *)&q->async, NULL);
}

static void post(queue_loop_t *q, work_fn fn, void *argument) {
    uv_mutex_lock(&q->mutex);
    if (q->count == q->capacity) {
        q->capacity = q->capacity ? q->capacity * 2 : 64;
        q->items = realloc(q->items, q->capacity * sizeof(item_t));
    }
    q->items[q->count].fn = fn;
    q->items[q->count].argument = argument;
    int was_empty = q->count++ == 0;
    uv_mutex_unlock(&q->mutex);
    if (was_empty) uv_async_send(&q->async);
}

static void run_loop(void *argument) {
    queue_loop_t *q = argument;
    uv_run(&q->loop, UV_RUN_DEFAULT);
}

static void start(queue_loop_t *q, uv_thread_t *thread) {
    uv_loop_init(&q->loop);
    uv_mutex_init(&q->mutex);
    uv_async_init(&q->loop, &q->async, drain);
    q->async.data = q;
    q->items = q->draining = NULL;
    q->count = q->capacity = q->draining_capacity = 0;
    q->wakeups = 0;
    q->closing = 0;
    uv_thread_create(thread, run_loop, q);
}

static void stop(queue_loop_t *q, uv_thread_t *thread) {
    uv_mutex_lock(&q->mutex);
    q->closing = 1;
    uv_mutex_unlock(&q->mutex);
    uv_async_send(&q->async);
    uv_thread_join(thread);
    uv_loop_close(&q->loop);
    uv_mutex_destroy(&q->mutex);
    free(q->items);
    free(q->draining);
}

/* Throughput. */
typedef struct {
    _Atomic long references; /* only for the refcounted variant */
    int remaining;
    uint64_t finished_at;
    uv_mutex_t mutex;
    uv_cond_t done;
    int finished;
} counter_t;

static void count_item(void *argument) {
    counter_t *c = argument;
    if (--c->remaining == 0) {
        c->finished_at = uv_hrtime();
        uv_mutex_lock(&c->mutex);
        c->finished = 1;
        uv_cond_signal(&c->done);
        uv_mutex_unlock(&c->mutex);
    }
}

/* What a Swift closure capturing the counter object does besides: the poster takes a
 * reference (atomic increment in the object's header) and the loop drops it after the
 * item ran (atomic decrement), so the header's cache line moves between the cores. */
static void count_item_and_release(void *argument) {
    counter_t *c = argument;
    count_item(c);
    atomic_fetch_sub_explicit(&c->references, 1, memory_order_acq_rel);
}

uint64_t rawc_execute_throughput_refcounted(int count, uint64_t *wakeups, int refcounted) {
    queue_loop_t q;
    uv_thread_t thread;
    start(&q, &thread);
    counter_t c = { .remaining = count, .finished = 0 };
    atomic_init(&c.references, 1);
    uv_mutex_init(&c.mutex);
    uv_cond_init(&c.done);
    uint64_t begin = uv_hrtime();
    if (refcounted) {
        for (int i = 0; i < count; i++) {
            atomic_fetch_add_explicit(&c.references, 1, memory_order_relaxed);
            post(&q, count_item_and_release, &c);
        }
    } else {
        for (int i = 0; i < count; i++) post(&q, count_item, &c);
    }
    uv_mutex_lock(&c.mutex);
    while (!c.finished) uv_cond_wait(&c.done, &c.mutex);
    uv_mutex_unlock(&c.mutex);
    uint64_t elapsed = c.finished_at - begin;
    *wakeups = q.wakeups;
    stop(&q, &thread);
    uv_cond_destroy(&c.done);
    uv_mutex_destroy(&c.mutex);
    return elapsed;
}

uint64_t rawc_execute_throughput(int count, uint64_t *wakeups) {
    return rawc_execute_throughput_refcounted(count, wakeups, 0);
}

/* Ping-pong. */
typedef struct {
    uv_mutex_t mutex;
    uv_cond_t cond;
    int flag;
} signal_t;

static void signal_item(void *argument) {
    signal_t *s = argument;
    uv_mutex_lock(&s->mutex);
    s->flag = 1;
    uv_cond_signal(&s->cond);
    uv_mutex_unlock(&s->mutex);
}

void rawc_execute_pingpong(int count, uint64_t *latencies) {
    queue_loop_t q;
    uv_thread_t thread;
    start(&q, &thread);
    signal_t s = { .flag = 0 };
    uv_mutex_init(&s.mutex);
    uv_cond_init(&s.cond);
    for (int i = 0; i < count; i++) {
        uint64_t begin = uv_hrtime();
        post(&q, signal_item, &s);
        uv_mutex_lock(&s.mutex);
        while (!s.flag) uv_cond_wait(&s.cond, &s.mutex);
        s.flag = 0;
        uv_mutex_unlock(&s.mutex);
        latencies[i] = uv_hrtime() - begin;
    }
    stop(&q, &thread);
    uv_cond_destroy(&s.cond);
    uv_mutex_destroy(&s.mutex);
}

/* Condition-variable floor: a partner thread answers each request. */
typedef struct {
    uv_mutex_t mutex;
    uv_cond_t request, reply;
    int requested, replied, quit;
} partner_t;

static void partner_main(void *argument) {
    partner_t *p = argument;
    uv_mutex_lock(&p->mutex);
    for (;;) {
        while (!p->requested && !p->quit) uv_cond_wait(&p->request, &p->mutex);
        if (p->quit) break;
        p->requested = 0;
        p->replied = 1;
        uv_cond_signal(&p->reply);
    }
    uv_mutex_unlock(&p->mutex);
}

void rawc_condvar_pingpong(int count, uint64_t *latencies) {
    partner_t p = { .requested = 0, .replied = 0, .quit = 0 };
    uv_mutex_init(&p.mutex);
    uv_cond_init(&p.request);
    uv_cond_init(&p.reply);
    uv_thread_t thread;
    uv_thread_create(&thread, partner_main, &p);
    for (int i = 0; i < count; i++) {
        uint64_t begin = uv_hrtime();
        uv_mutex_lock(&p.mutex);
        p.requested = 1;
        uv_cond_signal(&p.request);
        while (!p.replied) uv_cond_wait(&p.reply, &p.mutex);
        p.replied = 0;
        uv_mutex_unlock(&p.mutex);
        latencies[i] = uv_hrtime() - begin;
    }
    uv_mutex_lock(&p.mutex);
    p.quit = 1;
    uv_cond_signal(&p.request);
    uv_mutex_unlock(&p.mutex);
    uv_thread_join(&thread);
    uv_cond_destroy(&p.request);
    uv_cond_destroy(&p.reply);
    uv_mutex_destroy(&p.mutex);
}
