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

#endif
