#include "baselines.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
#include <uv.h>

typedef struct {
    uv_loop_t loop;
    uv_fs_event_t watcher;
    uv_async_t stop;
    uv_mutex_t mutex;
    uv_cond_t cond;
    uv_sem_t ready;
    int events;
    uint64_t delivered_at;
    const char *directory;
} watch_t;

static void on_change(uv_fs_event_t *handle, const char *filename, int events, int status) {
    (void)filename; (void)events;
    watch_t *watch = handle->data;
    if (status < 0) return;
    uint64_t now = uv_hrtime();
    uv_mutex_lock(&watch->mutex);
    watch->events++;
    watch->delivered_at = now;
    uv_cond_signal(&watch->cond);
    uv_mutex_unlock(&watch->mutex);
}

static void on_stop(uv_async_t *handle) {
    watch_t *watch = handle->data;
    uv_close((uv_handle_t *)&watch->watcher, NULL);
    uv_close((uv_handle_t *)&watch->stop, NULL);
}

static void watch_main(void *argument) {
    watch_t *watch = argument;
    uv_run(&watch->loop, UV_RUN_DEFAULT);
}

int rawc_fs_event_latency(const char *directory, const char *file, int count, uint64_t *latencies) {
    watch_t *watch = calloc(1, sizeof(watch_t));
    watch->directory = directory;
    uv_loop_init(&watch->loop);
    uv_mutex_init(&watch->mutex);
    uv_cond_init(&watch->cond);
    uv_fs_event_init(&watch->loop, &watch->watcher);
    watch->watcher.data = watch;
    uv_async_init(&watch->loop, &watch->stop, on_stop);
    watch->stop.data = watch;
    if (uv_fs_event_start(&watch->watcher, on_change, directory, 0) != 0) return -1;
    int fd = open(file, O_WRONLY | O_CREAT, 0644);
    if (fd < 0) return -1;
    uv_thread_t thread;
    uv_thread_create(&thread, watch_main, watch);
    for (int i = 0; i < count; i++) {
        uv_mutex_lock(&watch->mutex);
        int seen = watch->events;
        uv_mutex_unlock(&watch->mutex);
        uint64_t begin = uv_hrtime();
        if (pwrite(fd, "x", 1, 0) != 1) return -1;
        uv_mutex_lock(&watch->mutex);
        while (watch->events == seen) uv_cond_wait(&watch->cond, &watch->mutex);
        latencies[i] = watch->delivered_at - begin;
        uv_mutex_unlock(&watch->mutex);
    }
    close(fd);
    uv_async_send(&watch->stop);
    uv_thread_join(&thread);
    uv_loop_close(&watch->loop);
    uv_cond_destroy(&watch->cond);
    uv_mutex_destroy(&watch->mutex);
    free(watch);
    return 0;
}
