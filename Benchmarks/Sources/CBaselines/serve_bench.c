#define _GNU_SOURCE
#include "baselines.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

/* The server scenarios (connection churn, idle connections): the raw libuv C echo
 * server, the idle client, and readers of another process's CPU time, resident memory and
 * open descriptors, so every contender's server can run in a process of its own. */

/* ---- the raw C echo server (the shape of libuv's test/echo-server.c) ---- */

typedef struct {
    uv_write_t request;
    uv_buf_t buffer;
} echo_write_t;

static void echo_closed(uv_handle_t *handle) { free(handle); }

static void echo_written(uv_write_t *request, int status) {
    (void)status;
    echo_write_t *write = (echo_write_t *)request;
    free(write->buffer.base);
    free(write);
}

/* A buffer per read, as libuv's echo server does: an idle connection holds none. */
static void echo_allocate(uv_handle_t *handle, size_t suggested, uv_buf_t *buffer) {
    (void)handle;
    buffer->base = malloc(suggested);
    buffer->len = buffer->base ? suggested : 0;
}

static void echo_read(uv_stream_t *stream, ssize_t count, const uv_buf_t *buffer) {
    if (count <= 0) {
        free(buffer->base);
        if (count < 0) uv_close((uv_handle_t *)stream, echo_closed); /* EOF or error: close (no half-open) */
        return;
    }
    echo_write_t *write = malloc(sizeof(*write));
    write->buffer = uv_buf_init(buffer->base, (unsigned)count);
    if (uv_write(&write->request, stream, &write->buffer, 1, echo_written) != 0) {
        free(buffer->base);
        free(write);
        uv_close((uv_handle_t *)stream, echo_closed);
    }
}

static void echo_connection(uv_stream_t *server, int status) {
    if (status != 0) return;
    uv_tcp_t *client = malloc(sizeof(*client));
    uv_tcp_init(server->loop, client);
    if (uv_accept(server, (uv_stream_t *)client) != 0) {
        uv_close((uv_handle_t *)client, echo_closed);
        return;
    }
    uv_read_start((uv_stream_t *)client, echo_allocate, echo_read);
}

int rawc_echo_serve(int backlog, void (*on_listening)(int port)) {
    uv_loop_t *loop = uv_default_loop();
    static uv_tcp_t server;
    struct sockaddr_in address;
    uv_ip4_addr("127.0.0.1", 0, &address);
    uv_tcp_init(loop, &server);
    int status = uv_tcp_bind(&server, (const struct sockaddr *)&address, 0);
    if (status == 0) status = uv_listen((uv_stream_t *)&server, backlog, echo_connection);
    if (status != 0) return status;
    struct sockaddr_storage bound;
    int length = sizeof(bound);
    uv_tcp_getsockname(&server, (struct sockaddr *)&bound, &length);
    on_listening(ntohs(((struct sockaddr_in *)&bound)->sin_port));
    return uv_run(loop, UV_RUN_DEFAULT);
}

/* ---- the idle client: plain blocking sockets, nothing sent ---- */

int rawc_idle_open(int port, int count, int *descriptors) {
    struct sockaddr_in address;
    memset(&address, 0, sizeof(address));
    address.sin_family = AF_INET;
    address.sin_port = htons((uint16_t)port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int index = 0; index < count; index++) {
        int descriptor = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (descriptor < 0) return index == 0 ? -errno : index;
        if (connect(descriptor, (struct sockaddr *)&address, sizeof(address)) != 0) {
            int error = errno;
            close(descriptor);
            return index == 0 ? -error : index;
        }
        descriptors[index] = descriptor;
    }
    return count;
}

void rawc_idle_close(const int *descriptors, int count) {
    for (int index = 0; index < count; index++) close(descriptors[index]);
}

/* ---- another process, from /proc ---- */

static int64_t process_ticks_ns(int pid, int user_only) {
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    FILE *file = fopen(path, "r");
    if (!file) return -1;
    char line[1024];
    size_t length = fread(line, 1, sizeof(line) - 1, file);
    fclose(file);
    line[length] = 0;
    char *after_name = strrchr(line, ')'); /* the command name may hold spaces */
    if (!after_name) return -1;
    unsigned long user = 0, system = 0;
    /* fields 3..15 after the name: state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime */
    if (sscanf(after_name + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &user, &system) != 2) return -1;
    long ticks = sysconf(_SC_CLK_TCK);
    return (int64_t)(user_only ? user : user + system) * (1000000000 / ticks);
}

int64_t rawc_process_cpu_ns(int pid) { return process_ticks_ns(pid, 0); }
int64_t rawc_process_user_ns(int pid) { return process_ticks_ns(pid, 1); }

int64_t rawc_process_rss_bytes(int pid) {
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/statm", pid);
    FILE *file = fopen(path, "r");
    if (!file) return -1;
    long size = 0, resident = 0;
    int fields = fscanf(file, "%ld %ld", &size, &resident);
    fclose(file);
    if (fields != 2) return -1;
    return (int64_t)resident * sysconf(_SC_PAGESIZE);
}

int rawc_process_descriptor_count(int pid) {
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/fd", pid);
    DIR *directory = opendir(path);
    if (!directory) return -1;
    int count = 0;
    struct dirent *entry;
    while ((entry = readdir(directory)) != NULL) {
        if (entry->d_name[0] != '.') count++;
    }
    closedir(directory);
    return count;
}

int rawc_raise_descriptor_limit(int wanted) {
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return -1;
    rlim_t target = (rlim_t)wanted;
    if (limit.rlim_max != RLIM_INFINITY && target > limit.rlim_max) target = limit.rlim_max;
    if (target > limit.rlim_cur) {
        limit.rlim_cur = target;
        if (setrlimit(RLIMIT_NOFILE, &limit) != 0) return -1;
    }
    getrlimit(RLIMIT_NOFILE, &limit);
    return limit.rlim_cur > (rlim_t)INT32_MAX ? INT32_MAX : (int)limit.rlim_cur;
}
