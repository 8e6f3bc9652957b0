#include "baselines.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

static uint64_t rawc_fs_last_loop_cpu_ns;

uint64_t rawc_fs_loop_cpu(void) { return rawc_fs_last_loop_cpu_ns; }

static uint64_t thread_cpu_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

/* stat throughput (libuv's fs_stat shape): `inflight` uv_fs_stat requests on one path, each
 * callback starting the next until `count` were made. */
typedef struct {
    uv_loop_t loop;
    const char *path;
    int started;
    int count;
    int failed;
    uv_fs_t *requests;
} stat_run_t;

static void stat_done(uv_fs_t *request) {
    stat_run_t *run = request->data;
    if (request->result < 0) run->failed = 1;
    uv_fs_req_cleanup(request);
    if (run->started < run->count && !run->failed) {
        run->started++;
        request->data = run;
        if (uv_fs_stat(&run->loop, request, run->path, stat_done) != 0) run->failed = 1;
    }
}

uint64_t rawc_fs_stat(const char *path, int count, int inflight) {
    stat_run_t run = {0};
    if (count <= 0 || inflight <= 0 || uv_loop_init(&run.loop) != 0) return 0;
    run.path = path;
    run.count = count;
    run.requests = calloc((size_t)inflight, sizeof(uv_fs_t));
    uint64_t cpu = thread_cpu_ns();
    uint64_t begin = uv_hrtime();
    for (int i = 0; i < inflight && run.started < count; i++) {
        run.started++;
        run.requests[i].data = &run;
        if (uv_fs_stat(&run.loop, &run.requests[i], path, stat_done) != 0) run.failed = 1;
    }
    uv_run(&run.loop, UV_RUN_DEFAULT);
    uint64_t elapsed = uv_hrtime() - begin;
    rawc_fs_last_loop_cpu_ns = thread_cpu_ns() - cpu;
    uv_loop_close(&run.loop);
    free(run.requests);
    return run.failed ? 0 : elapsed;
}

/* Directory listing: opendir, readdir `batch` entries at a time until none come, closedir.
 * Counts the entries and reads each name (summing the lengths), as a consumer would. */
typedef struct {
    uv_loop_t loop;
    uv_fs_t request;
    uv_dir_t *dir;
    uv_dirent_t *dirents;
    int batch;
    uint64_t entries;
    uint64_t name_bytes;
    int failed;
} list_run_t;

static void list_read(list_run_t *run);

static void list_closed(uv_fs_t *request) {
    uv_fs_req_cleanup(request);
}

static void list_batch(uv_fs_t *request) {
    list_run_t *run = request->data;
    ssize_t count = request->result;
    if (count < 0) run->failed = 1;
    for (ssize_t i = 0; i < count; i++) {
        run->entries++;
        run->name_bytes += strlen(run->dirents[i].name);
    }
    uv_fs_req_cleanup(request);
    if (count > 0) {
        list_read(run);
    } else {
        uv_fs_closedir(&run->loop, &run->request, run->dir, list_closed);
    }
}

static void list_read(list_run_t *run) {
    run->request.data = run;
    if (uv_fs_readdir(&run->loop, &run->request, run->dir, list_batch) != 0) run->failed = 1;
}

static void list_opened(uv_fs_t *request) {
    list_run_t *run = request->data;
    if (request->result < 0) {
        run->failed = 1;
        uv_fs_req_cleanup(request);
        return;
    }
    run->dir = request->ptr;
    run->dir->dirents = run->dirents;
    run->dir->nentries = (size_t)run->batch;
    uv_fs_req_cleanup(request);
    list_read(run);
}

uint64_t rawc_fs_list(const char *path, int batch, uint64_t *entries) {
    list_run_t run = {0};
    if (batch <= 0 || uv_loop_init(&run.loop) != 0) return 0;
    run.batch = batch;
    run.dirents = calloc((size_t)batch, sizeof(uv_dirent_t));
    run.request.data = &run;
    uint64_t cpu = thread_cpu_ns();
    uint64_t begin = uv_hrtime();
    if (uv_fs_opendir(&run.loop, &run.request, path, list_opened) != 0) run.failed = 1;
    uv_run(&run.loop, UV_RUN_DEFAULT);
    uint64_t elapsed = uv_hrtime() - begin;
    rawc_fs_last_loop_cpu_ns = thread_cpu_ns() - cpu;
    uv_loop_close(&run.loop);
    free(run.dirents);
    *entries = run.entries;
    return run.failed ? 0 : elapsed;
}
