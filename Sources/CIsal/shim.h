#ifndef WINBACK_CISAL_SHIM_H
#define WINBACK_CISAL_SHIM_H

// ISA-L's igzip inflater, when the machine has it: optional at build time (its header,
// from libisal-dev) and at run time (libisal.so.2, loaded with dlopen). Without either,
// winback_isal_load() returns 0 and the reader stays with zlib.

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__has_include)
#if __has_include(<isa-l/igzip_lib.h>) && __has_include(<dlfcn.h>)
#define WINBACK_HAVE_ISAL_HEADER 1
#endif
#endif

/// What one inflate step gave.
enum {
    WINBACK_ISAL_OK = 0,         // progress; the member goes on
    WINBACK_ISAL_MEMBER_END = 1, // a gzip member ended, its CRC checked
    WINBACK_ISAL_BAD_BLOCK = -1,
    WINBACK_ISAL_BAD_SYMBOL = -2,
    WINBACK_ISAL_BAD_DISTANCE = -3,
    WINBACK_ISAL_BAD_HEADER = -4,
    WINBACK_ISAL_BAD_METHOD = -5,
    WINBACK_ISAL_BAD_CHECKSUM = -6,
    WINBACK_ISAL_OTHER = -7,
};

#ifdef WINBACK_HAVE_ISAL_HEADER
#include <dlfcn.h>
#include <isa-l/igzip_lib.h>

typedef struct winback_isal_api {
    void (*init)(struct inflate_state *);
    void (*reset)(struct inflate_state *);
    int (*inflate)(struct inflate_state *);
    /// CRC-32 as gzip and zlib take it (crc32_gzip_refl), or NULL when the library lacks it.
    uint32_t (*crc32)(uint32_t, const unsigned char *, uint64_t);
} winback_isal_api;

/// Loads libisal; 1 when it is usable. Call once (the caller keeps the answer).
static inline int winback_isal_load(winback_isal_api *api) {
    void *lib = dlopen("libisal.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!lib) lib = dlopen("libisal.so", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return 0;
    api->init = (void (*)(struct inflate_state *))dlsym(lib, "isal_inflate_init");
    api->reset = (void (*)(struct inflate_state *))dlsym(lib, "isal_inflate_reset");
    api->inflate = (int (*)(struct inflate_state *))dlsym(lib, "isal_inflate");
    api->crc32 = (uint32_t (*)(uint32_t, const unsigned char *, uint64_t))dlsym(lib, "crc32_gzip_refl");
    return api->init && api->reset && api->inflate;
}

/// The CRC-32 of `n` bytes at `p` into `*out` (zlib's `crc32(0, p, n)`); 0 when the library
/// has no such function.
static inline int winback_isal_crc32(const winback_isal_api *api, const uint8_t *p, uint64_t n, uint32_t *out) {
    if (!api->crc32) return 0;
    *out = api->crc32(0, p, n);
    return 1;
}

/// A new inflate state for gzip members (header parsed, CRC-32 checked), or NULL.
static inline void *winback_isal_new(const winback_isal_api *api) {
    struct inflate_state *s = (struct inflate_state *)malloc(sizeof(struct inflate_state));
    if (!s) return NULL;
    api->init(s);
    s->crc_flag = ISAL_GZIP;
    return s;
}

/// Starts the next gzip member.
static inline void winback_isal_reset(const winback_isal_api *api, void *state) {
    struct inflate_state *s = (struct inflate_state *)state;
    api->reset(s);
    s->crc_flag = ISAL_GZIP;
}

static inline void winback_isal_free(void *state) { free(state); }

/// One inflate step from `*in` (`*avail_in` bytes) into `*out` (`*avail_out` bytes); the four
/// are advanced. Returns a WINBACK_ISAL_ code.
static inline int winback_isal_inflate(
    const winback_isal_api *api, void *state, const uint8_t **in, uint32_t *avail_in, uint8_t **out,
    uint32_t *avail_out) {
    struct inflate_state *s = (struct inflate_state *)state;
    s->next_in = (uint8_t *)*in;
    s->avail_in = *avail_in;
    s->next_out = *out;
    s->avail_out = *avail_out;
    int rc = api->inflate(s);
    *in = s->next_in;
    *avail_in = s->avail_in;
    *out = s->next_out;
    *avail_out = s->avail_out;
    switch (rc) {
    case ISAL_DECOMP_OK:
    case ISAL_END_INPUT:
    case ISAL_OUT_OVERFLOW:
        return s->block_state == ISAL_BLOCK_FINISH ? WINBACK_ISAL_MEMBER_END : WINBACK_ISAL_OK;
    case ISAL_INVALID_BLOCK: return WINBACK_ISAL_BAD_BLOCK;
    case ISAL_INVALID_SYMBOL: return WINBACK_ISAL_BAD_SYMBOL;
    case ISAL_INVALID_LOOKBACK: return WINBACK_ISAL_BAD_DISTANCE;
    case ISAL_INVALID_WRAPPER: return WINBACK_ISAL_BAD_HEADER;
    case ISAL_UNSUPPORTED_METHOD: return WINBACK_ISAL_BAD_METHOD;
    case ISAL_INCORRECT_CHECKSUM: return WINBACK_ISAL_BAD_CHECKSUM;
    default: return WINBACK_ISAL_OTHER;
    }
}

#else

typedef struct winback_isal_api {
    void *unused;
} winback_isal_api;

static inline int winback_isal_load(winback_isal_api *api) {
    (void)api;
    return 0;
}
static inline void *winback_isal_new(const winback_isal_api *api) {
    (void)api;
    return NULL;
}
static inline void winback_isal_reset(const winback_isal_api *api, void *state) {
    (void)api;
    (void)state;
}
static inline void winback_isal_free(void *state) { (void)state; }
static inline int winback_isal_crc32(const winback_isal_api *api, const uint8_t *p, uint64_t n, uint32_t *out) {
    (void)api; (void)p; (void)n; (void)out;
    return 0;
}
static inline int winback_isal_inflate(
    const winback_isal_api *api, void *state, const uint8_t **in, uint32_t *avail_in, uint8_t **out,
    uint32_t *avail_out) {
    (void)api; (void)state; (void)in; (void)avail_in; (void)out; (void)avail_out;
    return WINBACK_ISAL_OTHER;
}

#endif

#endif
