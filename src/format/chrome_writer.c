/* Chrome Trace Event Format sink: the timeline of event.h as JSON trace events, streamed as they
 * arrive, for ui.perfetto.dev (trace_processor), chrome://tracing and JSON tools. */

/*
 * Layout decisions
 *
 * File shape. The bare-array form, one event per line:
 *     [{"ph":"i","ts":0.000,...}
 *     ,{"ph":"M",...}
 *     ,{"ph":"X",...}
 *     ]
 * Each line is one output record, so the output cuts chunks and flushes only between events.
 * finish() writes the closing "]": the complete file is strict RFC 8259 JSON. A file cut
 * anywhere (SIGKILL, disk full) is "[" + complete lines + at most one partial line: an array
 * without its closing bracket, which trace_processor loads since v49 (it drops the partial last
 * event). The object form {"traceEvents":[...]} is not used because a cut one does not load.
 * .json.gz is whole-file gzip of the same bytes; a cut .gz does not load (gzip's limitation).
 *
 * Metadata. The array form has no top-level "metadata" object, and trace_processor ignores every
 * 'M' event but process/thread names and sort indexes. So the trace metadata (cuptrace_trace_info:
 * pid, process name, host, start clocks, trace uuid, then every meta entry: GPU, driver, CUDA and
 * CUPTI versions, command line, dropped records, ...) goes into the args of an instant on the
 * process's main thread ("ph":"i","s":"t", tid = pid) named "cuptrace: trace info" at ts 0,
 * written first. Each later
 * meta() call writes an instant "cuptrace: summary" at the latest end time seen so far, holding
 * ALL metadata known at that point (later values replace earlier ones), so the last summary is
 * complete on its own. In trace_processor: the slice with that name and its args. The command
 * line also goes into a "process_labels" 'M' event, which the legacy viewer shows. Tracks and
 * events skipped as malformed (undeclared track, duplicate uuid, non-finite counter value) are
 * counted under "chrome_skipped_events" in a last summary written by finish(), with one warning.
 *
 * Timestamps. ts and dur are microseconds printed from the integer nanoseconds with exactly three
 * decimals ("1234.567"), no floating point on our side, so nanoseconds survive.
 *
 * Processes and threads.
 *  - PROCESS: its real pid; 'M' process_name, process_sort_index = 1024 * (declaration order),
 *    process_labels (command line).
 *  - THREAD: (pid, real tid); 'M' thread_name, thread_sort_index = 1024 * sort_rank.
 *  - GROUP ("GPU 0: NVIDIA H200"): a JSON process of its own, since JSON has no nested tracks,
 *    with a synthetic pid that no Linux pid can equal (Linux pids are < 2^22 = 4194304):
 *        pid = 1000000000 + 10000000 * n + owner_pid
 *    where owner_pid is the pid of the process the group belongs to and n counts that process's
 *    groups in declaration order (0, 1, ...). Read in decimal, "1000012345" is the first group of
 *    pid 12345, "1010012345" the second. Where that does not fit in int32 (owner_pid >= 10^7, more
 *    than ~114 groups in one process) or is taken, the group gets 4194304 + k (k counts such
 *    groups). 'M' process_name = the group name, process_sort_index = the owner's index + 1 +
 *    the group's sort_rank (clamped to 0..1022), so each GPU follows its host process.
 *  - SLICES (a stream, a lane): its own synthetic tid, 500000000 + k (k counts them; disjoint from
 *    real tids and from every synthetic pid), inside the pid of the group or process it belongs
 *    to. 'M' thread_name = the track name (lanes repeat their track's name, so the UI merges
 *    them), thread_sort_index = 1024 * sort_rank + lane, so streams come in stream order and each
 *    lane right after its main track. Tracks map to distinct tids, so the producer's guarantee
 *    (no partial overlap on a track) holds per tid: no two 'X' events on one tid partially overlap.
 *  - A THREAD tid outside 1..INT32_MAX also gets a synthetic tid (0 would mean "the main thread"
 *    and trace_processor clamps tids to 32 bits).
 *
 * Events.
 *  - slice -> 'X' with name, cat, args; "correlation_id" is added to args when non-zero.
 *  - instant -> 'i' with "s":"t" on a thread or slice track, "s":"p" on a process or group.
 *  - counter -> 'C' on the owning process's pid, name = the track name, one arg whose key is the
 *    unit: "bytes", "ns", "count", or "value" for no unit. trace_processor names the track
 *    "<name> <key>", e.g. "Device memory used bytes" (two counter tracks of one name under
 *    one process would share that track: names must differ).
 *  - flows -> 's' for each id in flows_out and 'f' with "bp":"e" for each id in flows_in, both
 *    with cat "cuda_flow" and name "launch" (trace_processor keys v1 flows on (id, cat, name)),
 *    on the slice's own pid/tid, at ts + 1 ns when dur >= 2 (ts otherwise). Not the midpoint: an
 *    's' binds to the deepest slice open at its ts, and a runtime call's nested driver call
 *    usually covers the midpoint but starts well after ts + 1 ns. At exactly ts the binding would
 *    rest on the importer's tie-break order. The id is a JSON number when <= 2^53, else a hex
 *    string "0x..." (trace_processor reads string ids as hex). Flow ends may appear in any order.
 *
 * Values. Integers beyond +-2^53 are written as decimal strings (JavaScript readers would round
 * them), pointers as "0x..." strings, NaN and infinities as strings in args ("nan", "inf").
 * Counter values that are not finite are skipped. Strings: see json_writer.h.
 *
 * Memory: events are written as they arrive; the sink keeps one small entry per track and the
 * metadata entries, nothing per event.
 */
#define _GNU_SOURCE /* open_memstream */
#include "format/formats.h"
#include "format/json_writer.h"
#include "common/log.h"
#include "common/util.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GROUP_PID_BASE    1000000000ll
#define GROUP_PID_STEP    10000000ll
#define FALLBACK_PID_BASE 4194304ll /* 2^22: above every Linux pid (PID_MAX_LIMIT) */
#define SYNTH_TID_BASE    500000000ll
#define SORT_STEP         1024

#define FLOW_CAT  "cuda_flow"
#define FLOW_NAME "launch"

struct ctrack {
	enum cuptrace_track_kind kind;
	int64_t pid;        /* JSON pid of this track's events */
	int64_t tid;        /* JSON tid (THREAD, SLICES); the pid otherwise */
	int64_t sort_index; /* PROCESS, GROUP: its process_sort_index */
	uint32_t ngroups;   /* PROCESS: groups given a pid from its pid so far */
	char *name;         /* COUNTER: the 'C' event name (owned) */
	const char *unit;   /* COUNTER: the arg key (static) */
};

struct mentry {
	char *key; /* owned */
	int is_int;
	int64_t i;
	char *s; /* owned; NULL writes null */
};

struct chrome_sink {
	struct cuptrace_sink base;
	struct cuptrace_output *out; /* owned until finish/destroy closes it */
	struct cuptrace_json *w;
	int err; /* first error, sticky */
	int began, finished;
	struct ctrack *trk;
	size_t ntrk, trkcap;
	struct cuptrace_u64map index; /* track uuid -> index + 1 in trk */
	struct cuptrace_u64map pids;  /* synthetic pids handed out (collision check) */
	uint32_t nprocs;              /* PROCESS tracks so far: their sort order */
	int64_t next_tid;             /* next synthetic tid */
	int64_t next_fallback_pid;
	int64_t host_pid; /* info->pid: where the metadata instants go */
	int64_t max_end;  /* latest ts + dur seen: where a summary goes */
	struct mentry *meta;
	size_t nmeta, metacap;
	uint64_t skipped; /* events and tracks dropped as malformed (undeclared track, ...) */
	struct cuptrace_strtab stacks;   /* call stacks as text, one per stack() */
	struct cuptrace_u64map stack_of; /* stack id -> id in stacks */
	int have_stacks;
};

static struct chrome_sink *to_chrome(struct cuptrace_sink *s)
{
	return (struct chrome_sink *)s;
}

static int fail(struct chrome_sink *s, int err)
{
	if (!s->err)
		s->err = err;
	return s->err;
}

/* After a burst of writer calls: picks up the writer's sticky error. */
static int check(struct chrome_sink *s)
{
	int e = cuptrace_json_error(s->w);
	return e ? fail(s, e) : s->err;
}

static struct ctrack *find(struct chrome_sink *s, uint64_t uuid)
{
	uint64_t *v = cuptrace_u64map_get(&s->index, uuid);
	return v ? &s->trk[*v - 1] : NULL;
}

/* Malformed input is skipped, not fatal: one warning, and the count lands in the metadata. */
static int skip(struct chrome_sink *s, const char *what, uint64_t uuid)
{
	if (!s->skipped++)
		cuptrace_warn("chrome: skipped %s (track %" PRIu64 "), see summary", what, uuid);
	return 0;
}

static void note_end(struct chrome_sink *s, int64_t ts, int64_t dur)
{
	int64_t end;
	if (__builtin_add_overflow(ts, dur, &end))
		end = INT64_MAX;
	if (end > s->max_end)
		s->max_end = end;
}

/* ---- metadata table ---- */

static int meta_set(struct chrome_sink *s, const char *key, int is_int, int64_t i, const char *str)
{
	struct mentry *m = NULL;
	char *v = NULL;

	if (!key)
		return 0;
	for (size_t k = 0; k < s->nmeta; k++)
		if (!strcmp(s->meta[k].key, key))
			m = &s->meta[k];
	if (!is_int && str && !(v = strdup(str)))
		return -ENOMEM;
	if (!m) {
		struct mentry *arr =
		    cuptrace_grow(s->meta, &s->metacap, s->nmeta + 1, sizeof(*arr));
		char *k = strdup(key);
		if (!arr || !k) {
			if (arr)
				s->meta = arr;
			free(k);
			free(v);
			return -ENOMEM;
		}
		s->meta = arr;
		m = &s->meta[s->nmeta++];
		*m = (struct mentry){.key = k};
	}
	free(m->s);
	m->is_int = is_int;
	m->i = i;
	m->s = v;
	return 0;
}

static void free_meta(struct chrome_sink *s)
{
	for (size_t k = 0; k < s->nmeta; k++) {
		free(s->meta[k].key);
		free(s->meta[k].s);
	}
	free(s->meta);
	s->meta = NULL;
	s->nmeta = s->metacap = 0;
}

/* ---- event writing ---- */

/* The common prefix of an event: ph and ts first (old trace_processor tokenizers scan each event
 * for "ts" before parsing it), then dur, pid and tid where given. */
static void head(struct cuptrace_json *w, const char *ph, int64_t ts, const int64_t *dur,
                 int64_t pid, const int64_t *tid)
{
	cuptrace_json_start_object(w);
	cuptrace_json_string_field(w, "ph", ph);
	cuptrace_json_us_field(w, "ts", ts);
	if (dur)
		cuptrace_json_us_field(w, "dur", *dur);
	cuptrace_json_int_field(w, "pid", pid);
	if (tid)
		cuptrace_json_int_field(w, "tid", *tid);
}

/* The metadata instant: every entry of the table as args. */
static int write_meta_instant(struct chrome_sink *s, const char *name, int64_t ts)
{
	struct cuptrace_json *w = s->w;

	head(w, "i", ts, NULL, s->host_pid, &s->host_pid);
	/* On the main thread (tid = pid), not global ("g"): trace_processor puts a global
	 * instant on a top-level track of its own, a row empty but for these (TIMELINE.md). */
	cuptrace_json_string_field(w, "s", "t");
	cuptrace_json_string_field(w, "name", name);
	cuptrace_json_string_field(w, "cat", CUPTRACE_META_CATEGORY);
	cuptrace_json_name(w, "args");
	cuptrace_json_start_object(w);
	for (size_t k = 0; k < s->nmeta; k++) {
		cuptrace_json_name(w, s->meta[k].key);
		if (s->meta[k].is_int)
			cuptrace_json_int_safe(w, s->meta[k].i);
		else
			cuptrace_json_string(w, s->meta[k].s);
	}
	cuptrace_json_end_object(w);
	cuptrace_json_end_object(w);
	return check(s);
}

/* 'M' events have no time; "ts":0 is there for the old tokenizers (see head()). */
static void meta_event(struct chrome_sink *s, const char *what, int64_t pid, const int64_t *tid,
                       const char *key, const char *str, int64_t num, const char *description)
{
	struct cuptrace_json *w = s->w;

	cuptrace_json_start_object(w);
	cuptrace_json_string_field(w, "ph", "M");
	cuptrace_json_int_field(w, "ts", 0);
	cuptrace_json_int_field(w, "pid", pid);
	if (tid)
		cuptrace_json_int_field(w, "tid", *tid);
	cuptrace_json_string_field(w, "name", what);
	cuptrace_json_name(w, "args");
	cuptrace_json_start_object(w);
	if (str)
		cuptrace_json_string_field(w, key, str);
	else
		cuptrace_json_int_field(w, key, num);
	if (description)
		cuptrace_json_string_field(w, "description", description);
	cuptrace_json_end_object(w);
	cuptrace_json_end_object(w);
}

static void write_arg(struct cuptrace_json *w, const struct cuptrace_arg *a)
{
	cuptrace_json_name(w, a->key);
	switch (a->type) {
	case CUPTRACE_ARG_INT:
		cuptrace_json_int_safe(w, a->v.i);
		break;
	case CUPTRACE_ARG_UINT:
		cuptrace_json_uint_safe(w, a->v.u);
		break;
	case CUPTRACE_ARG_DOUBLE:
		if (isfinite(a->v.d))
			cuptrace_json_double(w, a->v.d);
		else if (isnan(a->v.d))
			cuptrace_json_string(w, "nan");
		else
			cuptrace_json_string(w, a->v.d > 0 ? "inf" : "-inf");
		break;
	case CUPTRACE_ARG_STRING:
		cuptrace_json_string(w, a->v.s);
		break;
	case CUPTRACE_ARG_POINTER:
		cuptrace_json_hex(w, a->v.u);
		break;
	case CUPTRACE_ARG_BOOL:
		cuptrace_json_bool(w, a->v.b);
		break;
	default:
		cuptrace_json_null(w);
		break;
	}
}

/* True if args[i]'s key is NULL or appeared before i: JSON objects should not repeat keys. */
static int skip_arg(const struct cuptrace_arg *args, size_t i)
{
	if (!args[i].key)
		return 1;
	for (size_t j = 0; j < i; j++)
		if (args[j].key && !strcmp(args[j].key, args[i].key))
			return 1;
	return 0;
}

static void write_args(struct cuptrace_json *w, const struct cuptrace_arg *args, size_t n,
                       uint64_t correlation_id)
{
	int have_corr = 0;

	if (!n && !correlation_id)
		return;
	cuptrace_json_name(w, "args");
	cuptrace_json_start_object(w);
	for (size_t i = 0; i < n; i++) {
		if (skip_arg(args, i))
			continue;
		have_corr |= !strcmp(args[i].key, "correlation_id");
		write_arg(w, &args[i]);
	}
	if (correlation_id && !have_corr) {
		cuptrace_json_name(w, "correlation_id");
		cuptrace_json_uint_safe(w, correlation_id);
	}
	cuptrace_json_end_object(w);
}

static void write_flow(struct chrome_sink *s, const struct ctrack *t, int in, uint64_t id,
                       int64_t ts)
{
	struct cuptrace_json *w = s->w;

	head(w, in ? "f" : "s", ts, NULL, t->pid, &t->tid);
	if (in)
		cuptrace_json_string_field(w, "bp", "e");
	cuptrace_json_string_field(w, "name", FLOW_NAME);
	cuptrace_json_string_field(w, "cat", FLOW_CAT);
	cuptrace_json_name(w, "id");
	if (id <= (1ull << 53))
		cuptrace_json_uint(w, id);
	else
		cuptrace_json_hex(w, id);
	cuptrace_json_end_object(w);
}

/* ---- ops ---- */

static int chrome_begin(struct cuptrace_sink *sink, const struct cuptrace_trace_info *info)
{
	struct chrome_sink *s = to_chrome(sink);
	char uuid[40];
	int r = 0;

	if (s->err || s->finished)
		return s->err ? s->err : -EINVAL;
	if (s->began)
		return -EINVAL;
	s->began = 1;
	s->host_pid = info->pid;
	snprintf(uuid, sizeof(uuid),
	         "%08" PRIx64 "-%04" PRIx64 "-%04" PRIx64 "-%04" PRIx64 "-%012" PRIx64,
	         info->trace_uuid_hi >> 32, (info->trace_uuid_hi >> 16) & 0xffff,
	         info->trace_uuid_hi & 0xffff, info->trace_uuid_lo >> 48,
	         info->trace_uuid_lo & UINT64_C(0xffffffffffff));
	r |= meta_set(s, "pid", 1, info->pid, NULL);
	r |= meta_set(s, "process_name", 0, 0, info->process_name);
	r |= meta_set(s, "hostname", 0, 0, info->hostname);
	r |= meta_set(s, "start_realtime_ns", 1, info->start_realtime_ns, NULL);
	/* Where the metadata holds it too (a capture's), it goes where the metadata puts it: a
	 * reader lists the metadata in the order it reads it, and a Perfetto trace keeps that. */
	int boot_in_meta = 0;
	for (size_t i = 0; i < info->nmeta; i++)
		boot_in_meta |=
		    info->meta[i].key && !strcmp(info->meta[i].key, "start_boottime_ns");
	if (!boot_in_meta)
		r |= meta_set(s, "start_boottime_ns", 1, info->start_boottime_ns, NULL);
	r |= meta_set(s, "trace_uuid", 0, 0, uuid);
	for (size_t i = 0; i < info->nmeta; i++) {
		const struct cuptrace_meta *m = &info->meta[i];
		r |= meta_set(s, m->key, m->is_int, m->i, m->s);
	}
	if (r)
		return fail(s, -ENOMEM);
	cuptrace_json_start_array(s->w);
	return write_meta_instant(s, CUPTRACE_META_INFO, 0);
}

/* The synthetic pid of a group owned by process p (see the top of the file). */
static int64_t group_pid(struct chrome_sink *s, struct ctrack *p, int64_t owner_pid)
{
	int created = 0;
	int64_t pid = -1;

	if (p && owner_pid >= 0 && owner_pid < GROUP_PID_STEP) {
		pid = GROUP_PID_BASE + GROUP_PID_STEP * (int64_t)p->ngroups++ + owner_pid;
		if (pid > INT32_MAX || cuptrace_u64map_get(&s->pids, (uint64_t)pid))
			pid = -1;
	}
	if (pid < 0) {
		do
			pid = s->next_fallback_pid++;
		while (cuptrace_u64map_get(&s->pids, (uint64_t)pid));
	}
	if (!cuptrace_u64map_put(&s->pids, (uint64_t)pid, &created))
		return -1;
	return pid;
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

static const char *unit_key(enum cuptrace_counter_unit u)
{
	switch (u) {
	case CUPTRACE_UNIT_NS:
		return "ns";
	case CUPTRACE_UNIT_COUNT:
		return "count";
	case CUPTRACE_UNIT_BYTES:
		return "bytes";
	default:
		return "value";
	}
}

/* "a b c": the command line as one label. Returns a malloc'd string or NULL. */
static char *join_cmdline(const char *const *argv, size_t n)
{
	size_t len = 1;
	for (size_t i = 0; i < n; i++)
		len += (argv[i] ? strlen(argv[i]) : 0) + 1;
	char *out = malloc(len), *p = out;
	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		size_t l = argv[i] ? strlen(argv[i]) : 0;
		if (i)
			*p++ = ' ';
		memcpy(p, argv[i] ? argv[i] : "", l);
		p += l;
	}
	*p = 0;
	return out;
}

static int chrome_track(struct cuptrace_sink *sink, const struct cuptrace_track *t)
{
	struct chrome_sink *s = to_chrome(sink);
	struct ctrack c = {.kind = t->kind}, *parent, *owner = NULL;
	int created = 0;
	char *label = NULL;

	if (s->err || !s->began || s->finished)
		return s->err ? s->err : -EINVAL;
	if (find(s, t->uuid))
		return skip(s, "a track declared twice", t->uuid);
	parent = t->parent_uuid ? find(s, t->parent_uuid) : NULL;
	/* The JSON process an event of this track belongs to: the process or group above it. */
	if (parent &&
	    (parent->kind == CUPTRACE_TRACK_PROCESS || parent->kind == CUPTRACE_TRACK_GROUP))
		owner = parent;

	switch (t->kind) {
	case CUPTRACE_TRACK_PROCESS:
		c.pid = c.tid = t->pid;
		c.sort_index = (int64_t)s->nprocs++ * SORT_STEP;
		meta_event(s, "process_name", c.pid, NULL, "name", t->name ? t->name : "", 0,
		           t->description);
		meta_event(s, "process_sort_index", c.pid, NULL, "sort_index", NULL, c.sort_index,
		           NULL);
		if (t->cmdline_len) {
			if (!(label = join_cmdline(t->cmdline, t->cmdline_len)))
				return fail(s, -ENOMEM);
			meta_event(s, "process_labels", c.pid, NULL, "labels", label, 0, NULL);
			free(label);
		}
		break;
	case CUPTRACE_TRACK_GROUP: {
		/* Groups sit under a process; one anywhere else (none is produced today) gets a
		 * fallback pid, sorted after its parent group if it has one. */
		struct ctrack *host = owner && owner->kind == CUPTRACE_TRACK_PROCESS ? owner : NULL;
		c.pid = c.tid = group_pid(s, host, owner ? owner->pid : t->pid);
		if (c.pid < 0)
			return fail(s, -ENOMEM);
		c.sort_index = (owner ? owner->sort_index : (int64_t)s->nprocs * SORT_STEP) + 1 +
		               clamp64(t->sort_rank, 0, SORT_STEP - 2);
		meta_event(s, "process_name", c.pid, NULL, "name", t->name ? t->name : "", 0,
		           t->description);
		meta_event(s, "process_sort_index", c.pid, NULL, "sort_index", NULL, c.sort_index,
		           NULL);
		break;
	}
	case CUPTRACE_TRACK_THREAD:
	case CUPTRACE_TRACK_SLICES: {
		int64_t sort = (int64_t)t->sort_rank * SORT_STEP;
		c.pid = owner ? owner->pid : t->pid;
		if (t->kind == CUPTRACE_TRACK_THREAD && t->tid > 0 && t->tid <= INT32_MAX) {
			c.tid = t->tid;
		} else {
			c.tid = s->next_tid++;
			if (t->kind == CUPTRACE_TRACK_SLICES)
				sort += t->lane < SORT_STEP ? t->lane : SORT_STEP - 1;
		}
		meta_event(s, "thread_name", c.pid, &c.tid, "name", t->name ? t->name : "", 0,
		           t->description);
		meta_event(s, "thread_sort_index", c.pid, &c.tid, "sort_index", NULL, sort, NULL);
		break;
	}
	case CUPTRACE_TRACK_COUNTER:
		c.pid = c.tid = owner ? owner->pid : t->pid;
		c.unit = unit_key(t->unit);
		if (!(c.name = strdup(t->name ? t->name : "")))
			return fail(s, -ENOMEM);
		break;
	default:
		return skip(s, "a track of unknown kind", t->uuid);
	}

	struct ctrack *arr = cuptrace_grow(s->trk, &s->trkcap, s->ntrk + 1, sizeof(*arr));
	uint64_t *slot = arr ? cuptrace_u64map_put(&s->index, t->uuid, &created) : NULL;
	if (arr)
		s->trk = arr;
	if (!slot) {
		free(c.name);
		return fail(s, -ENOMEM);
	}
	s->trk[s->ntrk++] = c;
	*slot = s->ntrk;
	return check(s);
}

/* A call stack as the "stack" argument of its slices: one line per frame, innermost first (as
 * a debugger shows it): "function (file:line)" when known, else "module+0xrel_pc" (native
 * frames not yet symbolized). */
static int chrome_stack(struct cuptrace_sink *sink, const struct cuptrace_stack *st)
{
	struct chrome_sink *s = to_chrome(sink);
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (!f)
		return fail(s, -ENOMEM);
	for (size_t i = st->nframes; i-- > 0;) {
		const struct cuptrace_frame *fr = &st->frames[i];
		const char *mod = fr->module ? strrchr(fr->module, '/') : NULL;
		mod = mod ? mod + 1 : fr->module ? fr->module : "?";
		if (fr->file && fr->line)
			fprintf(f, "%s (%s:%u)", fr->function ? fr->function : "?", fr->file,
			        fr->line);
		else if (fr->function)
			fprintf(f, "%s (%s+0x%llx)", fr->function, mod,
			        (unsigned long long)fr->rel_pc);
		else
			fprintf(f, "%s+0x%llx", mod, (unsigned long long)fr->rel_pc);
		if (i)
			fputc('\n', f);
	}
	if (fclose(f) || !text)
		return fail(s, -ENOMEM);
	if (!s->have_stacks) {
		cuptrace_strtab_init(&s->stacks);
		cuptrace_u64map_init(&s->stack_of);
		s->have_stacks = 1;
	}
	uint32_t id = cuptrace_strtab_intern(&s->stacks, text, len);
	uint64_t *v = id ? cuptrace_u64map_put(&s->stack_of, st->id, NULL) : NULL;
	free(text);
	if (!v)
		return fail(s, -ENOMEM);
	*v = id;
	return 0;
}

static int chrome_slice(struct cuptrace_sink *sink, const struct cuptrace_slice *e)
{
	struct chrome_sink *s = to_chrome(sink);
	struct cuptrace_json *w = s->w;
	const struct ctrack *t;
	int64_t dur = e->dur > 0 ? e->dur : 0, fts;

	if (s->err || !s->began || s->finished)
		return s->err ? s->err : -EINVAL;
	t = find(s, e->track_uuid);
	if (!t || (t->kind != CUPTRACE_TRACK_THREAD && t->kind != CUPTRACE_TRACK_SLICES))
		return skip(s, "a slice on an undeclared or non-slice track", e->track_uuid);
	note_end(s, e->ts, dur);

	head(w, "X", e->ts, &dur, t->pid, &t->tid);
	cuptrace_json_string_field(w, "name", e->name ? e->name : "");
	if (e->category)
		cuptrace_json_string_field(w, "cat", e->category);
	uint64_t *sv =
	    e->stack_id && s->have_stacks ? cuptrace_u64map_get(&s->stack_of, e->stack_id) : NULL;
	if (sv && e->nargs < 32) {
		struct cuptrace_arg a[33];
		memcpy(a, e->args, e->nargs * sizeof(*a));
		a[e->nargs] = (struct cuptrace_arg){.key = "stack", .type = CUPTRACE_ARG_STRING};
		a[e->nargs].v.s = cuptrace_strtab_str(&s->stacks, (uint32_t)*sv);
		write_args(w, a, e->nargs + 1, e->correlation_id);
	} else {
		write_args(w, e->args, e->nargs, e->correlation_id);
	}
	cuptrace_json_end_object(w);

	/* Strictly inside the slice when it has room, so the binding does not hinge on tie-breaks
	 * between equal timestamps; before any nested child (see the top of the file). */
	fts = dur >= 2 ? e->ts + 1 : e->ts;
	for (size_t i = 0; i < e->nflows_out; i++)
		write_flow(s, t, 0, e->flows_out[i], fts);
	for (size_t i = 0; i < e->nflows_in; i++)
		write_flow(s, t, 1, e->flows_in[i], fts);
	return check(s);
}

static int chrome_instant(struct cuptrace_sink *sink, const struct cuptrace_instant *e)
{
	struct chrome_sink *s = to_chrome(sink);
	struct cuptrace_json *w = s->w;
	const struct ctrack *t;
	int on_thread;

	if (s->err || !s->began || s->finished)
		return s->err ? s->err : -EINVAL;
	t = find(s, e->track_uuid);
	if (!t || t->kind == CUPTRACE_TRACK_COUNTER)
		return skip(s, "an instant on an undeclared or counter track", e->track_uuid);
	note_end(s, e->ts, 0);
	on_thread = t->kind == CUPTRACE_TRACK_THREAD || t->kind == CUPTRACE_TRACK_SLICES;

	head(w, "i", e->ts, NULL, t->pid, on_thread ? &t->tid : NULL);
	cuptrace_json_string_field(w, "s", on_thread ? "t" : "p");
	cuptrace_json_string_field(w, "name", e->name ? e->name : "");
	if (e->category)
		cuptrace_json_string_field(w, "cat", e->category);
	write_args(w, e->args, e->nargs, e->correlation_id);
	cuptrace_json_end_object(w);
	return check(s);
}

static int chrome_counter(struct cuptrace_sink *sink, const struct cuptrace_counter *e)
{
	struct chrome_sink *s = to_chrome(sink);
	struct cuptrace_json *w = s->w;
	const struct ctrack *t;

	if (s->err || !s->began || s->finished)
		return s->err ? s->err : -EINVAL;
	t = find(s, e->track_uuid);
	if (!t || t->kind != CUPTRACE_TRACK_COUNTER)
		return skip(s, "a counter value on an undeclared or non-counter track",
		            e->track_uuid);
	if (e->is_double && !isfinite(e->d))
		return skip(s, "a counter value that is not finite", e->track_uuid);
	note_end(s, e->ts, 0);

	head(w, "C", e->ts, NULL, t->pid, NULL);
	cuptrace_json_string_field(w, "name", t->name);
	cuptrace_json_name(w, "args");
	cuptrace_json_start_object(w);
	cuptrace_json_name(w, t->unit);
	if (e->is_double)
		cuptrace_json_double(w, e->d);
	else
		cuptrace_json_int_safe(w, e->i);
	cuptrace_json_end_object(w);
	cuptrace_json_end_object(w);
	return check(s);
}

static int chrome_meta(struct cuptrace_sink *sink, const struct cuptrace_meta *m, size_t n)
{
	struct chrome_sink *s = to_chrome(sink);

	if (s->err || !s->began || s->finished)
		return s->err ? s->err : -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (meta_set(s, m[i].key, m[i].is_int, m[i].i, m[i].s))
			return fail(s, -ENOMEM);
	return write_meta_instant(s, CUPTRACE_META_SUMMARY, s->max_end);
}

/* Idle-time flush from the writer thread: complete lines reach the file about once a second,
 * so a killed process leaves a loadable array. */
static int chrome_tick(struct cuptrace_sink *sink)
{
	struct chrome_sink *s = to_chrome(sink);
	if (s->err || s->finished || !s->out)
		return s->err;
	int r = cuptrace_output_tick(s->out);
	return r ? fail(s, r) : 0;
}

static int chrome_finish(struct cuptrace_sink *sink)
{
	struct chrome_sink *s = to_chrome(sink);
	int r;

	if (s->finished)
		return s->err ? s->err : -EINVAL;
	s->finished = 1;
	if (!s->err) {
		if (!s->began)
			cuptrace_json_start_array(s->w); /* still a valid (empty) trace */
		if (s->skipped) {
			cuptrace_warn("chrome: %" PRIu64 " malformed tracks or events were skipped",
			              s->skipped);
			if (meta_set(s, "chrome_skipped_events", 1, (int64_t)s->skipped, NULL))
				fail(s, -ENOMEM);
			else
				write_meta_instant(s, CUPTRACE_META_SUMMARY, s->max_end);
		}
		cuptrace_json_end_array(s->w);
		check(s);
	}
	r = cuptrace_output_close(s->out);
	s->out = NULL;
	if (r)
		fail(s, r);
	return s->err;
}

static void chrome_destroy(struct cuptrace_sink *sink)
{
	struct chrome_sink *s = to_chrome(sink);

	if (!s)
		return;
	/* Without finish() the file keeps what was written: an array without "]", which loads. */
	cuptrace_output_close(s->out);
	cuptrace_json_free(s->w);
	for (size_t i = 0; i < s->ntrk; i++)
		free(s->trk[i].name);
	free(s->trk);
	cuptrace_u64map_free(&s->index);
	cuptrace_u64map_free(&s->pids);
	if (s->have_stacks) {
		cuptrace_strtab_free(&s->stacks);
		cuptrace_u64map_free(&s->stack_of);
	}
	free_meta(s);
	free(s);
}

static const struct cuptrace_sink_ops chrome_ops = {
    .name = "chrome",
    .begin = chrome_begin,
    .track = chrome_track,
    .slice = chrome_slice,
    .stack = chrome_stack,
    .instant = chrome_instant,
    .counter = chrome_counter,
    .meta = chrome_meta,
    .tick = chrome_tick,
    .finish = chrome_finish,
    .destroy = chrome_destroy,
};

struct cuptrace_sink *cuptrace_chrome_sink_new(struct cuptrace_output *out)
{
	struct chrome_sink *s = NULL;

	/* out is ours from here, also on failure: the caller has no sink to destroy. */
	if (!out) {
		errno = EINVAL;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s || !(s->w = cuptrace_json_new(out))) {
		free(s);
		cuptrace_output_close(out);
		errno = ENOMEM;
		return NULL;
	}
	s->base.ops = &chrome_ops;
	s->out = out;
	s->next_tid = SYNTH_TID_BASE;
	s->next_fallback_pid = FALLBACK_PID_BASE;
	cuptrace_u64map_init(&s->index);
	cuptrace_u64map_init(&s->pids);
	return &s->base;
}
