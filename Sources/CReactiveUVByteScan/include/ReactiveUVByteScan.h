#ifndef REACTIVEUV_BYTE_SCAN_H
#define REACTIVEUV_BYTE_SCAN_H

// Where one byte value occurs in a buffer, many offsets per call: how `lines()` and
// `split(separator:)` find their separators (`SingleByteCut` in DelimiterSplitter.swift); and the
// copy of a short line into the storage it reuses (`Array.init(framed:reusing:)` in Framing.swift).
//
// Why not `memchr` once per separator: for a short line, memchr's call and setup cost as much
// as its search. Here the bytes are compared 64 at a time into a bit mask (AVX2 when the CPU has
// it, else SSE2, baseline on x86-64; a portable loop elsewhere) and the mask's set bits written
// out as offsets, so one call finds dozens of separators. Swift's SIMD types have no equivalent
// of `pmovmskb`, hence C.

#include <stdint.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#if __has_feature(nullability)
#pragma clang assume_nonnull begin
#endif

/// The room `reactiveuv_find_byte` needs in `found`: a whole block's offsets.
#define REACTIVEUV_FIND_BYTE_BLOCK 64
/// The most bytes one call of `reactiveuv_find_byte` searches: its offsets fit an `int32_t`.
#define REACTIVEUV_FIND_BYTE_SPAN (1L << 30)

/// Writes the offsets (from `from`) of every `byte` in `bytes[from..<count]`, in order, to
/// `found`, which has room for `capacity` of them (at least `REACTIVEUV_FIND_BYTE_BLOCK`), and
/// returns how many it wrote. It searches 64 bytes at a time (two blocks at a time while there is
/// room for their offsets) and stops at `count`, after `REACTIVEUV_FIND_BYTE_SPAN` bytes, or
/// before a block once fewer than `REACTIVEUV_FIND_BYTE_BLOCK` slots are left; `*scanned` is then
/// where it stopped: every `byte` before it was written. Reads nothing outside `bytes[from..<count]`
/// but for the last block of a buffer of 64 bytes or more, which may begin before `from` (never
/// before `bytes`).
///
/// Requires 0 <= `from` <= `count`. Thread rule: any thread (no state but the CPU check, made once).
long reactiveuv_find_byte(const uint8_t *bytes, long from, long count, uint8_t byte,
                          int32_t *found, long capacity, long *scanned);

/// Copies `count` bytes (0 or more) from `source` to `destination`, which do not overlap: up to 128
/// bytes inline with SSE2 (the first and the last 16, 32 or 64 bytes, overlapping in the middle),
/// more with `memcpy`. What `lines()` copies each line with: for a short line the call to
/// `memcpy`, its arguments and its size dispatch cost more than the copy itself.
static inline __attribute__((always_inline)) void reactiveuv_copy_bytes(uint8_t *destination, const uint8_t *source, long count) {
#if defined(__SSE2__)
#define REACTIVEUV_LOAD(offset) _mm_loadu_si128((const __m128i *)(const void *)(source + (offset)))
#define REACTIVEUV_STORE(offset, value) _mm_storeu_si128((__m128i *)(void *)(destination + (offset)), (value))
    if (count > 64) {
        if (__builtin_expect(count > 128, 0)) {
            memcpy(destination, source, (size_t)count);
            return;
        }
        const __m128i a = REACTIVEUV_LOAD(0), b = REACTIVEUV_LOAD(16), c = REACTIVEUV_LOAD(32), d = REACTIVEUV_LOAD(48);
        const __m128i e = REACTIVEUV_LOAD(count - 64), f = REACTIVEUV_LOAD(count - 48);
        const __m128i g = REACTIVEUV_LOAD(count - 32), h = REACTIVEUV_LOAD(count - 16);
        REACTIVEUV_STORE(0, a); REACTIVEUV_STORE(16, b); REACTIVEUV_STORE(32, c); REACTIVEUV_STORE(48, d);
        REACTIVEUV_STORE(count - 64, e); REACTIVEUV_STORE(count - 48, f);
        REACTIVEUV_STORE(count - 32, g); REACTIVEUV_STORE(count - 16, h);
        return;
    }
    if (count > 32) {
        const __m128i a = REACTIVEUV_LOAD(0), b = REACTIVEUV_LOAD(16);
        const __m128i c = REACTIVEUV_LOAD(count - 32), d = REACTIVEUV_LOAD(count - 16);
        REACTIVEUV_STORE(0, a); REACTIVEUV_STORE(16, b); REACTIVEUV_STORE(count - 32, c); REACTIVEUV_STORE(count - 16, d);
        return;
    }
    if (count > 16) {
        const __m128i a = REACTIVEUV_LOAD(0), b = REACTIVEUV_LOAD(count - 16);
        REACTIVEUV_STORE(0, a); REACTIVEUV_STORE(count - 16, b);
        return;
    }
#undef REACTIVEUV_LOAD
#undef REACTIVEUV_STORE
    if (count >= 8) {
        uint64_t a, b;
        memcpy(&a, source, 8);
        memcpy(&b, source + count - 8, 8);
        memcpy(destination, &a, 8);
        memcpy(destination + count - 8, &b, 8);
    } else if (count >= 4) {
        uint32_t a, b;
        memcpy(&a, source, 4);
        memcpy(&b, source + count - 4, 4);
        memcpy(destination, &a, 4);
        memcpy(destination + count - 4, &b, 4);
    } else if (count > 0) {
        destination[0] = source[0];
        destination[count / 2] = source[count / 2];
        destination[count - 1] = source[count - 1];
    }
#else
    if (count > 0) memcpy(destination, source, (size_t)count);
#endif
}

/// `reactiveuv_find_byte` by one way, for tests: 0 the one chosen for this CPU, 1 the portable
/// loop, 2 SSE2, 3 AVX2; -1 when this machine has no such way.
long reactiveuv_find_byte_using(int implementation, const uint8_t *bytes, long from, long count, uint8_t byte,
                                int32_t *found, long capacity, long *scanned);

#if __has_feature(nullability)
#pragma clang assume_nonnull end
#endif

#endif
