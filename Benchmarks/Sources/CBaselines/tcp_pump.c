#include "baselines.h"

#include <stdlib.h>
#include <string.h>
#include <uv.h>

/* Server and client on one loop (one thread): the client keeps `in_flight`
 * writes of `chunk` bytes outstanding; the server reads and discards. */
typedef struct {
    uv_loop_t loop;
    uv_tcp_t listener, server_peer, client;
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
        uv_close((uv_handle_t *)&pump->client, NULL);
        uv_close((uv_handle_t *)&pump->listener, NULL);
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
    uv_write(request, (uv_stream_t *)&pump->client, &buf, 1, pump_wrote);
}

static void pump_connected(uv_connect_t *request, int status) {
    pump_t *pump = request->data;
    if (status < 0) return;
    uv_tcp_nodelay(&pump->client, 1);
    pump->started = uv_hrtime();
    for (int i = 0; i < pump->in_flight; i++) pump_send(pump, &pump->writes[i]);
}

static void pump_accept(uv_stream_t *listener, int status) {
    pump_t *pump = listener->data;
    if (status < 0) return;
    uv_tcp_init(&pump->loop, &pump->server_peer);
    pump->server_peer.data = pump;
    if (uv_accept(listener, (uv_stream_t *)&pump->server_peer) == 0) {
        uv_read_start((uv_stream_t *)&pump->server_peer, pump_alloc, pump_server_read);
    }
}

uint64_t rawc_tcp_pump(uint64_t total, int chunk, int in_flight) {
    pump_t *pump = calloc(1, sizeof(pump_t));
    pump->total = total;
    pump->chunk = chunk;
    pump->in_flight = in_flight;
    pump->payload = malloc((size_t)chunk);
    memset(pump->payload, 'p', (size_t)chunk);
    pump->sink = malloc(65536);
    pump->writes = calloc((size_t)in_flight, sizeof(uv_write_t));
    uv_loop_init(&pump->loop);
    uv_tcp_init(&pump->loop, &pump->listener);
    pump->listener.data = pump;
    struct sockaddr_in address;
    uv_ip4_addr("127.0.0.1", 0, &address);
    uv_tcp_bind(&pump->listener, (const struct sockaddr *)&address, 0);
    uv_listen((uv_stream_t *)&pump->listener, 16, pump_accept);
    struct sockaddr_in bound;
    int length = sizeof(bound);
    uv_tcp_getsockname(&pump->listener, (struct sockaddr *)&bound, &length);
    uv_tcp_init(&pump->loop, &pump->client);
    pump->client.data = pump;
    pump->connect.data = pump;
    uv_tcp_connect(&pump->connect, &pump->client, (const struct sockaddr *)&bound, pump_connected);
    uv_run(&pump->loop, UV_RUN_DEFAULT);
    uint64_t elapsed = pump->finished ? pump->finished - pump->started : 0;
    uv_loop_close(&pump->loop);
    free(pump->writes);
    free(pump->sink);
    free(pump->payload);
    free(pump);
    return elapsed;
}
