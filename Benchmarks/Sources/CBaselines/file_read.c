#include "baselines.h"

#include <fcntl.h>
#include <stdlib.h>
#include <uv.h>

/* File read: open `path`, read it with sequential `chunk`-byte uv_fs_read requests
 * (one in flight, the next started from the callback, into one reused buffer) until
 * a read returns 0, close. What a C program on libuv does to stream a file. */
typedef struct {
    uv_loop_t loop;
    uv_fs_t request;
    uv_buf_t buffer;
    uv_file file;
    int64_t offset;
    uint64_t total;
    int failed;
} file_reader_t;

static void on_read(uv_fs_t *request);

static void read_next(file_reader_t *reader) {
    if (uv_fs_read(&reader->loop, &reader->request, reader->file, &reader->buffer, 1, reader->offset, on_read) != 0)
        reader->failed = 1;
}

static void on_read(uv_fs_t *request) {
    file_reader_t *reader = request->data;
    ssize_t result = request->result;
    uv_fs_req_cleanup(request);
    if (result < 0) {
        reader->failed = 1;
        return;
    }
    if (result == 0) return;
    reader->offset += result;
    reader->total += (uint64_t)result;
    read_next(reader);
}

static void on_open(uv_fs_t *request) {
    file_reader_t *reader = request->data;
    ssize_t result = request->result;
    uv_fs_req_cleanup(request);
    if (result < 0) {
        reader->failed = 1;
        return;
    }
    reader->file = (uv_file)result;
    read_next(reader);
}

uint64_t rawc_file_read(const char *path, int chunk, uint64_t *bytes) {
    file_reader_t reader = {0};
    *bytes = 0;
    if (chunk <= 0 || uv_loop_init(&reader.loop) != 0) return 0;
    char *memory = malloc((size_t)chunk);
    if (memory == NULL) return 0;
    reader.buffer = uv_buf_init(memory, (unsigned int)chunk);
    reader.request.data = &reader;
    reader.file = -1;
    uint64_t begin = uv_hrtime();
    if (uv_fs_open(&reader.loop, &reader.request, path, O_RDONLY, 0, on_open) != 0) reader.failed = 1;
    uv_run(&reader.loop, UV_RUN_DEFAULT);
    if (reader.file >= 0) {
        uv_fs_t close_request;
        uv_fs_close(NULL, &close_request, reader.file, NULL);
        uv_fs_req_cleanup(&close_request);
    }
    uint64_t elapsed = uv_hrtime() - begin;
    uv_loop_close(&reader.loop);
    free(memory);
    *bytes = reader.total;
    return reader.failed ? 0 : elapsed;
}
