/* The OTLP sink: the events of event.h as OpenTelemetry spans, packed into OTLP
 * ExportTraceServiceRequest bodies (protobuf) and handed to a sender (output/otlp_http.h) or to
 * a callback.
 *
 * The span model:
 *  - one resource per process: service.name (opts.service, else the process's name), host.name,
 *    process.pid, process.command_line, and the trace's cuptrace.rank, cuptrace.local_rank,
 *    cuptrace.world_size and cuptrace.gpu.N (GPU model) where the trace has them;
 *  - one span per slice (API call, kernel, copy, memset, sync, NVTX range, ...) and per instant
 *    (zero length), with the slice's name and its args as attributes under their own keys, plus
 *    category, correlation_id, thread.id and thread.name (thread tracks), device, stream and
 *    track (GPU and other tracks). Counters are left out;
 *  - a slice is the child of the innermost slice around it on its track (what Perfetto stacks:
 *    NVTX push/pop ranges around API calls, a runtime call around its driver call);
 *  - GPU work (a slice with an incoming flow) is the child of the API call that launched it. A
 *    parent rather than a span link, because Jaeger and Tempo draw children under their parent in
 *    the trace view and show links only as a reference in a detail panel; a child may outlive its
 *    parent (the kernel runs after the launch returned), which OpenTelemetry allows;
 *  - one trace id per run (the trace's uuid), or with opts.trace_per one trace per occurrence of
 *    the slice of that name: it becomes a root (with a link to what was around it) and everything
 *    nested in it on its track, and the GPU work launched from there, gets its trace id;
 *  - times in Unix ns: info->start_realtime_ns + the relative time.
 *
 * Events come in any order, so spans wait before they go: a span leaves once the newest end
 * time seen (or, live, the clock) is opts.window_ms past its end, when more than
 * opts.max_pending wait (the oldest go), or at finish. The slice around a span is found only if
 * it arrived before the span left: a range that ends more than the window after a span inside it
 * is not that span's parent. Span ids are fixed by the event order, and a launching API call's by
 * its correlation id, so GPU work that arrives before (or long after) its launch still names it.
 *
 * The sink never fails because of the network: what cannot be sent is counted (stats). Errors it
 * returns are the event model's (-ENOMEM). Threading: one thread, as every sink. */
#ifndef CUPTRACE_FORMAT_OTLP_H
#define CUPTRACE_FORMAT_OTLP_H

#include <stddef.h>
#include <stdint.h>

#include "common/options.h"
#include "format/event.h"
#include "output/otlp_http.h"

/* Takes body (malloc'd, len bytes holding nspans spans) in every case. Returns 0 or a negative
 * errno (the spans are then counted as dropped). */
typedef int (*cuptrace_otlp_emit_fn)(void *ctx, uint8_t *body, size_t len, size_t nspans);

struct cuptrace_otlp_opts {
	size_t sz;             /* sizeof(struct cuptrace_otlp_opts) */
	const char *url;       /* the collector; ignored when emit is set */
	const char *service;   /* service.name of every process; NULL: the process's name */
	const char *trace_per; /* slice name: one trace per occurrence; NULL: one per run */
	size_t batch_spans;    /* spans per request (default 512) */
	int interval_ms;       /* live: a partial batch goes after this long (default 1000) */
	int window_ms;      /* trace time a span waits for the slices around it (default 10000) */
	size_t max_pending; /* spans waiting, at most (default 65536) */
	int live;           /* events arrive as they happen (record): the clock moves time on */
	struct cuptrace_otlp_http_opts http; /* for url */
	cuptrace_otlp_emit_fn emit;          /* tests: bodies go here instead of a sender */
	void *emit_ctx;
};

/* Returns NULL with errno set (EINVAL: bad URL; ENOENT: no libcurl; a message is logged). */
struct cuptrace_sink *cuptrace_otlp_sink_new(const struct cuptrace_otlp_opts *opts);
/* Spans made and what became of them: final after finish() (which ends the sending, bounded by
 * opts.http.timeout_ms). */
void cuptrace_otlp_sink_stats(struct cuptrace_sink *s, struct cuptrace_otlp_stats *st);
/* The collector URL requests go to ("" with emit). */
const char *cuptrace_otlp_sink_url(struct cuptrace_sink *s);
/* Sets the option of one OTLP setting (common/options.h: CUPTRACE_SET_OTLP_*), its value
 * parsed by the settings table, as the command line and the library read them; strings are
 * borrowed (they must outlive the sink's creation). 0, or -ENOENT for another setting. */
int cuptrace_otlp_opts_set(struct cuptrace_otlp_opts *o, enum cuptrace_setting_id id,
                           const struct cuptrace_setting_value *v);
/* One line for the summaries: "OTLP URL: N spans, S sent in R requests, D dropped, ...". */
void cuptrace_otlp_stats_line(char *buf, size_t n, const char *url,
                              const struct cuptrace_otlp_stats *st);

/* A sink that hands every event to a and then to b (both owned by the tee). An error of a
 * (the file) is the tee's; b's (OTLP) only stop b. Either may be NULL. */
struct cuptrace_sink *cuptrace_tee_sink_new(struct cuptrace_sink *a, struct cuptrace_sink *b);

/* ---- internal to the OTLP sink (otlp_sink.c, otlp_encode.c) ---- */

/* An attribute value as it goes on the wire. */
struct otlp_attr {
	const char *key;
	enum { OA_STR, OA_INT, OA_DOUBLE, OA_BOOL } type;
	union {
		const char *s; /* valid UTF-8 */
		int64_t i;
		double d;
		int b;
	} v;
};

/* A span ready to go: everything borrowed from the sink until the batch is packed. */
struct otlp_span {
	int32_t pid;
	uint8_t trace_id[16];
	uint64_t span_id, parent_id;
	uint8_t link_trace[16];
	uint64_t link_span; /* 0: no link */
	const char *name;
	int64_t start_unix, end_unix;
	const struct otlp_attr *attrs;
	size_t nattrs;
};

/* The resource of one process. */
struct otlp_resource {
	int32_t pid;
	const struct otlp_attr *attrs;
	size_t nattrs;
};

/* Packs spans (sorted by pid; resources gives each pid's) into an ExportTraceServiceRequest.
 * Returns a malloc'd body and its length, or NULL on allocation failure. */
uint8_t *cuptrace_otlp_pack(const struct otlp_span *spans, size_t n,
                            const struct otlp_resource *resources, size_t nres, size_t *len);

#endif
