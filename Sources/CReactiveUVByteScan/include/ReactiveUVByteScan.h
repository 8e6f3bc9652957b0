#ifndef REACTIVEUV_BYTE_SCAN_H
#define REACTIVEUV_BYTE_SCAN_H

// Where one byte value occurs in a buffer, many offsets per call: how `lines()` and
// `split(separator:)` find their separators (`SingleByteCut` in DelimiterSplitter.swift).
//
// Why not `memchr` once per separator: for an 80-byte line, memchr's call and setup cost as much
// as its search. Here the bytes are compared 64 at a time into a bit mask (AVX2 when the CPU has
// it, else SSE2, baseline on x86-64; a portable loop elsewhere) and the mask's set bits written
// out as offsets, so one call finds dozens of separators. Swift's SIMD types have no equivalent
// of `pmovmskb`, hence C.

#include <stdint.h>

#if __has_feature(nullability)
#pragma clang assume_nonnull begin
#endif

/// The room `reactiveuv_find_byte` needs in `found`: a whole block's offsets.
#define REACTIVEUV_FIND_BYTE_BLOCK 64

/// Writes the offsets (from `bytes`) of every `byte` in `bytes[from..<count]`, in order, to
/// `found`, which has room for `capacity` of them (at least `REACTIVEUV_FIND_BYTE_BLOCK`), and
/// returns how many it wrote. It scans 64 bytes at a time and stops at `count`, or before a block
/// once fewer than `REACTIVEUV_FIND_BYTE_BLOCK` slots are left; `*scanned` is then where it
/// stopped: every `byte` before it was written. Reads nothing outside `bytes[from..<count]` but
/// for the last block of a buffer of 64 bytes or more, which may begin before `from` (never before
/// `bytes`).
///
/// Requires 0 <= `from` <= `count`. Thread rule: any thread (no state but the CPU check, made once).
long reactiveuv_find_byte(const uint8_t *bytes, long from, long count, uint8_t byte,
                          long *found, long capacity, long *scanned);

/// `reactiveuv_find_byte` by one way, for tests: 0 the one chosen for this CPU, 1 the portable
/// loop, 2 SSE2, 3 AVX2; -1 when this machine has no such way.
long reactiveuv_find_byte_using(int implementation, const uint8_t *bytes, long from, long count, uint8_t byte,
                                long *found, long capacity, long *scanned);

#if __has_feature(nullability)
#pragma clang assume_nonnull end
#endif

#endif
