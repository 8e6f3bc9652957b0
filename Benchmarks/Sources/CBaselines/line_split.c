#include "baselines.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The hand-written splitter `lines()` is measured against: memchr for each LF,
 * a line that straddles two chunks carried as a length, nothing copied. */
uint64_t rawc_split_lines(const uint8_t *chunks, int chunk_kinds, size_t chunk_size, int64_t chunk_count,
                          uint64_t *lines, uint64_t *line_bytes) {
    uint64_t count = 0, bytes = 0, carried = 0;
    struct timespec begin, end;
    clock_gettime(CLOCK_MONOTONIC, &begin);
    for (int64_t index = 0; index < chunk_count; index++) {
        const uint8_t *chunk = chunks + (size_t)(index % chunk_kinds) * chunk_size;
        const uint8_t *position = chunk, *limit = chunk + chunk_size;
        const uint8_t *newline;
        while ((newline = memchr(position, '\n', (size_t)(limit - position))) != NULL) {
            size_t length = (size_t)(newline - position) + carried;
            if (length > 0 && newline > chunk && newline[-1] == '\r') length--;  /* CRLF, as lines() */
            bytes += length;
            count++;
            carried = 0;
            position = newline + 1;
        }
        carried += (uint64_t)(limit - position);
    }
    if (carried > 0) {
        bytes += carried;
        count++;
    }
    clock_gettime(CLOCK_MONOTONIC, &end);
    *lines = count;
    *line_bytes = bytes;
    return (uint64_t)(end.tv_sec - begin.tv_sec) * 1000000000u + (uint64_t)(end.tv_nsec - begin.tv_nsec);
}

/* What the owned-copy splitter hands each line to: counts it and frees it. Called through a
 * volatile pointer so the compiler can neither inline it nor drop the malloc/free pair. */
static void take_line(uint8_t *line, size_t length, uint64_t *count, uint64_t *bytes) {
    *count += 1;
    *bytes += length;
    free(line);
}
static void (*volatile line_consumer)(uint8_t *, size_t, uint64_t *, uint64_t *) = take_line;

/* The same splitter handing out each line as an owned copy, as `lines()` does: malloc of the
 * line's exact size, memcpy, the line handed to a consumer that frees it. A line that straddles
 * chunks is carried in a growing buffer and joined with the next chunk's head. */
uint64_t rawc_split_lines_owned(const uint8_t *chunks, int chunk_kinds, size_t chunk_size, int64_t chunk_count,
                                uint64_t *lines, uint64_t *line_bytes) {
    uint64_t count = 0, bytes = 0;
    size_t carried = 0, carry_capacity = 4096;
    uint8_t *carry = malloc(carry_capacity);
    struct timespec begin, end;
    clock_gettime(CLOCK_MONOTONIC, &begin);
    for (int64_t index = 0; index < chunk_count; index++) {
        const uint8_t *chunk = chunks + (size_t)(index % chunk_kinds) * chunk_size;
        const uint8_t *position = chunk, *limit = chunk + chunk_size;
        const uint8_t *newline;
        while ((newline = memchr(position, '\n', (size_t)(limit - position))) != NULL) {
            size_t here = (size_t)(newline - position);
            if (here > 0 && newline[-1] == '\r') here--;  /* CRLF, as lines() */
            size_t length = carried + here;
            uint8_t *line = malloc(length > 0 ? length : 1);
            if (carried > 0) memcpy(line, carry, carried);
            memcpy(line + carried, position, here);
            line_consumer(line, length, &count, &bytes);
            carried = 0;
            position = newline + 1;
        }
        size_t rest = (size_t)(limit - position);
        if (carried + rest > carry_capacity) {
            while (carried + rest > carry_capacity) carry_capacity *= 2;
            carry = realloc(carry, carry_capacity);
        }
        memcpy(carry + carried, position, rest);
        carried += rest;
    }
    if (carried > 0) {
        uint8_t *line = malloc(carried);
        memcpy(line, carry, carried);
        line_consumer(line, carried, &count, &bytes);
    }
    clock_gettime(CLOCK_MONOTONIC, &end);
    free(carry);
    *lines = count;
    *line_bytes = bytes;
    return (uint64_t)(end.tv_sec - begin.tv_sec) * 1000000000u + (uint64_t)(end.tv_nsec - begin.tv_nsec);
}
