#include "baselines.h"

#include <uv.h>

/* Spawn rate: start `file` with every stdio ignored, wait for its exit, close the
 * handle, start the next one from the close callback: `count` times, one at a time. */
typedef struct {
    uv_loop_t loop;
    uv_process_t process;
    uv_process_options_t options;
    uv_stdio_container_t stdio[3];
    char *args[2];
    int remaining;
    int failed;
} spawner_t;

static void spawn_next(spawner_t *spawner);

static void on_closed(uv_handle_t *handle) {
    spawner_t *spawner = handle->data;
    if (--spawner->remaining > 0) spawn_next(spawner);
}

static void on_exit(uv_process_t *process, int64_t status, int signal) {
    spawner_t *spawner = process->data;
    if (status != 0 || signal != 0) spawner->failed = 1;
    uv_close((uv_handle_t *)process, on_closed);
}

static void spawn_next(spawner_t *spawner) {
    spawner->process.data = spawner;
    if (uv_spawn(&spawner->loop, &spawner->process, &spawner->options) != 0) {
        spawner->failed = 1;
        spawner->remaining = 1;  /* the close callback ends the run */
        uv_close((uv_handle_t *)&spawner->process, on_closed);
    }
}

uint64_t rawc_spawn_rate(const char *file, int count) {
    spawner_t spawner = {0};
    if (count <= 0 || uv_loop_init(&spawner.loop) != 0) return 0;
    for (int i = 0; i < 3; i++) spawner.stdio[i].flags = UV_IGNORE;
    spawner.args[0] = (char *)file;
    spawner.args[1] = NULL;
    spawner.options.file = file;
    spawner.options.args = spawner.args;
    spawner.options.exit_cb = on_exit;
    spawner.options.stdio_count = 3;
    spawner.options.stdio = spawner.stdio;
    spawner.remaining = count;
    uint64_t begin = uv_hrtime();
    spawn_next(&spawner);
    uv_run(&spawner.loop, UV_RUN_DEFAULT);
    uint64_t elapsed = uv_hrtime() - begin;
    uv_loop_close(&spawner.loop);
    return spawner.failed ? 0 : elapsed;
}
