#include "ReactiveUVByteScan.h"

#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

// Writes the offsets of the bits set in `mask` (bit `i`: offset `base + i`, from `from`) to `out`, moved on.
#define REACTIVEUV_WRITE_OFFSETS(mask, base)                                                        \
    while ((mask) != 0) {                                                                         \
        *out++ = (base) + (int32_t)__builtin_ctzll(mask);                                         \
        (mask) &= (mask) - 1;                                                                     \
    }

// The search loop, around `MASK64(pointer)`: the mask of `byte` in the 64 bytes at `pointer`.
// Two blocks at a time while 128 bytes are left and `found` has room for their offsets (out of
// room, it returns); then one block, and the last fewer bytes, scanned as the buffer's last 64
// (their bits before `at` shifted out: those bytes were scanned already), or, in a buffer under
// 64 bytes, copied into a block of zeros first (their bits past `rest` masked off: the zeros are
// no bytes of the buffer). `at` counts from `from`, as the offsets written, so both fit an `int32_t`.
#define REACTIVEUV_FIND_LOOP(MASK64)                                                               \
    if (count - from > REACTIVEUV_FIND_BYTE_SPAN) count = from + REACTIVEUV_FIND_BYTE_SPAN;       \
    const uint8_t *const start = bytes + from;                                                    \
    const int32_t span = (int32_t)(count - from);                                                 \
    int32_t *out = found;                                                                         \
    int32_t *const last_out = found + (capacity - REACTIVEUV_FIND_BYTE_BLOCK);                    \
    int32_t at = 0;                                                                               \
    if (capacity >= 2 * REACTIVEUV_FIND_BYTE_BLOCK) {                                             \
        int32_t *const last_pair_out = found + (capacity - 2 * REACTIVEUV_FIND_BYTE_BLOCK);       \
        while (at <= span - 128 && out <= last_pair_out) {                                        \
            uint64_t low = MASK64(start + at);                                                    \
            uint64_t high = MASK64(start + at + 64);                                              \
            REACTIVEUV_WRITE_OFFSETS(low, at)                                                     \
            REACTIVEUV_WRITE_OFFSETS(high, at + 64)                                               \
            at += 128;                                                                            \
        }                                                                                         \
        if (at <= span - 128) { /* out of room: the caller takes these first */                   \
            *scanned = from + at;                                                                 \
            return out - found;                                                                   \
        }                                                                                         \
    }                                                                                             \
    while (at <= span - 64 && out <= last_out) {                                                  \
        uint64_t mask = MASK64(start + at);                                                       \
        REACTIVEUV_WRITE_OFFSETS(mask, at)                                                        \
        at += 64;                                                                                 \
    }                                                                                             \
    if (at < span && out <= last_out) {                                                           \
        const int32_t rest = span - at;                                                           \
        uint64_t mask;                                                                            \
        if (count >= 64) {                                                                        \
            mask = MASK64(bytes + count - 64) >> (64 - rest);                                     \
        } else {                                                                                  \
            uint8_t block[64];                                                                    \
            memset(block, 0, sizeof block);                                                       \
            memcpy(block, start + at, (size_t)rest);                                              \
            mask = MASK64(block) & ((UINT64_C(1) << rest) - 1);                                   \
        }                                                                                         \
        REACTIVEUV_WRITE_OFFSETS(mask, at)                                                        \
        at = span;                                                                                \
    }                                                                                             \
    *scanned = from + at;                                                                         \
    return out - found;

/// Bit `i` is set when `pointer[i] == byte`, for the 64 bytes at `pointer`: the portable way.
static inline uint64_t portable_mask64(const uint8_t *pointer, uint8_t byte) {
    uint64_t mask = 0;
    for (int index = 0; index < 64; index++) {
        mask |= (uint64_t)(pointer[index] == byte) << index;
    }
    return mask;
}

static long find_byte_portable(const uint8_t *bytes, long from, long count, uint8_t byte,
                               int32_t *found, long capacity, long *scanned) {
#define MASK64_PORTABLE(pointer) portable_mask64((pointer), byte)
    REACTIVEUV_FIND_LOOP(MASK64_PORTABLE)
#undef MASK64_PORTABLE
}

#if defined(__x86_64__)

__attribute__((target("avx2,bmi"))) static long find_byte_avx2(const uint8_t *bytes, long from, long count, uint8_t byte,
                                                           int32_t *found, long capacity, long *scanned) {
    const __m256i needle = _mm256_set1_epi8((char)byte);
#define MASK64_AVX2(pointer)                                                                              \
    ((uint64_t)(uint32_t)_mm256_movemask_epi8(                                                            \
         _mm256_cmpeq_epi8(_mm256_loadu_si256((const __m256i *)(const void *)(pointer)), needle)) |       \
     ((uint64_t)(uint32_t)_mm256_movemask_epi8(                                                           \
          _mm256_cmpeq_epi8(_mm256_loadu_si256((const __m256i *)(const void *)((pointer) + 32)), needle)) \
      << 32))
    REACTIVEUV_FIND_LOOP(MASK64_AVX2)
#undef MASK64_AVX2
}

static long find_byte_sse2(const uint8_t *bytes, long from, long count, uint8_t byte,
                           int32_t *found, long capacity, long *scanned) {
    const __m128i needle = _mm_set1_epi8((char)byte);
#define MASK16_SSE2(pointer) \
    ((uint64_t)(uint16_t)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)(pointer)), needle)))
#define MASK64_SSE2(pointer)                                                                  \
    (MASK16_SSE2(pointer) | (MASK16_SSE2((pointer) + 16) << 16) | (MASK16_SSE2((pointer) + 32) << 32) | \
     (MASK16_SSE2((pointer) + 48) << 48))
    REACTIVEUV_FIND_LOOP(MASK64_SSE2)
#undef MASK64_SSE2
#undef MASK16_SSE2
}

/// Whether the CPU has AVX2 (and BMI1, for `blsr`) and the OS saves the YMM registers (CPUID and XGETBV).
static int has_avx2(void) {
    unsigned int eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return 0;
    const unsigned int osxsave = 1u << 27, avx = 1u << 28;
    if ((ecx & (osxsave | avx)) != (osxsave | avx)) return 0;
    unsigned int xcr0_low, xcr0_high;
    __asm__("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
    if ((xcr0_low & 0x6) != 0x6) return 0;  // XMM and YMM state
    if (__get_cpuid_max(0, 0) < 7) return 0;
    __cpuid_count(7, 0, eax, ebx, ecx, edx);
    const unsigned int avx2 = 1u << 5, bmi1 = 1u << 3;
    return (ebx & (avx2 | bmi1)) == (avx2 | bmi1);
}

typedef long (*find_byte_function)(const uint8_t *, long, long, uint8_t, int32_t *, long, long *);

/// The search this CPU runs, chosen on the first call. Every thread that races to choose stores
/// the same function, and relaxed atomic loads and stores make that race well defined.
static find_byte_function chosen_find_byte = 0;

long reactiveuv_find_byte(const uint8_t *bytes, long from, long count, uint8_t byte,
                          int32_t *found, long capacity, long *scanned) {
    find_byte_function function = __atomic_load_n(&chosen_find_byte, __ATOMIC_RELAXED);
    if (__builtin_expect(function == 0, 0)) {
        function = has_avx2() ? find_byte_avx2 : find_byte_sse2;
        __atomic_store_n(&chosen_find_byte, function, __ATOMIC_RELAXED);
    }
    return function(bytes, from, count, byte, found, capacity, scanned);
}

long reactiveuv_find_byte_using(int implementation, const uint8_t *bytes, long from, long count, uint8_t byte,
                                int32_t *found, long capacity, long *scanned) {
    switch (implementation) {
    case 0: return reactiveuv_find_byte(bytes, from, count, byte, found, capacity, scanned);
    case 1: return find_byte_portable(bytes, from, count, byte, found, capacity, scanned);
    case 2: return find_byte_sse2(bytes, from, count, byte, found, capacity, scanned);
    case 3: return has_avx2() ? find_byte_avx2(bytes, from, count, byte, found, capacity, scanned) : -1;
    default: return -1;
    }
}

#else

long reactiveuv_find_byte(const uint8_t *bytes, long from, long count, uint8_t byte,
                          int32_t *found, long capacity, long *scanned) {
    return find_byte_portable(bytes, from, count, byte, found, capacity, scanned);
}

long reactiveuv_find_byte_using(int implementation, const uint8_t *bytes, long from, long count, uint8_t byte,
                                int32_t *found, long capacity, long *scanned) {
    switch (implementation) {
    case 0: return reactiveuv_find_byte(bytes, from, count, byte, found, capacity, scanned);
    case 1: return find_byte_portable(bytes, from, count, byte, found, capacity, scanned);
    default: return -1;
    }
}

#endif
