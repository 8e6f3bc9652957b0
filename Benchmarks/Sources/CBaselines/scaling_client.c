#define _GNU_SOURCE
#include "baselines.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

/* The load clients of the scaling and churn scenarios: one libuv loop on the calling
 * thread, as light as a client can be, so the server keeps the machine's cores. */

uint32_t rawc_scaling_hash(const uint8_t *bytes, int count, int rounds) {
    uint32_t hash = 2166136261u;
    for (int round = 0; round < rounds; round++) {
        for (int index = 0; index < count; index++) {
            hash ^= bytes[index];
            hash *= 16777619u;
        }
    }
    return hash;
}

static uint64_t cpu_ns(clockid_t clock) {
    struct timespec now;
    clock_gettime(clock, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

static uint64_t thread_cpu_ns(void) { return cpu_ns(CLOCK_THREAD_CPUTIME_ID); }
/* Every thread of the process: with the server in the same process, minus the client's. */
static uint64_t process_cpu_ns(void) { return cpu_ns(CLOCK_PROCESS_CPUTIME_ID); }

/* ---- scaling: pipelined requests ---- */

#define SCALING_REQUEST 4096
#define SCALING_MAX_DEPTH 64

typedef struct scaling_client scaling_client_t;

typedef struct {
    uv_tcp_t tcp;
    uv_connect_t connect;
    scaling_client_t *client;
    int pending_reply_bytes; /* bytes of the current 4-byte reply read so far */
    uint8_t reply[4];
} scaling_connection_t;

typedef struct {
    uv_write_t request;
    uv_buf_t buffers[SCALING_MAX_DEPTH];
} scaling_write_t;

struct scaling_client {
    uv_loop_t loop;
    uv_timer_t timer;
    scaling_connection_t *connections;
    int count;
    int depth;
    int phase; /* 0 warm-up, 1 measuring, 2 stopping */
    uint64_t replies;
    uint64_t mismatches;
    uint64_t measure_start_ns, measure_end_ns, cpu_start_ns, cpu_end_ns, process_start_ns, process_end_ns;
    uint8_t request[SCALING_REQUEST];
    uint8_t expected[4];
    uint8_t read_buffer[65536];
    int failed;
    int connected;
};

static void scaling_written(uv_write_t *request, int status) {
    (void)status;
    free(request);
}

static void scaling_send(scaling_connection_t *connection, int requests) {
    while (requests > 0) {
        int batch = requests > SCALING_MAX_DEPTH ? SCALING_MAX_DEPTH : requests;
        scaling_write_t *write = malloc(sizeof(*write));
        for (int index = 0; index < batch; index++) write->buffers[index] = uv_buf_init((char *)connection->client->request, SCALING_REQUEST);
        if (uv_write(&write->request, (uv_stream_t *)&connection->tcp, write->buffers, (unsigned)batch, scaling_written) != 0) {
            free(write);
            connection->client->failed = 1;
            return;
        }
        requests -= batch;
    }
}

static void scaling_allocate(uv_handle_t *handle, size_t suggested, uv_buf_t *buffer) {
    (void)suggested;
    scaling_connection_t *connection = handle->data;
    *buffer = uv_buf_init((char *)connection->client->read_buffer, sizeof(connection->client->read_buffer));
}

static void scaling_read(uv_stream_t *stream, ssize_t count, const uv_buf_t *buffer) {
    scaling_connection_t *connection = stream->data;
    scaling_client_t *client = connection->client;
    if (count < 0) {
        if (client->phase < 2) client->failed = 1;
        uv_read_stop(stream);
        return;
    }
    int complete = 0;
    for (ssize_t index = 0; index < count; index++) {
        connection->reply[connection->pending_reply_bytes++] = (uint8_t)buffer->base[index];
        if (connection->pending_reply_bytes == 4) {
            connection->pending_reply_bytes = 0;
            if (memcmp(connection->reply, client->expected, 4) != 0) client->mismatches++;
            complete++;
        }
    }
    if (client->phase == 1) client->replies += (uint64_t)complete;
    if (client->phase < 2 && complete > 0) scaling_send(connection, complete);
}

static void scaling_connected(uv_connect_t *request, int status) {
    scaling_connection_t *connection = request->data;
    if (status != 0) {
        connection->client->failed = 1;
        return;
    }
    connection->client->connected++;
    uv_tcp_nodelay(&connection->tcp, 1);
    uv_read_start((uv_stream_t *)&connection->tcp, scaling_allocate, scaling_read);
    scaling_send(connection, connection->client->depth);
}

static void scaling_close_all(scaling_client_t *client) {
    for (int index = 0; index < client->count; index++) {
        uv_handle_t *handle = (uv_handle_t *)&client->connections[index].tcp;
        if (!uv_is_closing(handle)) uv_close(handle, NULL);
    }
    uv_close((uv_handle_t *)&client->timer, NULL);
}

static void scaling_tick(uv_timer_t *timer) {
    scaling_client_t *client = timer->data;
    if (client->phase == 0) {
        client->phase = 1;
        client->replies = 0;
        client->measure_start_ns = uv_hrtime();
        client->cpu_start_ns = thread_cpu_ns();
        client->process_start_ns = process_cpu_ns();
    } else {
        client->phase = 2;
        client->measure_end_ns = uv_hrtime();
        client->cpu_end_ns = thread_cpu_ns();
        client->process_end_ns = process_cpu_ns();
        scaling_close_all(client);
    }
}

int rawc_scaling_client(int port, int connections, int depth, int rounds, int warmup_ms, int measure_ms,
                        rawc_scaling_result *result) {
    if (depth < 1 || connections < 1) return -1;
    scaling_client_t *client = calloc(1, sizeof(*client));
    client->count = connections;
    client->depth = depth;
    for (int index = 0; index < SCALING_REQUEST; index++) client->request[index] = (uint8_t)(index * 31 + 7);
    uint32_t expected = rawc_scaling_hash(client->request, SCALING_REQUEST, rounds);
    memcpy(client->expected, &expected, 4); /* the servers reply in the machine's (little-endian) order */
    uv_loop_init(&client->loop);
    client->connections = calloc((size_t)connections, sizeof(scaling_connection_t));
    struct sockaddr_in address;
    uv_ip4_addr("127.0.0.1", port, &address);
    for (int index = 0; index < connections; index++) {
        scaling_connection_t *connection = &client->connections[index];
        connection->client = client;
        uv_tcp_init(&client->loop, &connection->tcp);
        connection->tcp.data = connection;
        connection->connect.data = connection;
        uv_tcp_connect(&connection->connect, &connection->tcp, (const struct sockaddr *)&address, scaling_connected);
    }
    uv_timer_init(&client->loop, &client->timer);
    client->timer.data = client;
    uv_timer_start(&client->timer, scaling_tick, (uint64_t)warmup_ms, (uint64_t)measure_ms);
    uv_run(&client->loop, UV_RUN_DEFAULT);
    uv_loop_close(&client->loop);
    result->replies = client->replies;
    result->elapsed_ns = client->measure_end_ns - client->measure_start_ns;
    result->client_cpu_ns = client->cpu_end_ns - client->cpu_start_ns;
    result->process_cpu_ns = client->process_end_ns - client->process_start_ns;
    result->mismatches = client->mismatches;
    int status = client->failed || client->connected != connections ? -1 : 0;
    free(client->connections);
    free(client);
    return status;
}

/* ---- churn: connect, 64 bytes there and back, close ---- */

typedef struct churn_client churn_client_t;

typedef struct {
    uv_tcp_t tcp;
    uv_connect_t connect;
    uv_write_t write;
    churn_client_t *client;
    int received;
    int slot_in_use;
} churn_connection_t;

struct churn_client {
    uv_loop_t loop;
    uv_timer_t timer;
    churn_connection_t *slots;
    int in_flight;
    int phase;
    uint64_t completed;
    uint64_t failures;
    uint64_t measure_start_ns, measure_end_ns, cpu_start_ns, cpu_end_ns, process_start_ns, process_end_ns;
    int server_pid;
    int64_t server_start_ns, server_end_ns, server_user_start_ns, server_user_end_ns;
    struct sockaddr_in address;
    char message[64];
    char read_buffer[65536];
};

static void churn_start(churn_connection_t *connection);

static void churn_closed(uv_handle_t *handle) {
    churn_connection_t *connection = handle->data;
    churn_client_t *client = connection->client;
    connection->slot_in_use = 0;
    if (client->phase < 2) churn_start(connection);
}

static void churn_allocate(uv_handle_t *handle, size_t suggested, uv_buf_t *buffer) {
    (void)suggested;
    churn_connection_t *connection = handle->data;
    *buffer = uv_buf_init(connection->client->read_buffer, sizeof(connection->client->read_buffer));
}

static void churn_read(uv_stream_t *stream, ssize_t count, const uv_buf_t *buffer) {
    (void)buffer;
    churn_connection_t *connection = stream->data;
    if (count < 0) {
        connection->client->failures++;
        uv_close((uv_handle_t *)stream, churn_closed);
        return;
    }
    connection->received += (int)count;
    if (connection->received >= 64) {
        if (connection->client->phase == 1) connection->client->completed++;
        uv_close((uv_handle_t *)stream, churn_closed);
    }
}

static void churn_written(uv_write_t *request, int status) { (void)request; (void)status; }

static void churn_connected(uv_connect_t *request, int status) {
    churn_connection_t *connection = request->data;
    if (status != 0) {
        connection->client->failures++;
        uv_close((uv_handle_t *)&connection->tcp, churn_closed);
        return;
    }
    uv_buf_t buffer = uv_buf_init(connection->client->message, 64);
    uv_read_start((uv_stream_t *)&connection->tcp, churn_allocate, churn_read);
    uv_write(&connection->write, (uv_stream_t *)&connection->tcp, &buffer, 1, churn_written);
}

static void churn_start(churn_connection_t *connection) {
    churn_client_t *client = connection->client;
    connection->received = 0;
    connection->slot_in_use = 1;
    uv_tcp_init(&client->loop, &connection->tcp);
    connection->tcp.data = connection;
    connection->connect.data = connection;
    if (uv_tcp_connect(&connection->connect, &connection->tcp, (const struct sockaddr *)&client->address, churn_connected) != 0) {
        client->failures++;
        uv_close((uv_handle_t *)&connection->tcp, churn_closed);
    }
}

static void churn_tick(uv_timer_t *timer) {
    churn_client_t *client = timer->data;
    if (client->phase == 0) {
        client->phase = 1;
        client->completed = 0;
        client->measure_start_ns = uv_hrtime();
        client->cpu_start_ns = thread_cpu_ns();
        client->process_start_ns = process_cpu_ns();
        if (client->server_pid > 0) {
            client->server_start_ns = rawc_process_cpu_ns(client->server_pid);
            client->server_user_start_ns = rawc_process_user_ns(client->server_pid);
        }
    } else {
        client->phase = 2;
        client->measure_end_ns = uv_hrtime();
        client->cpu_end_ns = thread_cpu_ns();
        client->process_end_ns = process_cpu_ns();
        if (client->server_pid > 0) {
            client->server_end_ns = rawc_process_cpu_ns(client->server_pid);
            client->server_user_end_ns = rawc_process_user_ns(client->server_pid);
        }
        uv_close((uv_handle_t *)&client->timer, NULL);
    }
}

int rawc_churn_client(int port, int in_flight, int warmup_ms, int measure_ms, int server_pid, rawc_churn_result *result) {
    churn_client_t *client = calloc(1, sizeof(*client));
    client->in_flight = in_flight;
    client->server_pid = server_pid;
    memset(client->message, 'x', sizeof(client->message));
    uv_ip4_addr("127.0.0.1", port, &client->address);
    uv_loop_init(&client->loop);
    client->slots = calloc((size_t)in_flight, sizeof(churn_connection_t));
    for (int index = 0; index < in_flight; index++) {
        client->slots[index].client = client;
        churn_start(&client->slots[index]);
    }
    uv_timer_init(&client->loop, &client->timer);
    client->timer.data = client;
    uv_timer_start(&client->timer, churn_tick, (uint64_t)warmup_ms, (uint64_t)measure_ms);
    uv_run(&client->loop, UV_RUN_DEFAULT);
    uv_loop_close(&client->loop);
    result->connections = client->completed;
    result->elapsed_ns = client->measure_end_ns - client->measure_start_ns;
    result->client_cpu_ns = client->cpu_end_ns - client->cpu_start_ns;
    result->process_cpu_ns = client->process_end_ns - client->process_start_ns;
    result->failures = client->failures;
    result->server_cpu_ns = server_pid > 0 && client->server_start_ns >= 0 && client->server_end_ns >= client->server_start_ns
        ? client->server_end_ns - client->server_start_ns : -1;
    result->server_user_ns = result->server_cpu_ns >= 0 ? client->server_user_end_ns - client->server_user_start_ns : -1;
    free(client->slots);
    free(client);
    return 0;
}
