/* OTLP/HTTP sender: moves finished request bodies (ExportTraceServiceRequest, protobuf) to a
 * collector with POST URL/v1/traces, Content-Type application/x-protobuf, gzip-encoded.
 *
 * libcurl does the HTTP. It is loaded with dlopen("libcurl.so.4") when a sender opens, never at
 * load time: libcuptrace.so is injected into every traced program and must not need it.
 *
 * One sender thread per sender owns the libcurl handles and does everything slow: gzip, the
 * POST, retries with exponential backoff on connection errors, timeouts, 429, 502, 503 and 504.
 * send() only queues a body. The queue is bounded in bytes: when it is full a body is dropped
 * and its spans counted (or, with opts.block, send() waits for room: for `cuptrace convert`,
 * where nothing else waits on it). After a request has failed all its retries the collector is
 * taken to be down: later bodies are dropped without a try until a single probe request, sent
 * after a growing pause, succeeds. close() sends what is queued, bounded by opts.timeout_ms; the
 * rest is dropped and counted.
 *
 * Threading: open, send, stats and close are called by one thread (the writer); the sender
 * thread is private. */
#ifndef CUPTRACE_OUTPUT_OTLP_HTTP_H
#define CUPTRACE_OUTPUT_OTLP_HTTP_H

#include <stddef.h>
#include <stdint.h>

struct cuptrace_otlp_http_opts {
	size_t sz;              /* sizeof(struct cuptrace_otlp_http_opts) */
	int block;              /* 1: send() waits for room in the queue instead of dropping */
	size_t queue_bytes;     /* bodies waiting to be sent, at most (default 16 MiB) */
	int timeout_ms;         /* close(): the final flush takes at most this (default 5000) */
	int request_timeout_ms; /* one POST (default 10000) */
	int max_retries;        /* retries of one request (default 4; -1: none) */
	int backoff_ms;         /* first retry after this; doubled each time (default 250) */
	int no_gzip;            /* 1: send bodies uncompressed */
};

/* What happened to the spans handed over, for the summary. */
struct cuptrace_otlp_stats {
	uint64_t spans;           /* spans made (filled by the sink) */
	uint64_t spans_sent;      /* in requests the collector accepted (less those it rejected) */
	uint64_t spans_dropped;   /* queue full, collector down or slow, rejected, out of time */
	uint64_t requests;        /* POST attempts */
	uint64_t requests_failed; /* attempts without a 2xx answer */
	uint64_t retries;         /* attempts that repeated a failed one */
	uint64_t bytes_sent;      /* request bodies as sent (compressed), accepted ones */
};

struct cuptrace_otlp_http;

/* Starts a sender for url (http:// or https://; "/v1/traces" is appended unless the path
 * already ends with it). Returns NULL with errno set and one message logged when the URL is
 * bad (EINVAL), libcurl cannot be loaded (ENOENT) or the thread cannot start. */
struct cuptrace_otlp_http *cuptrace_otlp_http_open(const char *url,
                                                   const struct cuptrace_otlp_http_opts *opts);
/* The URL requests to url go to (malloc'd), or NULL if url is not an http(s) URL. */
char *cuptrace_otlp_http_full_url(const char *url);
/* Can libcurl be loaded? 0, or -ENOENT with the reason in why. */
int cuptrace_otlp_http_available(char *why, size_t n);
/* Queues body (len bytes, nspans spans; malloc'd, owned by the sender from here on, also on
 * failure). Returns 0, or -ENOBUFS when it was dropped (counted). */
int cuptrace_otlp_http_send(struct cuptrace_otlp_http *h, uint8_t *body, size_t len, size_t nspans);
/* Counts spans the caller dropped before sending (so one summary tells all). */
void cuptrace_otlp_http_count_dropped(struct cuptrace_otlp_http *h, uint64_t nspans);
/* A snapshot of the counts (stats->spans is left alone). */
void cuptrace_otlp_http_stats(struct cuptrace_otlp_http *h, struct cuptrace_otlp_stats *st);
/* The full URL requests go to. */
const char *cuptrace_otlp_http_url(const struct cuptrace_otlp_http *h);
/* Sends what is queued within opts.timeout_ms, stops the thread, fills st (if not NULL; spans
 * left alone) and frees. NULL is fine. */
void cuptrace_otlp_http_close(struct cuptrace_otlp_http *h, struct cuptrace_otlp_stats *st);

#endif
