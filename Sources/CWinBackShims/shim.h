#ifndef WINBACK_SHIMS_H
#define WINBACK_SHIMS_H

// Allocator settings of the C library, where it has them (glibc).
#if defined(__linux__)
#include <features.h>
#endif

#if defined(__GLIBC__)
#include <malloc.h>
static inline int winback_set_mmap_threshold(int bytes) { return mallopt(M_MMAP_THRESHOLD, bytes); }
static inline int winback_set_trim_threshold(int bytes) { return mallopt(M_TRIM_THRESHOLD, bytes); }
// Hands the free pages of every heap back to the system.
static inline void winback_trim_heap(void) { (void)malloc_trim(0); }
#else
static inline int winback_set_mmap_threshold(int bytes) { (void)bytes; return 0; }
static inline int winback_set_trim_threshold(int bytes) { (void)bytes; return 0; }
static inline void winback_trim_heap(void) {}
#endif

// A hint to fetch the cache line at `p` before it is read (hash-table probes of a batch).
static inline void winback_prefetch(const void *p) {
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(p, 0, 3);
#else
    (void)p;
#endif
}

// JSON string scanning: bit i of out[i / 64] is set when byte i of p[0..<n] ends the plain
// part of a string: '"', '\\', a control character (< 0x20) or a byte >= 0x80. out holds
// (n + 63) / 64 words; bits past n are 0. Sixteen bytes per step where SSE2 exists (every
// x86-64), one at a time elsewhere.
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
static inline uint64_t winback_special_word(const uint8_t *p) {
    const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'), space = _mm_set1_epi8(0x20);
    uint64_t bits = 0;
    for (int k = 0; k < 4; k++) {
        __m128i c = _mm_loadu_si128((const __m128i *)(p + 16 * k));
        // Signed: bytes >= 0x80 are negative, so one comparison finds them and the controls.
        __m128i m = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(c, quote), _mm_cmpeq_epi8(c, backslash)),
                                 _mm_cmplt_epi8(c, space));
        bits |= (uint64_t)(uint32_t)_mm_movemask_epi8(m) << (16 * k);
    }
    return bits;
}
#else
static inline uint64_t winback_special_word(const uint8_t *p) {
    uint64_t bits = 0;
    for (int k = 0; k < 64; k++) {
        uint8_t c = p[k];
        if (c == '"' || c == '\\' || c < 0x20 || c >= 0x80) bits |= (uint64_t)1 << k;
    }
    return bits;
}
#endif
// The last `rest` (< 64) bytes of a line in `tail`, padded with spaces (not special).
static inline const uint8_t *winback_padded_tail(const uint8_t *p, size_t rest, uint8_t tail[64]) {
    memset(tail, ' ', 64);
    memcpy(tail, p, rest);
    return tail;
}
static inline void winback_special_bits(const uint8_t *p, size_t n, uint64_t *out) {
    uint8_t tail[64];
    size_t w = 0;
    for (; (w + 1) * 64 <= n; w++) out[w] = winback_special_word(p + w * 64);
    if (w * 64 < n) out[w] = winback_special_word(winback_padded_tail(p + w * 64, n - w * 64, tail));
}

// The same bits 32 bytes per step with AVX2, where the processor has it and the system saves
// its registers: winback_cpu_has_avx2() says so (CPUID, then XGETBV), once per process; the
// caller picks with winback_special_bits_with. Elsewhere (not x86-64) that is always 0 and
// the SSE2 or byte loop runs.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
static inline int winback_cpu_has_avx2(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    if (!(c & bit_OSXSAVE) || !(c & bit_AVX)) return 0;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & 6) != 6) return 0;  // the system saves XMM and YMM state
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    return (b & bit_AVX2) != 0;
}
__attribute__((target("avx2"))) static inline uint64_t winback_special_word_avx2(const uint8_t *p) {
    const __m256i quote = _mm256_set1_epi8('"'), backslash = _mm256_set1_epi8('\\'), space = _mm256_set1_epi8(0x20);
    __m256i c0 = _mm256_loadu_si256((const __m256i *)p), c1 = _mm256_loadu_si256((const __m256i *)(p + 32));
    // Signed, as above: space > c holds for the controls and for bytes >= 0x80.
    __m256i m0 = _mm256_or_si256(_mm256_or_si256(_mm256_cmpeq_epi8(c0, quote), _mm256_cmpeq_epi8(c0, backslash)),
                                 _mm256_cmpgt_epi8(space, c0));
    __m256i m1 = _mm256_or_si256(_mm256_or_si256(_mm256_cmpeq_epi8(c1, quote), _mm256_cmpeq_epi8(c1, backslash)),
                                 _mm256_cmpgt_epi8(space, c1));
    return (uint64_t)(uint32_t)_mm256_movemask_epi8(m0) | (uint64_t)(uint32_t)_mm256_movemask_epi8(m1) << 32;
}
__attribute__((target("avx2"))) static inline void winback_special_bits_avx2(const uint8_t *p, size_t n,
                                                                           uint64_t *out) {
    uint8_t tail[64];
    size_t w = 0;
    for (; (w + 1) * 64 <= n; w++) out[w] = winback_special_word_avx2(p + w * 64);
    if (w * 64 < n) out[w] = winback_special_word_avx2(winback_padded_tail(p + w * 64, n - w * 64, tail));
}
static inline void winback_special_bits_with(const uint8_t *p, size_t n, uint64_t *out, int avx2) {
    if (avx2) winback_special_bits_avx2(p, n, out); else winback_special_bits(p, n, out);
}
#else
static inline int winback_cpu_has_avx2(void) { return 0; }
static inline void winback_special_bits_with(const uint8_t *p, size_t n, uint64_t *out, int avx2) {
    (void)avx2;
    winback_special_bits(p, n, out);
}
#endif


// Swaps two paths in one step (renameat2 with RENAME_EXCHANGE, Linux 3.15+); -1 with errno
// ENOSYS where the system lacks it.
#include <errno.h>
#include <fcntl.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
static inline int winback_rename_exchange(const char *a, const char *b) {
#if defined(__linux__) && defined(SYS_renameat2)
    return (int)syscall(SYS_renameat2, AT_FDCWD, a, AT_FDCWD, b, 1 << 1);
#else
    (void)a; (void)b;
    errno = ENOSYS;
    return -1;
#endif
}

#endif
