#ifndef WINBACK_CSYSTEM_SHIM_H
#define WINBACK_CSYSTEM_SHIM_H

// Allocator settings of the C library, where it has them (glibc).
#if defined(__linux__)
#include <features.h>
#endif

#if defined(__GLIBC__)
#include <malloc.h>
static inline int winback_set_mmap_threshold(int bytes) { return mallopt(M_MMAP_THRESHOLD, bytes); }
#else
static inline int winback_set_mmap_threshold(int bytes) { (void)bytes; return 0; }
#endif

// A hint to fetch the cache line at `p` before it is read (hash-table probes of a batch).
static inline void winback_prefetch(const void *p) {
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(p, 0, 3);
#else
    (void)p;
#endif
}

#endif
