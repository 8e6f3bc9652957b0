#define _GNU_SOURCE /* SCHED_BATCH, SCHED_IDLE */
#include "baselines.h"

#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
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

/* libuv's thread pool is one per process, started by its first submission (uv_once), its threads
 * created by the submitting thread; Linux threads inherit their creator's scheduling policy. The
 * stat scenario's C child starts it here, before its timed run, so that (as in the benchmark
 * process, where earlier runs had started it) thread creation is not timed, and as ReactiveUV
 * starts it by default: mode 1, batch threads (one CPU: SCHED_BATCH on the calling thread around
 * the first submission), mode 2, lowered threads (several CPUs: each new pool thread at nice 5). */
static void pool_noop(uv_work_t *work) { (void)work; }

static void pool_record_policy(uv_work_t *work) { *(int *)work->data = sched_getscheduler(0); }

static void pool_record_nice(uv_work_t *work) { *(int *)work->data = getpriority(PRIO_PROCESS, 0); }

static void pool_after(uv_work_t *work, int status) {
    (void)work;
    (void)status;
}

/* One work item through the pool on a private loop, run to its end. 0 or a negative errno. */
static int pool_run(uv_work_cb work_cb, void *data) {
    uv_loop_t loop;
    uv_work_t work = {.data = data};
    int status = uv_loop_init(&loop);
    if (status != 0) return status;
    status = uv_queue_work(&loop, &work, work_cb, pool_after);
    if (status == 0) uv_run(&loop, UV_RUN_DEFAULT);
    int closed = uv_loop_close(&loop);
    return status != 0 ? status : closed;
}

/* The IDs of this process's threads, into ids (at most capacity); how many, or -1. */
static int task_ids(int *ids, int capacity) {
    DIR *dir = opendir("/proc/self/task");
    if (!dir) return -1;
    int count = 0;
    struct dirent *entry;
    while ((entry = readdir(dir)) && count < capacity) {
        int id = atoi(entry->d_name);
        if (id > 0) ids[count++] = id;
    }
    closedir(dir);
    return count;
}

int rawc_start_pool(int mode) {
    /* On Linux, pid 0 names the calling thread: only this thread (and the pool's threads it
     * creates) changes policy. A thread already under another policy is left as it is. */
    int policy = sched_getscheduler(0);
    if (policy < 0) return -errno;
    int batch = mode == 1 && policy == SCHED_OTHER;
    struct sched_param param = {.sched_priority = 0};
    if (batch && sched_setscheduler(0, SCHED_BATCH, &param) != 0) return -errno;
    int before[256], after[256];
    int before_count = mode == 2 ? task_ids(before, 256) : 0;
    int status = pool_run(pool_noop, NULL);
    if (batch && sched_setscheduler(0, SCHED_OTHER, &param) != 0 && status == 0) status = -errno;
    if (mode == 2 && status == 0) {
        /* As ReactiveUV lowers them: each thread the first submission made, nice 5. This child
         * makes no other thread. */
        int after_count = task_ids(after, 256);
        for (int i = 0; i < after_count; i++) {
            int seen = 0;
            for (int j = 0; j < before_count; j++) seen |= after[i] == before[j];
            if (!seen && setpriority(PRIO_PROCESS, (id_t)after[i], 5) != 0) return -errno;
        }
    }
    return status;
}

int rawc_pool_thread_policy(void) {
    int policy = -1;
    int status = pool_run(pool_record_policy, &policy);
    if (status != 0) return status;
    return policy < 0 ? UV_EINVAL : policy;
}

int rawc_pool_thread_nice(void) {
    int nice = -100;
    int status = pool_run(pool_record_nice, &nice);
    return status != 0 ? status : nice;
}

unsigned rawc_available_parallelism(void) { return uv_available_parallelism(); }

const char *rawc_policy_name(int policy) {
    switch (policy) {
    case SCHED_OTHER: return "SCHED_OTHER";
    case SCHED_BATCH: return "SCHED_BATCH";
    case SCHED_IDLE: return "SCHED_IDLE";
    case SCHED_FIFO: return "SCHED_FIFO";
    case SCHED_RR: return "SCHED_RR";
    default: return "unknown";
    }
}
