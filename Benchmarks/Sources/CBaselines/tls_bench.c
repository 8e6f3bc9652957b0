#include "baselines.h"

#include <malloc.h>
#include <signal.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <string.h>
#include <uv.h>

/* TLS over loopback on one libuv loop, OpenSSL between two memory BIOs per connection (the
 * design Node's TLSSocket and ReactiveUV use): ciphertext read from the socket is written into
 * the read BIO, what OpenSSL has to send is taken out of the write BIO into a malloc'd buffer
 * and uv_write'n. Contexts as ReactiveUV makes them: TLS 1.2-1.3, no renegotiation or
 * compression, released buffers; the client verifies the chain and the name "localhost". */

enum { MODE_PUMP, MODE_HANDSHAKES, MODE_IDLE };

typedef struct tls_bench tls_bench_t;

typedef struct tls_conn {
    uv_tcp_t tcp;
    SSL *ssl;
    BIO *rbio, *wbio;
    tls_bench_t *bench;
    int server, handshake_done, closing, writes;
    struct tls_conn *next;
} tls_conn_t;

typedef struct {
    uv_write_t request;
    tls_conn_t *conn;
    int data;
    char bytes[];
} tls_write_t;

struct tls_bench {
    uv_loop_t loop;
    uv_tcp_t listener;
    struct sockaddr_in address;
    SSL_CTX *server_ctx, *client_ctx;
    int mode, failed, x25519;
    uint64_t total, sent, received, started, finished;
    int chunk, in_flight;
    char *payload, *plain, *cipher;
    int target, opened, client_done, server_done, open_conns, listener_closed;
    tls_conn_t *conns;
};

static SSL_CTX *tls_context(int server, const char *cert, const char *key) {
    SSL_CTX *ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
    if (!ctx) return NULL;
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE);
    SSL_CTX_set_mode(ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS);
    if (server) {
        if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1 || SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1
            || SSL_CTX_check_private_key(ctx) != 1) {
            SSL_CTX_free(ctx);
            return NULL;
        }
    } else if (SSL_CTX_load_verify_locations(ctx, cert, NULL) != 1) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    return ctx;
}

static void conn_closed(uv_handle_t *handle) {
    tls_conn_t *conn = handle->data;
    tls_bench_t *bench = conn->bench;
    SSL_free(conn->ssl);
    free(conn);
    bench->open_conns--;
    if (bench->mode == MODE_HANDSHAKES && bench->open_conns == 0 && bench->server_done >= bench->target && !bench->listener_closed) {
        bench->listener_closed = 1;
        uv_close((uv_handle_t *)&bench->listener, NULL);
    }
}

static void conn_close(tls_conn_t *conn) {
    if (conn->closing) return;
    conn->closing = 1;
    uv_close((uv_handle_t *)&conn->tcp, conn_closed);
}

static void pump_send(tls_bench_t *bench);
static void flush(tls_conn_t *conn, int data);

static void wrote(uv_write_t *request, int status) {
    tls_write_t *write = (tls_write_t *)request;
    tls_conn_t *conn = write->conn;
    int data = write->data;
    free(write);
    conn->writes--;
    if (status < 0) {
        conn_close(conn);
        return;
    }
    if (data && !conn->bench->finished) pump_send(conn->bench);
    /* A closing end (close_notify sent) closes once its last write went out. */
    if (conn->closing == 0 && conn->writes == 0 && SSL_get_shutdown(conn->ssl) & SSL_SENT_SHUTDOWN) conn_close(conn);
}

/* Sends what OpenSSL queued in the write BIO. */
static void flush(tls_conn_t *conn, int data) {
    size_t pending = BIO_ctrl_pending(conn->wbio);
    if (pending == 0 || conn->closing) return;
    tls_write_t *write = malloc(sizeof(tls_write_t) + pending);
    int read = BIO_read(conn->wbio, write->bytes, (int)pending);
    write->conn = conn;
    write->data = data;
    uv_buf_t buf = uv_buf_init(write->bytes, (unsigned)(read > 0 ? read : 0));
    conn->writes++;
    if (uv_write(&write->request, (uv_stream_t *)&conn->tcp, &buf, 1, wrote) != 0) {
        conn->writes--;
        free(write);
    }
}

static void pump_send(tls_bench_t *bench) {
    if (bench->sent >= bench->total) return;
    tls_conn_t *client = bench->conns;
    size_t written = 0;
    if (SSL_write_ex(client->ssl, bench->payload, (size_t)bench->chunk, &written) != 1) {
        bench->failed = 1;
        return;
    }
    bench->sent += written;
    flush(client, 1);
}

static void send_close_notify(tls_conn_t *conn) {
    SSL_shutdown(conn->ssl);
    flush(conn, 0);
    if (conn->writes == 0) conn_close(conn);
}

static void connect_next(tls_bench_t *bench);

static void handshake_done(tls_conn_t *conn) {
    tls_bench_t *bench = conn->bench;
    conn->handshake_done = 1;
    if (conn->server) bench->server_done++;
    else bench->client_done++;
    switch (bench->mode) {
    case MODE_PUMP:
        if (!conn->server) {
            bench->started = uv_hrtime();
            for (int i = 0; i < bench->in_flight; i++) pump_send(bench);
        }
        break;
    case MODE_HANDSHAKES:
        if (!conn->server) {
            if (SSL_get_negotiated_group(conn->ssl) == NID_X25519) bench->x25519++;
            send_close_notify(conn);
            connect_next(bench);
        } else if (bench->server_done == bench->target) {
            bench->finished = uv_hrtime();
        }
        break;
    case MODE_IDLE:
        if (bench->server_done == bench->target && bench->client_done == bench->target) uv_stop(&bench->loop);
        else if (!conn->server) connect_next(bench);
        break;
    }
}

static void fail(tls_conn_t *conn) {
    conn->bench->failed = 1;
    ERR_clear_error();
    conn_close(conn);
}

static void advance_handshake(tls_conn_t *conn) {
    ERR_clear_error();
    int result = SSL_do_handshake(conn->ssl);
    flush(conn, 0);
    if (result == 1) {
        handshake_done(conn);
    } else if (SSL_get_error(conn->ssl, result) != SSL_ERROR_WANT_READ) {
        fail(conn);
    }
}

static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf) {
    (void)suggested;
    tls_conn_t *conn = handle->data;
    buf->base = conn->bench->cipher;
    buf->len = 65536;
}

static void on_plaintext(tls_conn_t *conn, size_t count) {
    tls_bench_t *bench = conn->bench;
    bench->received += count;
    if (bench->mode == MODE_PUMP && bench->received >= bench->total && !bench->finished) {
        bench->finished = uv_hrtime();
        conn_close(conn);
        conn_close(bench->conns);
        uv_close((uv_handle_t *)&bench->listener, NULL);
    }
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
    tls_conn_t *conn = stream->data;
    if (nread < 0) {
        if (!conn->handshake_done) conn->bench->failed = 1;
        conn_close(conn);
        return;
    }
    if (nread == 0) return;
    BIO_write(conn->rbio, buf->base, (int)nread);
    if (!conn->handshake_done) {
        advance_handshake(conn);
        if (!conn->handshake_done || conn->closing) return;
    }
    for (;;) {
        size_t count = 0;
        ERR_clear_error();
        int result = SSL_read_ex(conn->ssl, conn->bench->plain, 65536, &count);
        if (result == 1) {
            on_plaintext(conn, count);
            if (conn->closing) return;
            continue;
        }
        int error = SSL_get_error(conn->ssl, result);
        flush(conn, 0);
        if (error == SSL_ERROR_ZERO_RETURN) send_close_notify(conn);
        else if (error != SSL_ERROR_WANT_READ) fail(conn);
        return;
    }
}

static tls_conn_t *conn_new(tls_bench_t *bench, int server) {
    tls_conn_t *conn = calloc(1, sizeof(tls_conn_t));
    conn->bench = bench;
    conn->server = server;
    conn->ssl = SSL_new(server ? bench->server_ctx : bench->client_ctx);
    conn->rbio = BIO_new(BIO_s_mem());
    conn->wbio = BIO_new(BIO_s_mem());
    BIO_set_mem_eof_return(conn->rbio, -1);
    BIO_set_mem_eof_return(conn->wbio, -1);
    SSL_set_bio(conn->ssl, conn->rbio, conn->wbio);
    if (server) {
        SSL_set_accept_state(conn->ssl);
    } else {
        SSL_set_connect_state(conn->ssl);
        SSL_set_verify(conn->ssl, SSL_VERIFY_PEER, NULL);
        SSL_set_tlsext_host_name(conn->ssl, "localhost");
        SSL_set1_host(conn->ssl, "localhost");
    }
    uv_tcp_init(&bench->loop, &conn->tcp);
    conn->tcp.data = conn;
    bench->open_conns++;
    return conn;
}

static void on_connect(uv_connect_t *request, int status) {
    tls_conn_t *conn = request->data;
    free(request);
    if (status < 0) {
        fail(conn);
        return;
    }
    uv_tcp_nodelay(&conn->tcp, 1);
    uv_read_start((uv_stream_t *)&conn->tcp, on_alloc, on_read);
    advance_handshake(conn);
}

static void connect_next(tls_bench_t *bench) {
    if (bench->opened >= bench->target) return;
    bench->opened++;
    tls_conn_t *conn = conn_new(bench, 0);
    if (bench->mode != MODE_HANDSHAKES) {
        conn->next = bench->conns;
        bench->conns = conn;
    }
    uv_connect_t *request = malloc(sizeof(uv_connect_t));
    request->data = conn;
    uv_tcp_connect(request, &conn->tcp, (const struct sockaddr *)&bench->address, on_connect);
}

static void on_accept(uv_stream_t *listener, int status) {
    tls_bench_t *bench = listener->data;
    if (status < 0) return;
    tls_conn_t *conn = conn_new(bench, 1);
    if (uv_accept(listener, (uv_stream_t *)&conn->tcp) != 0) {
        conn_close(conn);
        return;
    }
    if (bench->mode == MODE_IDLE) {
        conn->next = bench->conns;
        bench->conns = conn;
    }
    uv_tcp_nodelay(&conn->tcp, 1);
    uv_read_start((uv_stream_t *)&conn->tcp, on_alloc, on_read);
}

static tls_bench_t *bench_new(int mode, const char *cert, const char *key) {
    signal(SIGPIPE, SIG_IGN); /* a write to a peer that closed is an error, not a death */
    tls_bench_t *bench = calloc(1, sizeof(tls_bench_t));
    bench->mode = mode;
    bench->server_ctx = tls_context(1, cert, key);
    bench->client_ctx = tls_context(0, cert, key);
    bench->plain = malloc(65536);
    bench->cipher = malloc(65536);
    uv_loop_init(&bench->loop);
    uv_tcp_init(&bench->loop, &bench->listener);
    bench->listener.data = bench;
    struct sockaddr_in address;
    uv_ip4_addr("127.0.0.1", 0, &address);
    uv_tcp_bind(&bench->listener, (const struct sockaddr *)&address, 0);
    uv_listen((uv_stream_t *)&bench->listener, 1024, on_accept);
    int length = sizeof(bench->address);
    uv_tcp_getsockname(&bench->listener, (struct sockaddr *)&bench->address, &length);
    if (!bench->server_ctx || !bench->client_ctx) bench->failed = 1;
    return bench;
}

static void bench_free(tls_bench_t *bench) {
    if (!bench->listener_closed && !uv_is_closing((uv_handle_t *)&bench->listener)) uv_close((uv_handle_t *)&bench->listener, NULL);
    uv_run(&bench->loop, UV_RUN_DEFAULT);
    uv_loop_close(&bench->loop);
    SSL_CTX_free(bench->server_ctx);
    SSL_CTX_free(bench->client_ctx);
    free(bench->plain);
    free(bench->cipher);
    free(bench->payload);
    free(bench);
}

uint64_t rawc_tls_pump(const char *cert, const char *key, uint64_t total, int chunk, int in_flight) {
    tls_bench_t *bench = bench_new(MODE_PUMP, cert, key);
    bench->total = total;
    bench->chunk = chunk;
    bench->in_flight = in_flight;
    bench->payload = malloc((size_t)chunk);
    memset(bench->payload, 'p', (size_t)chunk);
    bench->target = 1;
    if (!bench->failed) {
        connect_next(bench);
        uv_run(&bench->loop, UV_RUN_DEFAULT);
    }
    uint64_t elapsed = bench->failed || !bench->finished ? 0 : bench->finished - bench->started;
    bench->listener_closed = 1;
    bench_free(bench);
    return elapsed;
}

uint64_t rawc_tls_handshakes(const char *cert, const char *key, int count, int in_flight, int *x25519) {
    tls_bench_t *bench = bench_new(MODE_HANDSHAKES, cert, key);
    bench->target = count;
    uint64_t started = uv_hrtime();
    if (!bench->failed) {
        for (int i = 0; i < in_flight; i++) connect_next(bench);
        uv_run(&bench->loop, UV_RUN_DEFAULT);
    }
    uint64_t elapsed = bench->failed || bench->server_done < count ? 0 : bench->finished - started;
    *x25519 = bench->x25519;
    bench->listener_closed = 1;
    bench_free(bench);
    return elapsed;
}

int64_t rawc_heap_in_use(void) {
    struct mallinfo2 info = mallinfo2();
    return (int64_t)(info.uordblks + info.hblkhd);
}

int64_t rawc_tls_idle(const char *cert, const char *key, int count, int in_flight, int64_t *heap_before, int64_t *heap_after) {
    tls_bench_t *bench = bench_new(MODE_IDLE, cert, key);
    bench->target = count;
    int64_t held = -1;
    if (!bench->failed) {
        *heap_before = rawc_heap_in_use();
        for (int i = 0; i < in_flight; i++) connect_next(bench);
        uv_run(&bench->loop, UV_RUN_DEFAULT);
        /* Let the last records (session tickets) be read before measuring. */
        for (int i = 0; i < 10; i++) uv_run(&bench->loop, UV_RUN_NOWAIT);
        *heap_after = rawc_heap_in_use();
        held = bench->server_done;
    }
    for (tls_conn_t *conn = bench->conns, *next; conn; conn = next) {
        next = conn->next;
        conn_close(conn);
    }
    if (bench->failed) held = -1;
    bench_free(bench);
    return held;
}

int rawc_raise_descriptor_hard_limit(int wanted) {
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return -1;
    if (limit.rlim_max < (rlim_t)wanted) {
        struct rlimit raised = { (rlim_t)wanted, (rlim_t)wanted };
        /* Allowed to root (CAP_SYS_RESOURCE); otherwise the soft limit goes up to the hard one. */
        if (setrlimit(RLIMIT_NOFILE, &raised) == 0) return wanted;
    }
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
    return getrlimit(RLIMIT_NOFILE, &limit) == 0 ? (int)limit.rlim_cur : -1;
}
