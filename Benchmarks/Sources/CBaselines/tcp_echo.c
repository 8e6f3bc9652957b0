#define _GNU_SOURCE
#include "baselines.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

void rawc_pin_current_thread(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (cpu < 0) {
        for (int each = 0; each < CPU_SETSIZE; each++) CPU_SET(each, &set);
    } else {
        CPU_SET(cpu, &set);
    }
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static void pin(int cpu) {
    if (cpu >= 0) rawc_pin_current_thread(cpu);
}

/* Echo ping-pong over loopback TCP, or over a Unix-domain socket (uv_pipe_t) when `path` is given. */
typedef union { uv_tcp_t tcp; uv_pipe_t pipe; uv_stream_t stream; uv_handle_t handle; } echo_stream_t;

/* ---- server ---- */
typedef struct {
    uv_loop_t loop;
    echo_stream_t listener;
    echo_stream_t *peer;
    uv_async_t stop;
    const char *path;
    int port;
    int cpu;
    uv_sem_t ready;
    char buffer[65536];
} echo_server_t;

typedef struct { uv_write_t request; uv_buf_t buf; } echo_write_t;

static void server_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf) {
    (void)suggested;
    echo_server_t *server = handle->data;
    buf->base = server->buffer;
    buf->len = sizeof(server->buffer);
}

static void server_wrote(uv_write_t *request, int status) {
    (void)status;
    echo_write_t *write = (echo_write_t *)request;
    free(write->buf.base);
    free(write);
}

static void server_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
    if (nread <= 0) {
        if (nread < 0) uv_close((uv_handle_t *)stream, NULL);
        return;
    }
    echo_write_t *write = malloc(sizeof(echo_write_t));
    write->buf = uv_buf_init(malloc((size_t)nread), (unsigned)nread);
    memcpy(write->buf.base, buf->base, (size_t)nread);
    uv_write(&write->request, stream, &write->buf, 1, server_wrote);
}

static void server_accept(uv_stream_t *listener, int status) {
    if (status < 0) return;
    echo_server_t *server = listener->data;
    server->peer = malloc(sizeof(echo_stream_t));
    if (server->path) uv_pipe_init(&server->loop, &server->peer->pipe, 0);
    else uv_tcp_init(&server->loop, &server->peer->tcp);
    server->peer->handle.data = server;
    if (uv_accept(listener, &server->peer->stream) == 0) {
        if (!server->path) uv_tcp_nodelay(&server->peer->tcp, 1);
        uv_read_start(&server->peer->stream, server_alloc, server_read);
    }
}

static void close_any(uv_handle_t *handle, void *argument) {
    (void)argument;
    if (!uv_is_closing(handle)) uv_close(handle, NULL);
}

static void server_stop(uv_async_t *handle) {
    echo_server_t *server = handle->data;
    uv_walk(&server->loop, close_any, NULL);
}

static void server_main(void *argument) {
    echo_server_t *server = argument;
    pin(server->cpu);
    uv_loop_init(&server->loop);
    uv_async_init(&server->loop, &server->stop, server_stop);
    server->stop.data = server;
    if (server->path) {
        uv_pipe_init(&server->loop, &server->listener.pipe, 0);
        server->listener.handle.data = server;
        uv_pipe_bind(&server->listener.pipe, server->path);
        uv_listen(&server->listener.stream, 128, server_accept);
    } else {
        uv_tcp_init(&server->loop, &server->listener.tcp);
        server->listener.handle.data = server;
        struct sockaddr_in address;
        uv_ip4_addr("127.0.0.1", 0, &address);
        uv_tcp_bind(&server->listener.tcp, (const struct sockaddr *)&address, 0);
        uv_listen(&server->listener.stream, 128, server_accept);
        struct sockaddr_in bound;
        int length = sizeof(bound);
        uv_tcp_getsockname(&server->listener.tcp, (struct sockaddr *)&bound, &length);
        server->port = ntohs(bound.sin_port);
    }
    uv_sem_post(&server->ready);
    uv_run(&server->loop, UV_RUN_DEFAULT);
    uv_loop_close(&server->loop);
    free(server->peer);
}

/* ---- client ---- */
typedef struct {
    uv_loop_t loop;
    echo_stream_t socket;
    const char *path;
    uv_connect_t connect;
    uv_write_t write;
    char *message;
    int message_size;
    int received;
    uint64_t sent_at, start, measure_from, measure_until;
    uint64_t round_trips, *latencies, capacity, recorded;
    char buffer[65536];
} echo_client_t;

static void client_send(echo_client_t *client);

static void client_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf) {
    (void)suggested;
    echo_client_t *client = handle->data;
    buf->base = client->buffer;
    buf->len = sizeof(client->buffer);
}

static void client_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
    (void)buf;
    echo_client_t *client = stream->data;
    if (nread < 0) { uv_close((uv_handle_t *)stream, NULL); return; }
    client->received += (int)nread;
    if (client->received < client->message_size) return;
    client->received = 0;
    uint64_t now = uv_hrtime();
    if (now >= client->measure_from) {
        client->round_trips++;
        if (client->recorded < client->capacity) client->latencies[client->recorded++] = now - client->sent_at;
    }
    if (now >= client->measure_until) {
        uv_close((uv_handle_t *)stream, NULL);
        return;
    }
    client_send(client);
}

static void client_wrote(uv_write_t *request, int status) { (void)request; (void)status; }

static void client_send(echo_client_t *client) {
    uv_buf_t buf = uv_buf_init(client->message, (unsigned)client->message_size);
    client->sent_at = uv_hrtime();
    uv_write(&client->write, &client->socket.stream, &buf, 1, client_wrote);
}

static void client_connected(uv_connect_t *request, int status) {
    echo_client_t *client = request->data;
    if (status < 0) { uv_close(&client->socket.handle, NULL); return; }
    if (!client->path) uv_tcp_nodelay(&client->socket.tcp, 1);
    uv_read_start(&client->socket.stream, client_alloc, client_read);
    client_send(client);
}

static int stream_echo(const char *path, int message_size, int warmup_ms, int measure_ms, int server_cpu, int client_cpu,
                       uint64_t *latencies, uint64_t capacity, rawc_echo_result *result) {
    echo_server_t *server = calloc(1, sizeof(echo_server_t));
    server->path = path;
    server->cpu = server_cpu;
    uv_sem_init(&server->ready, 0);
    uv_thread_t server_thread;
    uv_thread_create(&server_thread, server_main, server);
    uv_sem_wait(&server->ready);

    pin(client_cpu);
    echo_client_t *client = calloc(1, sizeof(echo_client_t));
    uv_loop_init(&client->loop);
    client->path = path;
    if (path) uv_pipe_init(&client->loop, &client->socket.pipe, 0);
    else uv_tcp_init(&client->loop, &client->socket.tcp);
    client->socket.handle.data = client;
    client->connect.data = client;
    client->message_size = message_size;
    client->message = malloc((size_t)message_size);
    memset(client->message, 'x', (size_t)message_size);
    client->latencies = latencies;
    client->capacity = capacity;
    client->start = uv_hrtime();
    client->measure_from = client->start + (uint64_t)warmup_ms * 1000000;
    client->measure_until = client->measure_from + (uint64_t)measure_ms * 1000000;
    if (path) {
        uv_pipe_connect(&client->connect, &client->socket.pipe, path, client_connected);
    } else {
        struct sockaddr_in address;
        uv_ip4_addr("127.0.0.1", server->port, &address);
        uv_tcp_connect(&client->connect, &client->socket.tcp, (const struct sockaddr *)&address, client_connected);
    }
    uv_run(&client->loop, UV_RUN_DEFAULT);
    uint64_t end = uv_hrtime();
    uv_loop_close(&client->loop);

    uv_async_send(&server->stop);
    uv_thread_join(&server_thread);
    result->round_trips = client->round_trips;
    result->elapsed_ns = end - client->measure_from;
    result->recorded = client->recorded;
    free(client->message);
    free(client);
    uv_sem_destroy(&server->ready);
    free(server);

    rawc_pin_current_thread(-1);
    return 0;
}

int rawc_tcp_echo(int message_size, int warmup_ms, int measure_ms, int server_cpu, int client_cpu,
                  uint64_t *latencies, uint64_t capacity, rawc_echo_result *result) {
    return stream_echo(NULL, message_size, warmup_ms, measure_ms, server_cpu, client_cpu, latencies, capacity, result);
}

int rawc_unix_echo(const char *path, int message_size, int warmup_ms, int measure_ms, int server_cpu, int client_cpu,
                   uint64_t *latencies, uint64_t capacity, rawc_echo_result *result) {
    return stream_echo(path, message_size, warmup_ms, measure_ms, server_cpu, client_cpu, latencies, capacity, result);
}
