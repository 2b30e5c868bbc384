#ifndef WINBACK_CCURL_SHIM_H
#define WINBACK_CCURL_SHIM_H
#include <curl/curl.h>
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>

// libcurl is loaded with dlopen when a run first speaks to S3 (Sources/WinBackS3/HTTP.swift),
// not linked: a run that reads local files never maps libcurl nor the libraries it needs
// (TLS, Kerberos, LDAP, SSH: some forty, 5 MB resident). Only the header is needed to build.
//
// curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot call: one typed
// wrapper per kind of argument.

/// The entry points of libcurl this program uses.
typedef struct winback_curl_api {
    CURLcode (*global_init)(long flags);
    CURL *(*easy_init)(void);
    void (*easy_cleanup)(CURL *handle);
    void (*easy_reset)(CURL *handle);
    CURLcode (*easy_perform)(CURL *handle);
    const char *(*easy_strerror)(CURLcode code);
    CURLcode (*easy_setopt)(CURL *handle, CURLoption option, ...);
    CURLcode (*easy_getinfo)(CURL *handle, CURLINFO info, ...);
    struct curl_slist *(*slist_append)(struct curl_slist *list, const char *line);
    void (*slist_free_all)(struct curl_slist *list);
} winback_curl_api;

/// Loads libcurl (libcurl.so.4, else libcurl.so) and finds every entry point: 1 when all are
/// there; otherwise 0 with why in `why` (`size` bytes, NUL-terminated). Call once: the caller
/// keeps the answer.
static inline int winback_curl_load(winback_curl_api *api, char *why, size_t size) {
    void *lib = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        // Why the versioned name failed: the unversioned one is only there with the -dev package.
        const char *e = dlerror();
        snprintf(why, size, "%s", e ? e : "libcurl.so.4 not found");
        lib = dlopen("libcurl.so", RTLD_NOW | RTLD_LOCAL);
        if (!lib) return 0;
    }
#define WINBACK_CURL_FIND(field, symbol)                                                      \
    *(void **)(&api->field) = dlsym(lib, symbol);                                              \
    if (!api->field) {                                                                         \
        snprintf(why, size, "libcurl has no %s", symbol);                                      \
        return 0;                                                                              \
    }
    WINBACK_CURL_FIND(global_init, "curl_global_init")
    WINBACK_CURL_FIND(easy_init, "curl_easy_init")
    WINBACK_CURL_FIND(easy_cleanup, "curl_easy_cleanup")
    WINBACK_CURL_FIND(easy_reset, "curl_easy_reset")
    WINBACK_CURL_FIND(easy_perform, "curl_easy_perform")
    WINBACK_CURL_FIND(easy_strerror, "curl_easy_strerror")
    WINBACK_CURL_FIND(easy_setopt, "curl_easy_setopt")
    WINBACK_CURL_FIND(easy_getinfo, "curl_easy_getinfo")
    WINBACK_CURL_FIND(slist_append, "curl_slist_append")
    WINBACK_CURL_FIND(slist_free_all, "curl_slist_free_all")
#undef WINBACK_CURL_FIND
    return 1;
}

/// A write or header callback: `size * nmemb` bytes at `ptr`.
typedef size_t (*winback_curl_data_callback)(char *ptr, size_t size, size_t nmemb, void *userdata);

/// A progress callback: non-zero aborts the transfer (CURLE_ABORTED_BY_CALLBACK).
typedef int (*winback_curl_xferinfo_callback)(
    void *clientp, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow);

static inline CURLcode winback_curl_setopt_long(
    const winback_curl_api *api, CURL *handle, CURLoption option, long value) {
    return api->easy_setopt(handle, option, value);
}

static inline CURLcode winback_curl_setopt_ptr(
    const winback_curl_api *api, CURL *handle, CURLoption option, const void *value) {
    return api->easy_setopt(handle, option, value);
}

static inline CURLcode winback_curl_setopt_off(
    const winback_curl_api *api, CURL *handle, CURLoption option, curl_off_t value) {
    return api->easy_setopt(handle, option, value);
}

/// The body's bytes go to `callback` with `userdata`.
static inline CURLcode winback_curl_setopt_write(
    const winback_curl_api *api, CURL *handle, winback_curl_data_callback callback, void *userdata) {
    CURLcode c = api->easy_setopt(handle, CURLOPT_WRITEFUNCTION, callback);
    return c != CURLE_OK ? c : api->easy_setopt(handle, CURLOPT_WRITEDATA, userdata);
}

/// Each header line (the status line first) goes to `callback` with `userdata`.
static inline CURLcode winback_curl_setopt_header(
    const winback_curl_api *api, CURL *handle, winback_curl_data_callback callback, void *userdata) {
    CURLcode c = api->easy_setopt(handle, CURLOPT_HEADERFUNCTION, callback);
    return c != CURLE_OK ? c : api->easy_setopt(handle, CURLOPT_HEADERDATA, userdata);
}

/// `callback` is called with `userdata` as bytes move, and about once a second when none do.
static inline CURLcode winback_curl_setopt_xferinfo(
    const winback_curl_api *api, CURL *handle, winback_curl_xferinfo_callback callback, void *userdata) {
    CURLcode c = api->easy_setopt(handle, CURLOPT_XFERINFOFUNCTION, callback);
    if (c == CURLE_OK) c = api->easy_setopt(handle, CURLOPT_XFERINFODATA, userdata);
    return c != CURLE_OK ? c : api->easy_setopt(handle, CURLOPT_NOPROGRESS, 0L);
}

static inline CURLcode winback_curl_getinfo_long(
    const winback_curl_api *api, CURL *handle, CURLINFO info, long *value) {
    return api->easy_getinfo(handle, info, value);
}
#endif
