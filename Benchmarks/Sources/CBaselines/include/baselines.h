#ifndef REACTIVEUV_BASELINES_H
#define REACTIVEUV_BASELINES_H

#include <stddef.h>
#include <stdint.h>

/* Raw libuv C baselines: the physical limit for a runtime on libuv. Each runs
 * the same workload as the Swift scenario of the same name. Times are in
 * nanoseconds of uv_hrtime(). */

/* A foreign thread posts `count` items (function + argument, no allocation) to a
 * loop thread through one uv_async_t and a mutex-guarded array swapped out per
 * wake-up. Returns the time from the first post until the last item ran. */
uint64_t rawc_execute_throughput(int count, uint64_t *wakeups);
/* The same, but each item also takes a reference on the counter when posted and drops it
 * after it ran (atomically), as a Swift closure capturing an object does. */
uint64_t rawc_execute_throughput_refcounted(int count, uint64_t *wakeups, int refcounted);

/* `count` round trips: the calling thread posts one item, the loop signals a
 * condition variable, the caller waits for it. Fills latencies[count] (ns). */
void rawc_execute_pingpong(int count, uint64_t *latencies);

/* Two threads and a condition variable, no loop: the floor for a round trip. */
void rawc_condvar_pingpong(int count, uint64_t *latencies);

/* libuv's million_timers: `count` one-shot timers, timeout 1 + i/1000 ms
 * (cyclic: i % 1000 ms), started on the loop thread before uv_run. */
typedef struct {
    uint64_t start_ns;      /* initializing and starting every timer */
    uint64_t run_ns;        /* from the start of scheduling until the last timer fired */
    uint64_t close_ns;      /* closing every timer */
    uint64_t longest_ms;    /* the longest timeout */
    uint64_t due_base_ns;   /* from the start of scheduling back to the loop time timeouts count from */
    uint64_t group_first_ns;/* from the start of scheduling until the first timer of the last group fired */
    int group_size;         /* timers with the longest timeout (the last group) */
} rawc_timers_result;
void rawc_million_timers(int count, int cyclic, rawc_timers_result *result);

/* libuv's loop_count: an idle handle counting `ticks` loop iterations. Returns ns. */
uint64_t rawc_loop_count(int ticks);

/* A run queue drained from an idle callback, each item enqueuing the next, `count`
 * items: the C limit for a chain of loop-thread work. Returns ns. */
uint64_t rawc_local_chain(int count);

/* TCP echo ping-pong on loopback: one connection, one `message_size`-byte message
 * in flight. Server and client run on two loop threads, pinned to CPUs
 * `server_cpu` and `client_cpu` (-1: not pinned). Counts round trips during
 * `measure_ms` after `warmup_ms`. Fills latencies (ns, up to `capacity`). */
typedef struct {
    uint64_t round_trips;
    uint64_t elapsed_ns;
    uint64_t recorded;     /* latencies written */
} rawc_echo_result;
int rawc_tcp_echo(int message_size, int warmup_ms, int measure_ms, int server_cpu, int client_cpu,
                  uint64_t *latencies, uint64_t capacity, rawc_echo_result *result);

/* The same ping-pong over a Unix-domain socket bound at `path` (uv_pipe_t; the
 * caller removes the file after). */
int rawc_unix_echo(const char *path, int message_size, int warmup_ms, int measure_ms, int server_cpu, int client_cpu,
                   uint64_t *latencies, uint64_t capacity, rawc_echo_result *result);

/* TCP pump on loopback: one connection, `in_flight` writes of `chunk` bytes
 * outstanding, TCP_NODELAY, until `total` bytes reached the server. Returns ns
 * from the first write until the server read the last byte (0 on failure). */
uint64_t rawc_tcp_pump(uint64_t total, int chunk, int in_flight);

/* The same pump over a Unix-domain socket bound at `path` (uv_pipe_t; the
 * caller removes the file after). */
uint64_t rawc_unix_pump(const char *path, uint64_t total, int chunk, int in_flight);

/* File-watch latency: a loop thread watches `directory` with uv_fs_event; the
 * caller writes one byte to `file` (inside it) and waits until the event was
 * delivered, `count` times. Fills latencies (ns). Returns 0 on success. */
int rawc_fs_event_latency(const char *directory, const char *file, int count, uint64_t *latencies);

/* Line splitting: `chunk_count` chunks of `chunk_size` bytes (chunk i is the (i % chunk_kinds)th of
 * `chunk_kinds` chunks laid end to end at `chunks`),
 * cut at each LF with memchr (a CR before it not counted), lines and their bytes counted, nothing
 * copied; a final line without LF counts. Returns ns. */
uint64_t rawc_split_lines(const uint8_t *chunks, int chunk_kinds, size_t chunk_size, int64_t chunk_count,
                          uint64_t *lines, uint64_t *line_bytes);

/* The same cut, each line handed out as an owned copy (malloc of its size, memcpy, then a consumer
 * called through a function pointer counts and frees it), as `lines()` hands out a [UInt8]. Returns ns. */
uint64_t rawc_split_lines_owned(const uint8_t *chunks, int chunk_kinds, size_t chunk_size, int64_t chunk_count,
                                uint64_t *lines, uint64_t *line_bytes);
/* Spawn rate: starts `file` (stdio ignored), waits for its exit and closes the handle,
 * `count` times one after another on a fresh loop. Returns ns (0 on failure). */
uint64_t rawc_spawn_rate(const char *file, int count);

/* Reads `path` with sequential `chunk`-byte uv_fs_read requests to its end; returns the
 * nanoseconds from the open to the close (0 on failure) and the bytes read in `bytes`. */
uint64_t rawc_file_read(const char *path, int chunk, uint64_t *bytes);

/* stat throughput: `count` uv_fs_stat calls on `path`, `inflight` at a time, on a fresh loop.
 * Returns ns (0 on failure). */
uint64_t rawc_fs_stat(const char *path, int count, int inflight);

/* Lists `path` with uv_fs_opendir/uv_fs_readdir, `batch` entries per readdir, then closedir; sets
 * `entries` to how many came. Returns ns (0 on failure). */
uint64_t rawc_fs_list(const char *path, int batch, uint64_t *entries);

/* The loop thread's CPU time (ns) during the last rawc_fs_stat or rawc_fs_list run. */
uint64_t rawc_fs_loop_cpu(void);

/* Starts libuv's thread pool (one no-op uv_queue_work on a private loop, run to its end) as
 * ReactiveUV starts it: mode 0 as libuv does, 1 with SCHED_BATCH on the calling thread around that
 * submission (the pool's threads inherit it; SCHED_OTHER again after), 2 with each thread the
 * submission made set to nice 5. Does nothing to a pool already started. 0 or a negative errno. */
int rawc_start_pool(int mode);

/* The scheduling policy a pool thread runs under (read by a work callback), or a negative errno. */
int rawc_pool_thread_policy(void);

/* The nice value of a pool thread (read by a work callback), or a negative errno below -20. */
int rawc_pool_thread_nice(void);

/* libuv's uv_available_parallelism(): the CPUs this process may run on (ReactiveUV's rule for its pool). */
unsigned rawc_available_parallelism(void);

/* "SCHED_OTHER", "SCHED_BATCH", ... for a policy number ("unknown" otherwise). */
const char *rawc_policy_name(int policy);

/* Pins the calling thread to `cpu`, or lets it run on every CPU when `cpu` < 0. */
void rawc_pin_current_thread(int cpu);

/* Scaling: FNV-1a (32-bit) over `count` bytes, `rounds` passes (the hash carries over):
 * the work each server does per 4 KiB request. */
uint32_t rawc_scaling_hash(const uint8_t *bytes, int count, int rounds);

/* The scaling scenario's client: one libuv loop on the calling thread, `connections`
 * connections to 127.0.0.1:`port`, each keeping `depth` 4096-byte requests in flight and
 * sending one more per 4-byte reply (the hash, compared with the expected one). Counts the
 * replies during `measure_ms` after `warmup_ms`, and the client thread's CPU time then. */
typedef struct {
    uint64_t replies;
    uint64_t elapsed_ns;
    uint64_t client_cpu_ns;
    uint64_t process_cpu_ns;   /* every thread of this process (an in-process server's and the client's) */
    uint64_t mismatches;
} rawc_scaling_result;
int rawc_scaling_client(int port, int connections, int depth, int rounds, int warmup_ms, int measure_ms,
                        rawc_scaling_result *result);

/* Connection churn (libuv's tcp4_pound shape): `in_flight` connections at a time, each
 * connects, sends 64 bytes, reads 64 back and closes, then the next starts. One loop on
 * the calling thread. Counts completed connections during `measure_ms` after `warmup_ms`.
 * With `server_pid` > 0 (a server in a process of its own) it also reads that process's CPU
 * time (/proc, clock ticks) at the start and end of the measured window. */
typedef struct {
    uint64_t connections;
    uint64_t elapsed_ns;
    uint64_t client_cpu_ns;
    uint64_t process_cpu_ns;   /* every thread of this process (an in-process server's and the client's) */
    uint64_t failures;
    int64_t server_cpu_ns;     /* the server process's CPU time in the window; -1 when not measured */
    int64_t server_user_ns;    /* the user-space part of it */
} rawc_churn_result;
int rawc_churn_client(int port, int in_flight, int warmup_ms, int measure_ms, int server_pid, rawc_churn_result *result);

/* The raw C echo server of the churn and idle scenarios (libuv's echo-server shape: a
 * malloc'd uv_tcp_t per connection, a malloc'd buffer per read, echoed and freed, the
 * connection closed at EOF) on 127.0.0.1, ephemeral port, on the default loop of the
 * calling thread; calls `on_listening` with the port, then runs forever. Returns a libuv
 * error when it cannot listen. */
int rawc_echo_serve(int backlog, void (*on_listening)(int port));

/* The idle client: opens `count` blocking TCP connections to 127.0.0.1:`port` and sends
 * nothing. Fills descriptors; returns how many opened (or -errno if none). */
int rawc_idle_open(int port, int count, int *descriptors);
void rawc_idle_close(const int *descriptors, int count);

/* Another process, read from /proc: its CPU time (user + system, ns, in clock ticks),
 * resident memory (bytes), open descriptors. -1 when unreadable. */
int64_t rawc_process_cpu_ns(int pid);
int64_t rawc_process_user_ns(int pid); /* user time only */
int64_t rawc_process_rss_bytes(int pid);
int rawc_process_descriptor_count(int pid);

/* Raises this process's soft RLIMIT_NOFILE towards `wanted` (at most the hard limit); returns
 * the soft limit now in force (children started afterwards inherit it), -1 on failure. */
int rawc_raise_descriptor_limit(int wanted);

/* TLS on one loop over loopback, OpenSSL (the system's) between memory BIOs per connection;
 * `cert` is a PEM certificate for "localhost" (also the client's only trust root), `key` its key.
 * Pump: the client keeps `in_flight` SSL_writes of `chunk` bytes outstanding until the server
 * decrypted `total`; returns ns from the client's handshake end until then (0 on failure). */
uint64_t rawc_tls_pump(const char *cert, const char *key, uint64_t total, int chunk, int in_flight);
/* `count` connections, `in_flight` at a time, each closed (close_notify) once its handshake finished;
 * returns ns until the server finished the last handshake (0 on failure); `x25519` counts the
 * handshakes that agreed on X25519. */
uint64_t rawc_tls_handshakes(const char *cert, const char *key, int count, int in_flight, int *x25519);
/* Live heap (glibc's mallinfo2: in use in every arena plus mmapped blocks), in bytes. */
int64_t rawc_heap_in_use(void);
/* Opens `count` connections (`in_flight` handshakes at a time) and reads the heap before the
 * first and once both ends of every one finished the handshake and sat idle; returns the
 * connections held, -1 on failure. Closes them all before returning. */
/* Raises RLIMIT_NOFILE to `wanted`, the hard limit too when allowed (root); returns the soft limit now in force. */
int rawc_raise_descriptor_hard_limit(int wanted);
int64_t rawc_tls_idle(const char *cert, const char *key, int count, int in_flight, int64_t *heap_before, int64_t *heap_after);

#endif
