#ifndef WINBACK_CCURL_SHIM_H
#define WINBACK_CCURL_SHIM_H
#include <curl/curl.h>

// curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot call: one typed
// wrapper per kind of argument (Sources/WinBackS3/HTTP.swift).

/// A write or header callback: `size * nmemb` bytes at `ptr`.
typedef size_t (*winback_curl_data_callback)(char *ptr, size_t size, size_t nmemb, void *userdata);

/// A progress callback: non-zero aborts the transfer (CURLE_ABORTED_BY_CALLBACK).
typedef int (*winback_curl_xferinfo_callback)(
    void *clientp, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow);

static inline CURLcode winback_curl_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode winback_curl_setopt_ptr(CURL *handle, CURLoption option, const void *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode winback_curl_setopt_off(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

/// The body's bytes go to `callback` with `userdata`.
static inline CURLcode winback_curl_setopt_write(CURL *handle, winback_curl_data_callback callback, void *userdata) {
    CURLcode c = curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, callback);
    return c != CURLE_OK ? c : curl_easy_setopt(handle, CURLOPT_WRITEDATA, userdata);
}

/// Each header line (the status line first) goes to `callback` with `userdata`.
static inline CURLcode winback_curl_setopt_header(CURL *handle, winback_curl_data_callback callback, void *userdata) {
    CURLcode c = curl_easy_setopt(handle, CURLOPT_HEADERFUNCTION, callback);
    return c != CURLE_OK ? c : curl_easy_setopt(handle, CURLOPT_HEADERDATA, userdata);
}

/// `callback` is called with `userdata` as bytes move, and about once a second when none do.
static inline CURLcode winback_curl_setopt_xferinfo(
    CURL *handle, winback_curl_xferinfo_callback callback, void *userdata) {
    CURLcode c = curl_easy_setopt(handle, CURLOPT_XFERINFOFUNCTION, callback);
    if (c == CURLE_OK) c = curl_easy_setopt(handle, CURLOPT_XFERINFODATA, userdata);
    return c != CURLE_OK ? c : curl_easy_setopt(handle, CURLOPT_NOPROGRESS, 0L);
}

static inline CURLcode winback_curl_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}
#endif
