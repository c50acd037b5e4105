/* The OTLP/HTTP sender (see otlp_http.h): a bounded queue of request bodies, one thread that
 * POSTs them through libcurl (loaded with dlopen), retries, and a bounded final flush. */
#define _GNU_SOURCE
#include "output/otlp_http.h"

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>
#include <zlib.h>
#include <sys/prctl.h>

#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"
#include "common/log.h"
#include "common/util.h"

#ifndef CUPTRACE_VERSION
#define CUPTRACE_VERSION "0.1.0"
#endif

#define DEF_QUEUE_BYTES (16u << 20)
#define DEF_TIMEOUT_MS  5000
#define DEF_REQUEST_MS  10000
#define DEF_RETRIES     4
#define DEF_BACKOFF_MS  250
#define MAX_BACKOFF_MS  8000
#define PROBE_MIN_MS    1000
#define PROBE_MAX_MS    30000
#define MAX_RESPONSE    (64u << 10)
#define POLL_SLICE_MS   50

/* The libcurl functions we use, looked up once. Never unloaded: another part of the program may
 * use libcurl too, and our threads may still be running code from it at exit. */
static struct {
	CURLcode (*global_init)(long);
	CURL *(*easy_init)(void);
	CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
	CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
	void (*easy_cleanup)(CURL *);
	const char *(*easy_strerror)(CURLcode);
	CURLM *(*multi_init)(void);
	CURLMcode (*multi_add_handle)(CURLM *, CURL *);
	CURLMcode (*multi_remove_handle)(CURLM *, CURL *);
	CURLMcode (*multi_perform)(CURLM *, int *);
	CURLMcode (*multi_poll)(CURLM *, struct curl_waitfd *, unsigned, int, int *);
	CURLMsg *(*multi_info_read)(CURLM *, int *);
	CURLMcode (*multi_cleanup)(CURLM *);
	struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
	void (*slist_free_all)(struct curl_slist *);
	int ok;
	char why[256];
} curl_fn;
static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void load_curl(void)
{
	/* CUPTRACE_OTLP_LIBCURL: another libcurl (tests use a missing one). */
	const char *name = getenv("CUPTRACE_OTLP_LIBCURL");
	void *h = dlopen(name && *name ? name : "libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();
		snprintf(curl_fn.why, sizeof(curl_fn.why), "%s", e ? e : "libcurl.so.4 not found");
		return;
	}
#define SYM(field, sym)                                                                            \
	do {                                                                                       \
		*(void **)&curl_fn.field = dlsym(h, sym);                                          \
		if (!curl_fn.field) {                                                              \
			snprintf(curl_fn.why, sizeof(curl_fn.why),                                 \
			         "%s lacks %s (libcurl 7.66 or newer needed)",                     \
			         name &&*name ? name : "libcurl.so.4", sym);                       \
			return;                                                                    \
		}                                                                                  \
	} while (0)
	SYM(global_init, "curl_global_init");
	SYM(easy_init, "curl_easy_init");
	SYM(easy_setopt, "curl_easy_setopt");
	SYM(easy_getinfo, "curl_easy_getinfo");
	SYM(easy_cleanup, "curl_easy_cleanup");
	SYM(easy_strerror, "curl_easy_strerror");
	SYM(multi_init, "curl_multi_init");
	SYM(multi_add_handle, "curl_multi_add_handle");
	SYM(multi_remove_handle, "curl_multi_remove_handle");
	SYM(multi_perform, "curl_multi_perform");
	SYM(multi_poll, "curl_multi_poll");
	SYM(multi_info_read, "curl_multi_info_read");
	SYM(multi_cleanup, "curl_multi_cleanup");
	SYM(slist_append, "curl_slist_append");
	SYM(slist_free_all, "curl_slist_free_all");
#undef SYM
	if (curl_fn.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		snprintf(curl_fn.why, sizeof(curl_fn.why), "curl_global_init failed");
		return;
	}
	curl_fn.ok = 1;
}

struct item {
	uint8_t *body;
	size_t len, nspans;
	struct item *next;
};

struct cuptrace_otlp_http {
	struct cuptrace_otlp_http_opts o;
	char *url;
	pthread_t thread;
	int have_thread;

	pthread_mutex_t lock;
	pthread_cond_t work, room; /* CLOCK_MONOTONIC */
	struct item *head, *tail;
	size_t queued_bytes;
	int closing;
	int64_t deadline; /* CLOCK_MONOTONIC ns once closing; the sender gives up after it */
	struct cuptrace_otlp_stats st;

	/* Sender thread only. */
	CURL *easy;
	CURLM *multi;
	struct curl_slist *hdr_gzip, *hdr_plain;
	uint8_t *resp;
	size_t resp_len;
	int down;         /* the last request failed all its tries */
	int64_t probe_at; /* while down: no try before this (CLOCK_MONOTONIC ns) */
	int probe_ms;     /* the pause before the next probe */
	int warned;       /* the outage was reported */
	char errbuf[CURL_ERROR_SIZE];
};

static int64_t now_ns(void)
{
	return cuptrace_now_ns(CLOCK_MONOTONIC);
}

/* ---- the queue ---- */

static void count_drop(struct cuptrace_otlp_http *h, size_t nspans)
{
	h->st.spans_dropped += nspans;
}

int cuptrace_otlp_http_send(struct cuptrace_otlp_http *h, uint8_t *body, size_t len, size_t nspans)
{
	struct item *it = malloc(sizeof(*it));
	pthread_mutex_lock(&h->lock);
	/* One body always fits in an empty queue, however large. */
	while (h->o.block && it && h->head && h->queued_bytes + len > h->o.queue_bytes &&
	       !h->closing)
		pthread_cond_wait(&h->room, &h->lock);
	if (!it || h->closing || (h->head && h->queued_bytes + len > h->o.queue_bytes)) {
		count_drop(h, nspans);
		pthread_mutex_unlock(&h->lock);
		free(it);
		free(body);
		return -ENOBUFS;
	}
	*it = (struct item){body, len, nspans, NULL};
	if (h->tail)
		h->tail->next = it;
	else
		h->head = it;
	h->tail = it;
	h->queued_bytes += len;
	pthread_cond_signal(&h->work);
	pthread_mutex_unlock(&h->lock);
	return 0;
}

void cuptrace_otlp_http_count_dropped(struct cuptrace_otlp_http *h, uint64_t nspans)
{
	pthread_mutex_lock(&h->lock);
	count_drop(h, nspans);
	pthread_mutex_unlock(&h->lock);
}

void cuptrace_otlp_http_stats(struct cuptrace_otlp_http *h, struct cuptrace_otlp_stats *st)
{
	pthread_mutex_lock(&h->lock);
	uint64_t spans = st->spans;
	*st = h->st;
	st->spans = spans;
	pthread_mutex_unlock(&h->lock);
}

const char *cuptrace_otlp_http_url(const struct cuptrace_otlp_http *h)
{
	return h->url;
}

/* ---- the sender thread ---- */

/* Waits until the absolute CLOCK_MONOTONIC time t or until close() moves the deadline; with the
 * lock held. */
static void wait_until(struct cuptrace_otlp_http *h, int64_t t)
{
	struct timespec ts = {.tv_sec = t / 1000000000, .tv_nsec = t % 1000000000};
	int closing = h->closing;
	while (now_ns() < t && h->closing == closing)
		if (pthread_cond_timedwait(&h->work, &h->lock, &ts) == ETIMEDOUT)
			break;
}

static size_t on_response(char *p, size_t size, size_t n, void *ctx)
{
	struct cuptrace_otlp_http *h = ctx;
	size_t len = size * n, room = MAX_RESPONSE - h->resp_len;
	memcpy(h->resp + h->resp_len, p, len < room ? len : room);
	h->resp_len += len < room ? len : room;
	return len;
}

/* gzip (RFC 1952) of body into a new malloc'd buffer, or NULL. */
static uint8_t *gzip(const uint8_t *body, size_t len, size_t *out_len)
{
	z_stream z;
	memset(&z, 0, sizeof(z));
	if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return NULL;
	uLong cap = deflateBound(&z, (uLong)len);
	uint8_t *out = malloc(cap);
	if (!out) {
		deflateEnd(&z);
		return NULL;
	}
	z.next_in = (Bytef *)body;
	z.avail_in = (uInt)len;
	z.next_out = out;
	z.avail_out = (uInt)cap;
	int r = deflate(&z, Z_FINISH);
	*out_len = z.total_out;
	deflateEnd(&z);
	if (r != Z_STREAM_END) {
		free(out);
		return NULL;
	}
	return out;
}

/* OUT_OF_TIME: no try was made; ABORTED: one was, and close()'s deadline cut it. */
enum outcome { SENT, RETRY, FAILED, ABORTED, OUT_OF_TIME };

/* One POST, bounded by the request timeout and the close deadline. Sets *status (0 when there
 * was no HTTP answer) and, for an answer, *rejected from a partial success. */
static enum outcome post(struct cuptrace_otlp_http *h, const uint8_t *body, size_t len, int gzipped,
                         long *status, int64_t *rejected)
{
	*status = 0;
	*rejected = 0;
	pthread_mutex_lock(&h->lock);
	int64_t deadline = h->closing ? h->deadline : 0;
	pthread_mutex_unlock(&h->lock);
	long timeout = h->o.request_timeout_ms;
	if (deadline) {
		int64_t left = (deadline - now_ns()) / 1000000;
		if (left <= 0)
			return OUT_OF_TIME;
		if (left < timeout)
			timeout = (long)left;
	}
	CURL *e = h->easy;
	h->resp_len = 0;
	h->errbuf[0] = 0;
	curl_fn.easy_setopt(e, CURLOPT_POSTFIELDS, (const char *)body);
	curl_fn.easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	curl_fn.easy_setopt(e, CURLOPT_HTTPHEADER, gzipped ? h->hdr_gzip : h->hdr_plain);
	curl_fn.easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout);
	curl_fn.easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, timeout < 3000 ? timeout : 3000L);
	if (curl_fn.multi_add_handle(h->multi, e) != CURLM_OK)
		return FAILED;
	int running = 1, aborted = 0;
	while (running) {
		if (curl_fn.multi_perform(h->multi, &running) != CURLM_OK)
			break;
		if (!running)
			break;
		/* close() may have set a deadline since the request began. */
		pthread_mutex_lock(&h->lock);
		deadline = h->closing ? h->deadline : 0;
		pthread_mutex_unlock(&h->lock);
		if (deadline && now_ns() >= deadline) {
			aborted = 1;
			break;
		}
		curl_fn.multi_poll(h->multi, NULL, 0, POLL_SLICE_MS, NULL);
	}
	CURLcode rc = CURLE_OK;
	int done = 0;
	CURLMsg *m;
	int left;
	while ((m = curl_fn.multi_info_read(h->multi, &left)))
		if (m->msg == CURLMSG_DONE && m->easy_handle == e) {
			rc = m->data.result;
			done = 1;
		}
	curl_fn.multi_remove_handle(h->multi, e);
	if (aborted) {
		snprintf(h->errbuf, sizeof(h->errbuf),
		         "no answer before the end of --otlp-timeout");
		return ABORTED;
	}
	if (!done)
		return RETRY;
	if (rc != CURLE_OK) {
		if (!h->errbuf[0])
			snprintf(h->errbuf, sizeof(h->errbuf), "%s", curl_fn.easy_strerror(rc));
		return RETRY; /* connection refused, reset, timed out: all worth another try */
	}
	curl_fn.easy_getinfo(e, CURLINFO_RESPONSE_CODE, status);
	if (*status >= 200 && *status < 300) {
		/* An ExportTraceServiceResponse may say some spans were rejected. */
		Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceResponse *r =
		    h->resp_len
		        ? opentelemetry__proto__collector__trace__v1__export_trace_service_response__unpack(
		              NULL, h->resp_len, h->resp)
		        : NULL;
		if (r && r->partial_success && r->partial_success->rejected_spans > 0)
			*rejected = r->partial_success->rejected_spans;
		if (r)
			opentelemetry__proto__collector__trace__v1__export_trace_service_response__free_unpacked(
			    r, NULL);
		return SENT;
	}
	snprintf(h->errbuf, sizeof(h->errbuf), "HTTP %ld", *status);
	return *status == 429 || *status == 502 || *status == 503 || *status == 504 ? RETRY
	                                                                            : FAILED;
}

/* Delivers one body: tries, retries, and the accounting. Lock not held. */
static void deliver(struct cuptrace_otlp_http *h, struct item *it)
{
	int64_t t = now_ns();
	if (h->down && t < h->probe_at) {
		pthread_mutex_lock(&h->lock);
		count_drop(h, it->nspans);
		pthread_mutex_unlock(&h->lock);
		return;
	}
	size_t zlen = 0;
	uint8_t *z = h->o.no_gzip ? NULL : gzip(it->body, it->len, &zlen);
	const uint8_t *body = z ? z : it->body;
	size_t len = z ? zlen : it->len;
	/* While the collector is down, one probe without retries. */
	int tries = h->down ? 1 : 1 + (h->o.max_retries > 0 ? h->o.max_retries : 0);
	int64_t backoff = (int64_t)h->o.backoff_ms * 1000000;
	enum outcome r = OUT_OF_TIME;
	long status = 0;
	int64_t rejected = 0;
	int made = 0;
	for (int k = 0; k < tries; k++) {
		enum outcome rk = post(h, body, len, z != NULL, &status, &rejected);
		made += rk != OUT_OF_TIME;
		if (rk == OUT_OF_TIME)
			break; /* keeps the last try's outcome */
		r = rk;
		pthread_mutex_lock(&h->lock);
		{
			h->st.requests++;
			h->st.retries += k > 0;
			h->st.requests_failed += r != SENT;
		}
		if (r == SENT) {
			uint64_t rej =
			    (uint64_t)rejected < it->nspans ? (uint64_t)rejected : it->nspans;
			h->st.spans_sent += it->nspans - rej;
			count_drop(h, rej);
			h->st.bytes_sent += len;
		}
		if (r != RETRY || k + 1 == tries) {
			pthread_mutex_unlock(&h->lock);
			break;
		}
		int64_t until = now_ns() + backoff;
		if (h->closing && until >= h->deadline) {
			pthread_mutex_unlock(&h->lock);
			break; /* no time for another try: failed as the last one did */
		}
		wait_until(h, until);
		pthread_mutex_unlock(&h->lock);
		if (backoff < (int64_t)MAX_BACKOFF_MS * 1000000)
			backoff *= 2;
	}
	free(z);
	if (r == SENT) {
		if (h->down || h->warned)
			cuptrace_info("OTLP: %s answers again", h->url);
		h->down = 0;
		h->warned = 0;
		h->probe_ms = PROBE_MIN_MS;
		return;
	}
	pthread_mutex_lock(&h->lock);
	count_drop(h, it->nspans);
	pthread_mutex_unlock(&h->lock);
	if (r == RETRY) {
		/* Down (or overloaded): drop without trying until the next probe. */
		h->down = 1;
		h->probe_at = now_ns() + (int64_t)h->probe_ms * 1000000;
		h->probe_ms = h->probe_ms * 2 < PROBE_MAX_MS ? h->probe_ms * 2 : PROBE_MAX_MS;
	}
	if (!h->warned && r != OUT_OF_TIME && r != ABORTED) {
		h->warned = 1;
		cuptrace_warn("OTLP: sending spans to %s failed (%s; %d %s); spans are dropped and "
		              "counted while it fails",
		              h->url, h->errbuf[0] ? h->errbuf : "no answer", made,
		              made == 1 ? "try" : "tries");
	}
}

static void *sender_main(void *arg)
{
	/* Named cuptrace-*: `top` counts the tracer's own CPU by these names. */
	prctl(PR_SET_NAME, "cuptrace-otlp", 0, 0, 0);
	struct cuptrace_otlp_http *h = arg;
	pthread_mutex_lock(&h->lock);
	for (;;) {
		while (!h->head && !h->closing)
			pthread_cond_wait(&h->work, &h->lock);
		struct item *it = h->head;
		if (!it)
			break; /* closing, and nothing left */
		h->head = it->next;
		if (!h->head)
			h->tail = NULL;
		h->queued_bytes -= it->len;
		pthread_cond_broadcast(&h->room);
		int late = h->closing && now_ns() >= h->deadline;
		if (late)
			count_drop(h, it->nspans);
		pthread_mutex_unlock(&h->lock);
		if (!late)
			deliver(h, it);
		free(it->body);
		free(it);
		pthread_mutex_lock(&h->lock);
	}
	pthread_mutex_unlock(&h->lock);
	return NULL;
}

/* ---- open / close ---- */

char *cuptrace_otlp_http_full_url(const char *url)
{
	size_t n = strlen(url);
	const char *rest = !strncasecmp(url, "http://", 7)    ? url + 7
	                   : !strncasecmp(url, "https://", 8) ? url + 8
	                                                      : NULL;
	if (!rest || !*rest || *rest == '/' || n > 4000)
		return NULL;
	for (const char *p = url; *p; p++)
		if (isspace((unsigned char)*p) || iscntrl((unsigned char)*p))
			return NULL;
	static const char suffix[] = "/v1/traces";
	if (cuptrace_ends_with(url, suffix))
		return strdup(url);
	while (url + n > rest && url[n - 1] == '/')
		n--;
	char *out = malloc(n + sizeof(suffix));
	if (out) {
		memcpy(out, url, n);
		memcpy(out + n, suffix, sizeof(suffix));
	}
	return out;
}

int cuptrace_otlp_http_available(char *why, size_t n)
{
	pthread_once(&curl_once, load_curl);
	if (!curl_fn.ok)
		snprintf(why, n, "%s", curl_fn.why);
	return curl_fn.ok ? 0 : -ENOENT;
}

static void free_sender(struct cuptrace_otlp_http *h)
{
	if (h->easy)
		curl_fn.easy_cleanup(h->easy);
	if (h->multi)
		curl_fn.multi_cleanup(h->multi);
	if (h->hdr_gzip)
		curl_fn.slist_free_all(h->hdr_gzip);
	if (h->hdr_plain)
		curl_fn.slist_free_all(h->hdr_plain);
	for (struct item *it = h->head, *next; it; it = next) {
		next = it->next;
		free(it->body);
		free(it);
	}
	pthread_cond_destroy(&h->work);
	pthread_cond_destroy(&h->room);
	pthread_mutex_destroy(&h->lock);
	free(h->resp);
	free(h->url);
	free(h);
}

static int setup_curl(struct cuptrace_otlp_http *h)
{
	h->easy = curl_fn.easy_init();
	h->multi = curl_fn.multi_init();
	struct curl_slist *g = NULL, *p = NULL;
	static const char *const common[] = {"Content-Type: application/x-protobuf",
	                                     "Expect:"}; /* no 100-continue round trip */
	for (size_t i = 0; i < 2; i++) {
		g = curl_fn.slist_append(g, common[i]);
		p = curl_fn.slist_append(p, common[i]);
	}
	h->hdr_plain = p;
	h->hdr_gzip = g ? curl_fn.slist_append(g, "Content-Encoding: gzip") : NULL;
	if (!h->hdr_gzip && g)
		curl_fn.slist_free_all(g);
	h->resp = malloc(MAX_RESPONSE);
	if (!h->easy || !h->multi || !h->hdr_gzip || !h->hdr_plain || !h->resp)
		return -ENOMEM;
	CURL *e = h->easy;
	curl_fn.easy_setopt(e, CURLOPT_URL, h->url);
	curl_fn.easy_setopt(e, CURLOPT_POST, 1L);
	curl_fn.easy_setopt(e, CURLOPT_NOSIGNAL, 1L); /* threads: no SIGALRM for DNS timeouts */
	curl_fn.easy_setopt(e, CURLOPT_USERAGENT, "cuptrace/" CUPTRACE_VERSION);
	curl_fn.easy_setopt(e, CURLOPT_WRITEFUNCTION, on_response);
	curl_fn.easy_setopt(e, CURLOPT_WRITEDATA, h);
	curl_fn.easy_setopt(e, CURLOPT_ERRORBUFFER, h->errbuf);
	return 0;
}

struct cuptrace_otlp_http *cuptrace_otlp_http_open(const char *url,
                                                   const struct cuptrace_otlp_http_opts *opts)
{
	char *full = url ? cuptrace_otlp_http_full_url(url) : NULL;
	if (!full) {
		cuptrace_err("OTLP: bad collector URL '%s' (expected http://HOST:PORT[/PATH] or "
		             "https://...)",
		             url ? url : "");
		errno = EINVAL;
		return NULL;
	}
	pthread_once(&curl_once, load_curl);
	if (!curl_fn.ok) {
		cuptrace_err("OTLP: cannot load libcurl (%s): no spans are sent (install libcurl4, "
		             "e.g. apt-get install libcurl4)",
		             curl_fn.why);
		free(full);
		errno = ENOENT;
		return NULL;
	}
	struct cuptrace_otlp_http *h = calloc(1, sizeof(*h));
	if (!h) {
		free(full);
		errno = ENOMEM;
		return NULL;
	}
	h->url = full;
	if (opts)
		memcpy(&h->o, opts, opts->sz < sizeof(h->o) ? opts->sz : sizeof(h->o));
	h->o.sz = sizeof(h->o);
	if (!h->o.queue_bytes)
		h->o.queue_bytes = DEF_QUEUE_BYTES;
	if (h->o.timeout_ms <= 0)
		h->o.timeout_ms = DEF_TIMEOUT_MS;
	if (h->o.request_timeout_ms <= 0)
		h->o.request_timeout_ms = DEF_REQUEST_MS;
	if (!h->o.max_retries)
		h->o.max_retries = DEF_RETRIES;
	if (h->o.backoff_ms <= 0)
		h->o.backoff_ms = DEF_BACKOFF_MS;
	h->probe_ms = PROBE_MIN_MS;
	pthread_mutex_init(&h->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&h->work, &ca);
	pthread_cond_init(&h->room, &ca);
	pthread_condattr_destroy(&ca);
	int err = setup_curl(h);
	if (!err) {
		/* The sender never takes the program's signals (cuptrace_thread_start). */
		err = cuptrace_thread_start(&h->thread, sender_main, h);
	}
	if (err) {
		cuptrace_err("OTLP: cannot start sending: %s", strerror(-err));
		free_sender(h);
		errno = -err;
		return NULL;
	}
	h->have_thread = 1;
	return h;
}

void cuptrace_otlp_http_close(struct cuptrace_otlp_http *h, struct cuptrace_otlp_stats *st)
{
	if (!h)
		return;
	pthread_mutex_lock(&h->lock);
	h->closing = 1;
	h->deadline = now_ns() + (int64_t)h->o.timeout_ms * 1000000;
	pthread_cond_broadcast(&h->work);
	pthread_cond_broadcast(&h->room);
	pthread_mutex_unlock(&h->lock);
	if (h->have_thread)
		pthread_join(h->thread, NULL);
	/* Whatever the thread left (it drops the rest after the deadline) is counted. */
	for (struct item *it = h->head; it; it = it->next)
		count_drop(h, it->nspans);
	if (st) {
		uint64_t spans = st->spans;
		*st = h->st;
		st->spans = spans;
	}
	free_sender(h);
}
