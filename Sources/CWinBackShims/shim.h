#ifndef WINBACK_SHIMS_H
#define WINBACK_SHIMS_H

// Allocator settings of the C library, where it has them (glibc).
#if defined(__linux__)
#include <features.h>
#endif

#if defined(__GLIBC__)
#include <malloc.h>
static inline int winback_set_mmap_threshold(int bytes) { return mallopt(M_MMAP_THRESHOLD, bytes); }
// Hands the free pages of every heap back to the system.
static inline void winback_trim_heap(void) { (void)malloc_trim(0); }
#else
static inline int winback_set_mmap_threshold(int bytes) { (void)bytes; return 0; }
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
static inline void winback_special_bits(const uint8_t *p, size_t n, uint64_t *out) {
    size_t w = 0;
    for (; (w + 1) * 64 <= n; w++) out[w] = winback_special_word(p + w * 64);
    if (w * 64 < n) {
        uint8_t tail[64];
        memset(tail, ' ', sizeof tail);  // not special
        memcpy(tail, p + w * 64, n - w * 64);
        out[w] = winback_special_word(tail);
    }
}


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
