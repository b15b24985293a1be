#ifndef IAPGW_CCURL_SHIM_H
#define IAPGW_CCURL_SHIM_H
#include <curl/curl.h>
// curl_easy_setopt and curl_easy_getinfo are variadic: Swift calls these typed wrappers instead.
static inline CURLcode iapgw_curl_setopt_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode iapgw_curl_setopt_ptr(CURL *h, CURLoption o, const void *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode iapgw_curl_setopt_write(CURL *h, CURLoption o, size_t (*f)(char *, size_t, size_t, void *)) { return curl_easy_setopt(h, o, f); }
static inline CURLcode iapgw_curl_getinfo_long(CURL *h, CURLINFO i, long *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode iapgw_curl_getinfo_double(CURL *h, CURLINFO i, double *v) { return curl_easy_getinfo(h, i, v); }
// UpstreamHTTP: the multi interface (one event thread, shared connection cache) and compound macros.
static inline CURLMcode iapgw_curl_multi_setopt_long(CURLM *m, CURLMoption o, long v) { return curl_multi_setopt(m, o, v); }
static inline CURLcode iapgw_curl_global_init_default(void) { return curl_global_init(CURL_GLOBAL_DEFAULT); }
static inline CURLcode iapgw_curl_msg_result(const CURLMsg *m) { return m->data.result; }
#endif
