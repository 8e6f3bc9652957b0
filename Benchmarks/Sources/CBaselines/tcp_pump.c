#include "baselines.h"

#include <stdlib.h>
#include <string.h>
#include <uv.h>

/* Server and client on one loop (one thread): the client keeps `in_flight`
 * writes of `chunk` bytes outstanding; the server reads and discards. Over
 * loopback TCP, or over a Unix-domain socket (uv_pipe_t) when `path` is given. */
typedef union { uv_tcp_t tcp; uv_pipe_t pipe; uv_stream_t stream; uv_handle_t handle; } pump_stream_t;

typedef struct {
    uv_loop_t loop;
    pump_stream_t listener, server_peer, client;
    const char *path;
    uv_connect_t connect;
    uv_write_t *writes;
    char *payload;
    char *sink;
    int chunk, in_flight;
    uint64_t total, sent, received, started, finished;
} pump_t;

static void pump_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf) {
    (void)suggested;
    pump_t *pump = handle->data;
    buf->base = pump->sink;
    buf->len = 65536;
}

static void pump_server_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
    (void)buf;
    pump_t *pump = stream->data;
    if (nread < 0) { uv_close((uv_handle_t *)stream, NULL); return; }
    pump->received += (uint64_t)nread;
    if (pump->received >= pump->total && pump->finished == 0) {
        pump->finished = uv_hrtime();
        uv_close((uv_handle_t *)stream, NULL);
        uv_close(&pump->client.handle, NULL);
        uv_close(&pump->listener.handle, NULL);
    }
}

static void pump_send(pump_t *pump, uv_write_t *request);

static void pump_wrote(uv_write_t *request, int status) {
    pump_t *pump = request->data;
    if (status < 0 || pump->finished) return;
    pump_send(pump, request);
}

static void pump_send(pump_t *pump, uv_write_t *request) {
    if (pump->sent >= pump->total) return;
    uint64_t left = pump->total - pump->sent;
    unsigned size = left < (uint64_t)pump->chunk ? (unsigned)left : (unsigned)pump->chunk;
    uv_buf_t buf = uv_buf_init(pump->payload, size);
    pump->sent += size;
    request->data = pump;
    uv_write(request, &pump->client.stream, &buf, 1, pump_wrote);
}

static void pump_connected(uv_connect_t *request, int status) {
    pump_t *pump = request->data;
    if (status < 0) return;
    if (!pump->path) uv_tcp_nodelay(&pump->client.tcp, 1);
    pump->started = uv_hrtime();
    for (int i = 0; i < pump->in_flight; i++) pump_send(pump, &pump->writes[i]);
}

static void pump_accept(uv_stream_t *listener, int status) {
    pump_t *pump = listener->data;
    if (status < 0) return;
    if (pump->path) uv_pipe_init(&pump->loop, &pump->server_peer.pipe, 0);
    else uv_tcp_init(&pump->loop, &pump->server_peer.tcp);
    pump->server_peer.handle.data = pump;
    if (uv_accept(listener, &pump->server_peer.stream) == 0) {
        uv_read_start(&pump->server_peer.stream, pump_alloc, pump_server_read);
    }
}

static uint64_t stream_pump(const char *path, uint64_t total, int chunk, int in_flight) {
    pump_t *pump = calloc(1, sizeof(pump_t));
    pump->path = path;
    pump->total = total;
    pump->chunk = chunk;
    pump->in_flight = in_flight;
    pump->payload = malloc((size_t)chunk);
    memset(pump->payload, 'p', (size_t)chunk);
    pump->sink = malloc(65536);
    pump->writes = calloc((size_t)in_flight, sizeof(uv_write_t));
    uv_loop_init(&pump->loop);
    pump->connect.data = pump;
    if (path) {
        uv_pipe_init(&pump->loop, &pump->listener.pipe, 0);
        pump->listener.handle.data = pump;
        uv_pipe_bind(&pump->listener.pipe, path);
        uv_listen(&pump->listener.stream, 16, pump_accept);
        uv_pipe_init(&pump->loop, &pump->client.pipe, 0);
        pump->client.handle.data = pump;
        uv_pipe_connect(&pump->connect, &pump->client.pipe, path, pump_connected);
    } else {
        uv_tcp_init(&pump->loop, &pump->listener.tcp);
        pump->listener.handle.data = pump;
        struct sockaddr_in address;
        uv_ip4_addr("127.0.0.1", 0, &address);
        uv_tcp_bind(&pump->listener.tcp, (const struct sockaddr *)&address, 0);
        uv_listen(&pump->listener.stream, 16, pump_accept);
        struct sockaddr_in bound;
        int length = sizeof(bound);
        uv_tcp_getsockname(&pump->listener.tcp, (struct sockaddr *)&bound, &length);
        uv_tcp_init(&pump->loop, &pump->client.tcp);
        pump->client.handle.data = pump;
        uv_tcp_connect(&pump->connect, &pump->client.tcp, (const struct sockaddr *)&bound, pump_connected);
    }
    uv_run(&pump->loop, UV_RUN_DEFAULT);
    uint64_t elapsed = pump->finished ? pump->finished - pump->started : 0;
    uv_loop_close(&pump->loop);
    free(pump->writes);
    free(pump->sink);
    free(pump->payload);
    free(pump);
    return elapsed;
}

uint64_t rawc_tcp_pump(uint64_t total, int chunk, int in_flight) {
    return stream_pump(NULL, total, chunk, in_flight);
}

uint64_t rawc_unix_pump(const char *path, uint64_t total, int chunk, int in_flight) {
    return stream_pump(path, total, chunk, in_flight);
}
