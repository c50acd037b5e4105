/* Tests of the read layer's JSON side: the strict parser, exact timestamps, a hand-written
 * torch.profiler (Kineto) trace read back with its every track, slice, flow and time known,
 * every file of tests/data through cuptrace's Chrome JSON and back with equal counts, the
 * torch.profiler traces of tests/data, format sniffing, and corrupt, cut and foreign inputs. */
#define _GNU_SOURCE
#include "check.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <unistd.h>
#include <zlib.h>

#include "common/log.h"
#include "stats/stats.h"
#include "format/formats.h"
#include "read/json_parse.h"
#include "read/read.h"
#include "read/read_file.h"
#include "rec_sink.h"

static char last_log[1024];
static int log_count;

static void capture_log(enum cuptrace_log_level level, const char *msg)
{
	(void)level;
	snprintf(last_log, sizeof(last_log), "%s", msg);
	log_count++;
}

static const char *data_dir(void)
{
	const char *d = getenv("CUPTRACE_TEST_DATA");
	return d ? d : "tests/data";
}

static void tmp_path(char *buf, size_t n, const char *name)
{
	const char *d = getenv("CUPTRACE_TMP");
	snprintf(buf, n, "%s/json-%d-%s", d ? d : "/tmp", (int)getpid(), name);
}

/* The whole file, NUL-terminated after its bytes; NULL if unreadable. */
static char *slurp(const char *path, size_t *len)
{
	uint8_t *b;
	return cuptrace_read_file_all(path, &b, len) ? NULL : (char *)b;
}

/* cuptrace_json_read_mem on a file's bytes. */
static int json_file(const char *path, struct cuptrace_sink *s, struct cuptrace_json_check *ck)
{
	size_t n;
	char *b = slurp(path, &n);
	int r = b ? cuptrace_json_read_mem(b, n, path, s, ck) : -ENOENT;
	free(b);
	return r;
}

static void spit(const char *path, const void *data, size_t len, int gz)
{
	if (gz) {
		gzFile g = gzopen(path, "wb");
		CHECK(g != NULL);
		CHECK_EQ_INT(gzwrite(g, data, (unsigned)len), (int)len);
		gzclose(g);
		return;
	}
	FILE *f = fopen(path, "wb");
	CHECK(f != NULL);
	CHECK_EQ_INT(fwrite(data, 1, len, f), len);
	fclose(f);
}

/* ---- the parser ---- */

static int parse_all(const char *text, char *err, size_t n)
{
	struct jp j;
	jp_init(&j, text, strlen(text), "doc.json");
	int r = jp_skip(&j);
	if (!r)
		r = jp_finish(&j);
	snprintf(err, n, "%s", jp_error(&j));
	jp_free(&j);
	return r;
}

static void test_parser_grammar(void)
{
	static const char *const good[] = {
	    "0",
	    "-0",
	    "12",
	    "-1.5e3",
	    "1E-2",
	    "1.25e+10",
	    "123456789012345678901234567890",
	    "\"\"",
	    "\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\\u00e9\"",
	    "true",
	    "false",
	    "null",
	    "[]",
	    "{}",
	    " [ 1 , {\"a\" : [ ] } ] ",
	    "\"tab\tinside\"",
	    "\"\xff\xfe invalid utf-8\"",
	};
	static const struct {
		const char *text, *what;
	} bad[] = {
	    {"01", "leading zero"},
	    {"1.", "no digit after its '.'"},
	    {".5", "expected a value"},
	    {"+1", "expected a value"},
	    {"1e", "no digit in its exponent"},
	    {"-", "a '-' without digits"},
	    {"[1,]", "trailing comma"},
	    {"{\"a\":1,}", "trailing comma"},
	    {"{'a':1}", "member name"},
	    {"NaN", "expected a value"},
	    {"[1 2]", "expected ',' or ']'"},
	    {"{\"a\" 1}", "expected ':'"},
	    {"\"a\nb\"", "control character"},
	    {"\"\\x\"", "bad escape"},
	    {"\"\\u12g4\"", "bad \\u escape"},
	    {"tru", "ends inside 'true'"},
	    {"trve", "expected 'true'"},
	    {"[1] x", "after the end"},
	    {"[1", "ends inside an array"},
	    {"\"abc", "ends inside a string"},
	    {"", "ends where a value should be"},
	};
	char err[512];
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		int r = parse_all(good[i], err, sizeof(err));
		CHECK_EQ_INT(r, 0);
		if (r)
			fprintf(stderr, "  good[%zu]: %s\n", i, err);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK_EQ_INT(parse_all(bad[i].text, err, sizeof(err)), -1);
		CHECK(strstr(err, bad[i].what) != NULL);
		CHECK(!strncmp(err, "doc.json: line 1, column ", 25));
		if (!strstr(err, bad[i].what))
			fprintf(stderr, "  bad[%zu] %s: %s\n", i, bad[i].text, err);
	}
	/* Line and column of an error on a later line. */
	CHECK_EQ_INT(parse_all("[\n  1,\n  2,,\n]", err, sizeof(err)), -1);
	CHECK(strstr(err, "doc.json: line 3, column 5 (byte 11)") != NULL);
	/* Nesting is bounded: 64 levels are fine, 65 are not, a million fail fast. */
	char deep[200000];
	memset(deep, '[', 64);
	memset(deep + 64, ']', 64);
	deep[128] = 0;
	CHECK_EQ_INT(parse_all(deep, err, sizeof(err)), 0);
	memset(deep, '[', 65);
	memset(deep + 65, ']', 65);
	deep[130] = 0;
	CHECK_EQ_INT(parse_all(deep, err, sizeof(err)), -1);
	CHECK(strstr(err, "nested deeper than 64") != NULL);
	memset(deep, '[', sizeof(deep) - 1);
	deep[sizeof(deep) - 1] = 0;
	CHECK_EQ_INT(parse_all(deep, err, sizeof(err)), -1);
}

static void test_parser_values(void)
{
	static const char doc[] = "{\"k\\u00e9y\": \"\\ud83d\\ude00 \\ud800x \\u0000\", \"n\": [0, "
	                          "-7, 9223372036854775807, -9223372036854775808, "
	                          "9223372036854775808, 2.5, -1e999], \"b\": true}";
	struct jp j;
	const char *k, *s;
	size_t kn, n;
	struct jnum num;
	int b;

	jp_init(&j, doc, strlen(doc), "v.json");
	CHECK_EQ_INT(jp_object_begin(&j), 0);
	CHECK_EQ_INT(jp_object_next(&j, &k, &kn), 1);
	CHECK_EQ_STR(k, "k\xc3\xa9y");
	CHECK_EQ_INT(jp_string(&j, &s, &n), 0);
	/* A pair is one code point; a lone surrogate and NUL become U+FFFD. */
	CHECK_EQ_STR(s, "\xf0\x9f\x98\x80 \xef\xbf\xbdx \xef\xbf\xbd");
	CHECK_EQ_INT(jp_object_next(&j, &k, &kn), 1);
	CHECK_EQ_STR(k, "n");
	CHECK_EQ_INT(jp_array_begin(&j), 0);
	static const struct {
		int is_int;
		int64_t i;
		double d;
	} want[] = {{1, 0, 0},
	            {1, -7, -7},
	            {1, INT64_MAX, 0},
	            {1, INT64_MIN, 0},
	            {0, 0, 9223372036854775808.0},
	            {0, 0, 2.5},
	            {0, 0, -HUGE_VAL}};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		CHECK_EQ_INT(jp_array_next(&j), 1);
		CHECK_EQ_INT(jp_number(&j, &num), 0);
		CHECK_EQ_INT(num.is_int, want[i].is_int);
		if (want[i].is_int)
			CHECK(num.i == want[i].i);
		else
			CHECK(num.d == want[i].d);
	}
	CHECK_EQ_INT(jp_array_next(&j), 0);
	CHECK_EQ_INT(jp_object_next(&j, &k, &kn), 1);
	CHECK_EQ_INT(jp_bool(&j, &b), 0);
	CHECK_EQ_INT(b, 1);
	CHECK_EQ_INT(jp_object_next(&j, &k, &kn), 0);
	CHECK_EQ_INT(jp_finish(&j), 0);
	jp_free(&j);

	char out[64];
	static const char raw[] = "[ 1, {\"a b\" : \" x \\\" y \"} ]";
	CHECK_EQ_INT(json_compact(raw, strlen(raw), out, sizeof(out)), 22);
	CHECK_EQ_STR(out, "[1,{\"a b\":\" x \\\" y \"}]");
	CHECK_EQ_INT(json_compact(raw, strlen(raw), out, 5), 0);
}

static void test_scaled(void)
{
	static const struct {
		const char *text;
		int pow10;
		int ok;
		int64_t want;
	} c[] = {
	    {"1234.567", 3, 1, 1234567},
	    {"4572529179385.894", 3, 1, 4572529179385894},
	    {"0", 3, 1, 0},
	    {"-0.0", 3, 1, 0},
	    {"0.0005", 3, 1, 1},
	    {"0.0004999", 3, 1, 0},
	    {"0.00005", 3, 1, 0},
	    {"-1.5", 0, 1, -2},
	    {"1.5e3", 3, 1, 1500000},
	    {"15E-1", 3, 1, 1500},
	    {"1234567890.1234567890123", 3, 1, 1234567890123},
	    {"9223372036854775.807", 3, 1, INT64_MAX},
	    {"-9223372036854775.808", 3, 1, INT64_MIN},
	    {"9223372036854775.808", 3, 0, 0},
	    {"123456789012345678901234567890", 3, 0, 0},
	    {"1e400", 3, 0, 0},
	    {"1e-400", 3, 1, 0},
	    {"0.000000000000000000000000000001e30", 3, 1, 1000},
	};
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		struct jp j;
		struct jnum n;
		int64_t v = 42;
		jp_init(&j, c[i].text, strlen(c[i].text), "n");
		CHECK_EQ_INT(jp_number(&j, &n), 0);
		int r = jnum_scaled(&n, c[i].pow10, &v);
		CHECK_EQ_INT(r, c[i].ok ? 0 : -1);
		if (c[i].ok && v != c[i].want)
			fprintf(stderr, "  %s: %lld, want %lld\n", c[i].text, (long long)v,
			        (long long)c[i].want);
		if (c[i].ok)
			CHECK(v == c[i].want);
		jp_free(&j);
	}
}

/* ---- a hand-written torch.profiler trace ---- */

/* tests/data/handmade.kineto.json: a torch.profiler trace written by hand in Kineto's layout,
 * every number of it known. Times are µs; the earliest event is at 999 µs. */
static char *KINETO;
static size_t KINETO_LEN;

static void load_kineto(void)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s/handmade.kineto.json", data_dir());
	KINETO = slurp(path, &KINETO_LEN);
	CHECK(KINETO != NULL);
	if (!KINETO) {
		KINETO = strdup("");
		KINETO_LEN = 0;
	}
}

static const struct rslice *slice_named(const struct rec_sink *s, const char *name, const char *cat)
{
	for (size_t i = 0; i < s->nslices; i++)
		if (!strcmp(s->slices[i].name, name) && (!cat || !strcmp(s->slices[i].cat, cat)))
			return &s->slices[i];
	return NULL;
}

static const struct rtrack *track_of(const struct rec_sink *s, uint64_t uuid)
{
	for (size_t i = 0; i < s->ntracks; i++)
		if (s->tracks[i].t.uuid == uuid)
			return &s->tracks[i];
	return NULL;
}

static void check_kineto(const struct rec_sink *s, const struct cuptrace_json_check *ck)
{
	CHECK(s->begun);
	CHECK_EQ_INT(s->track_before_use_violations, 0);
	CHECK_EQ_INT(ck->cuptrace, 0);
	CHECK_EQ_INT(ck->events, 33);
	CHECK_EQ_INT(ck->slices, 13);
	CHECK_EQ_INT(ck->instants, 2);
	CHECK_EQ_INT(ck->counters, 0);
	CHECK_EQ_INT(ck->flows, 4);
	CHECK_EQ_INT(ck->flows_dangling, 1); /* fwdbwd 8: a start with no end */
	CHECK_EQ_INT(ck->flows_unbound, 0);
	CHECK_EQ_INT(ck->skipped, 1); /* the 'P' (a sample) */
	CHECK_EQ_INT(ck->lanes, 1);
	CHECK_EQ_INT(s->nslices, 13);
	CHECK_EQ_INT(s->ninstants, 2);

	/* Info: the host process, Kineto's clock base plus the earliest event, its trace_id. */
	CHECK_EQ_INT(s->pid, 4242);
	CHECK_EQ_STR(s->process_name, "python3");
	CHECK(s->start_realtime_ns == 1700000000000000000ll + 999000);
	CHECK(s->uuid_hi == 0x6C6F34D57E3348CFull && s->uuid_lo == 0x8F38AA7CEA9E244Aull);
	CHECK_EQ_STR(rec_meta(s, "gpu0"),
	             "NVIDIA H100 80GB HBM3, compute capability 9.0, 132 SMs, 79.2 GiB");
	CHECK_EQ_STR(rec_meta(s, "cuda_driver_api_version"), "13.0");
	CHECK_EQ_STR(rec_meta(s, "schemaVersion"), "1");
	CHECK_EQ_STR(rec_meta(s, "distributedInfo"), "{\"backend\":\"nccl\",\"rank\":0}");
	CHECK_EQ_STR(rec_meta(s, "trace_format"), "torch.profiler (Kineto) JSON");
	CHECK_EQ_STR(rec_meta(s, "json_dropped_events"), "1");
	CHECK_EQ_STR(rec_meta(s, "json_overlap_lanes"), "1");

	/* Tracks: only those with events (and their parents); GPU 1 has none. */
	CHECK_EQ_INT(s->ntracks, 8);
	const struct rslice *k = slice_named(s, "void add_kernel<float>(float*, int)", "kernel");
	const struct rslice *launch = slice_named(s, "cudaLaunchKernel", "cuda_runtime");
	const struct rslice *cp = slice_named(s, "Memcpy HtoD (Pageable -> Device)", "memcpy");
	const struct rslice *ms = slice_named(s, "Memset (Device)", "memset");
	const struct rslice *cpy = slice_named(s, "cudaMemcpyAsync", "cuda_runtime");
	const struct rslice *drv = slice_named(s, "cuMemsetD32Async", "cuda_driver");
	const struct rslice *add = slice_named(s, "aten::add", "cpu_op");
	const struct rslice *part = slice_named(s, "aten::partial", "cpu_op");
	const struct rslice *over = slice_named(s, "aten::overlap", "cpu_op");
	CHECK(k && launch && cp && ms && cpy && drv && add && part && over);
	CHECK(slice_named(s, "step", "user_annotation") &&
	      slice_named(s, "step", "gpu_user_annotation"));
	CHECK(slice_named(s, "train.py(10): main", "python_function"));
	CHECK(slice_named(s, "PyTorch Profiler (0)", "Trace"));
	if (!k || !launch || !cp || !ms || !cpy || !drv || !add || !part || !over)
		return;
	const struct rtrack *stream = track_of(s, k->track);
	const struct rtrack *gpu = stream ? track_of(s, stream->t.parent_uuid) : NULL;
	const struct rtrack *thr = track_of(s, launch->track);
	const struct rtrack *proc = thr ? track_of(s, thr->t.parent_uuid) : NULL;
	CHECK(stream && gpu && thr && proc);
	if (!stream || !gpu || !thr || !proc)
		return;
	CHECK_EQ_INT(stream->t.kind, CUPTRACE_TRACK_SLICES);
	CHECK_EQ_STR(stream->name, "Stream 7");
	CHECK_EQ_INT(stream->t.sort_rank, 7);
	CHECK_EQ_INT(gpu->t.kind, CUPTRACE_TRACK_GROUP);
	CHECK_EQ_STR(gpu->name, "GPU 0: NVIDIA H100 80GB HBM3");
	CHECK(gpu->t.parent_uuid == proc->t.uuid);
	CHECK_EQ_INT(thr->t.kind, CUPTRACE_TRACK_THREAD);
	CHECK_EQ_STR(thr->name, "thread 4242 (python3)");
	CHECK_EQ_INT(thr->t.tid, 4242);
	CHECK_EQ_INT(thr->t.sort_rank, 0);
	CHECK_EQ_INT(proc->t.kind, CUPTRACE_TRACK_PROCESS);
	CHECK_EQ_INT(proc->t.pid, 4242);
	CHECK_EQ_STR(proc->name, "python3");
	CHECK(cp->track == k->track && ms->track == k->track);
	/* The partial overlap goes to a lane of its thread's name. */
	const struct rtrack *t43 = track_of(s, over->track), *lane = track_of(s, part->track);
	CHECK(t43 && lane && t43 != lane);
	if (t43 && lane) {
		CHECK_EQ_STR(t43->name, "thread 4243 (pt_autograd_0)");
		CHECK_EQ_INT(lane->t.kind, CUPTRACE_TRACK_SLICES);
		CHECK_EQ_INT(lane->t.lane, 0); /* the first slice track of that name */
		CHECK_EQ_STR(lane->name, "thread 4243 (pt_autograd_0)");
		CHECK(lane->t.parent_uuid == proc->t.uuid);
	}
	/* String pids and tids: a process and thread of those names, synthetic ids. */
	const struct rslice *span = slice_named(s, "PyTorch Profiler (0)", NULL);
	const struct rtrack *st = span ? track_of(s, span->track) : NULL;
	const struct rtrack *sp = st ? track_of(s, st->t.parent_uuid) : NULL;
	CHECK(st && sp);
	if (st && sp) {
		CHECK_EQ_STR(st->name, "PyTorch Profiler");
		CHECK_EQ_STR(sp->name, "Spans");
		CHECK(sp->t.pid >= 4194304 && st->t.tid >= 4194304);
	}

	/* Times in ns from the earliest event (999 µs), exactly. */
	CHECK_EQ_INT(k->ts, 9123);
	CHECK_EQ_INT(k->dur, 3456);
	CHECK_EQ_INT(ms->ts, 34000);
	CHECK_EQ_INT(ms->dur, 1);
	CHECK_EQ_INT(launch->ts, 3000);
	CHECK_EQ_INT(launch->dur, 5000);
	CHECK_EQ_INT(drv->dur, 2500);
	CHECK_EQ_INT(span->ts, 0);
	CHECK_EQ_INT(s->inst[0].ts, 0); /* the global instant, on the main process */
	CHECK_EQ_STR(s->inst[0].name, "Iteration Start: PyTorch Profiler");
	CHECK(s->inst[0].track == proc->t.uuid);
	CHECK_EQ_INT(s->inst[1].ts, 41000);
	CHECK(s->inst[1].track == thr->t.uuid);

	/* Flows: out on the call, in on its GPU work; correlation ids from "correlation". */
	CHECK_EQ_INT(launch->nout, 1);
	CHECK_EQ_INT(k->nin, 1);
	CHECK(launch->out[0] == k->in && k->in);
	CHECK(cpy->nout == 1 && cp->nin == 1 && cpy->out[0] == cp->in);
	CHECK(drv->nout == 1 && ms->nin == 1 && drv->out[0] == ms->in);
	CHECK(add->nout == 1 && part->nin == 1 && add->out[0] == part->in);
	CHECK(launch->out[0] != cpy->out[0] && cpy->out[0] != drv->out[0]);
	CHECK_EQ_INT(launch->corr, 101);
	CHECK_EQ_INT(k->corr, 101);
	CHECK_EQ_INT(ms->corr, 103);

	/* Args kept with their types; nested values as compact JSON. */
	CHECK(strstr(k->args, "registers per thread=32;") != NULL);
	CHECK(strstr(k->args, "blocks per SM=0.500;") != NULL);
	CHECK(strstr(k->args, "grid=[128,1,1];") != NULL);
	CHECK(strstr(k->args, "correlation=101;") != NULL);
	CHECK(strstr(add->args, "Input Dims=[[32,64],[32,64]];") != NULL);
	CHECK(strstr(cp->args, "bytes=1048576;memory bandwidth (GB/s)=524.288;") != NULL);
}

static void test_kineto_handwritten(void)
{
	struct cuptrace_json_check ck;
	struct rec_sink *s = rec_sink_new();
	CHECK_EQ_INT(cuptrace_json_read_mem(KINETO, KINETO_LEN, "hand.json", &s->base, &ck), 0);
	check_kineto(s, &ck);
	r_destroy(&s->base);

	/* The same gzipped, from a file, through the dispatch. */
	char path[512];
	tmp_path(path, sizeof(path), "hand.json.gz");
	spit(path, KINETO, KINETO_LEN, 1);
	s = rec_sink_new();
	CHECK_EQ_INT(json_file(path, &s->base, &ck), 0);
	check_kineto(s, &ck);
	r_destroy(&s->base);
	s = rec_sink_new();
	CHECK_EQ_INT(cuptrace_read_trace(path, &s->base, 0), 0);
	CHECK_EQ_INT(s->nslices, 13);
	r_destroy(&s->base);
	unlink(path);
}

/* ---- counts through the stats sink ---- */

static int stats_of(const char *path, struct cuptrace_stats *st)
{
	memset(st, 0, sizeof(*st));
	struct cuptrace_sink *s = cuptrace_stats_sink_new(st);
	int r = cuptrace_read_trace(path, s, 0);
	if (!r)
		r = s->ops->finish(s);
	cuptrace_sink_destroy(s);
	return r;
}

static int convert(const char *in, const char *out)
{
	struct cuptrace_sink *s = cuptrace_sink_open(out, NULL, NULL);
	if (!s)
		return -errno;
	int r = cuptrace_read_trace(in, s, 0);
	int f = s->ops->finish(s);
	cuptrace_sink_destroy(s);
	return r ? r : f;
}

/* Everything the stats sink counts that a format conversion must keep. */
static int same_stats(const struct cuptrace_stats *a, const struct cuptrace_stats *b,
                      const char *what)
{
	int bad = 0;
#define SAME(f)                                                                                    \
	do {                                                                                       \
		if (a->f != b->f) {                                                                \
			fprintf(stderr, "  %s: " #f " %lld != %lld\n", what, (long long)a->f,      \
			        (long long)b->f);                                                  \
			bad = 1;                                                                   \
		}                                                                                  \
	} while (0)
	SAME(tracks);
	SAME(slices);
	SAME(instants);
	SAME(counters);
	SAME(flows);
	SAME(flows_dangling);
	SAME(gpu_slices);
	SAME(gpu_slices_with_flow_in);
	SAME(gpu_busy_ns);
	SAME(min_ts);
	SAME(max_ts);
	SAME(nnames);
	SAME(ntrk);
	for (size_t i = 0; !bad && i < a->nnames; i++) {
		SAME(names[i].count);
		SAME(names[i].total_ns);
		if (strcmp(a->names[i].name, b->names[i].name) ||
		    strcmp(a->names[i].category ? a->names[i].category : "",
		           b->names[i].category ? b->names[i].category : "")) {
			fprintf(stderr, "  %s: name %zu %s != %s\n", what, i, a->names[i].name,
			        b->names[i].name);
			bad = 1;
		}
	}
	/* Tracks by kind and name, in any order: counter tracks, declared in the JSON where their
	 * first value is, may come earlier or later than in the original. */
	char *used = calloc(b->ntrk + 1, 1);
	for (size_t i = 0; !bad && i < a->ntrk; i++) {
		const struct cuptrace_stats_track *x = &a->trk[i];
		size_t k;
		for (k = 0; k < b->ntrk; k++) {
			const struct cuptrace_stats_track *y = &b->trk[k];
			if (!used[k] && x->kind == y->kind && x->lane == y->lane &&
			    !strcmp(x->name, y->name) && x->slices == y->slices &&
			    x->instants == y->instants && x->counters == y->counters &&
			    x->busy_ns == y->busy_ns &&
			    x->partial_overlaps == y->partial_overlaps &&
			    (x->sort_rank == y->sort_rank || x->kind == CUPTRACE_TRACK_COUNTER))
				break;
		}
		if (k == b->ntrk) {
			fprintf(stderr, "  %s: no track like %s (kind %d, %" PRIu64 " slices)\n",
			        what, x->name, (int)x->kind, x->slices);
			bad = 1;
		} else {
			used[k] = 1;
		}
	}
	free(used);
#undef SAME
	return !bad;
}

/* Every capture of tests/data: as read from the capture, from its Chrome JSON (.json.gz) and from
 * its Perfetto trace; and Perfetto -> JSON -> Perfetto gives what the first Perfetto trace held. */
static void test_data_roundtrips(void)
{
	DIR *d = opendir(data_dir());
	struct dirent *e;
	int n = 0;

	CHECK(d != NULL);
	while (d && (e = readdir(d))) {
		size_t l = strlen(e->d_name);
		if (l < 7 || strcmp(e->d_name + l - 6, ".cupti"))
			continue;
		char cap[1024], js[512], pf[512], js2[512], pf2[512];
		struct cuptrace_stats a, b, c, dd;
		snprintf(cap, sizeof(cap), "%s/%s", data_dir(), e->d_name);
		tmp_path(js, sizeof(js), "rt.json.gz");
		tmp_path(pf, sizeof(pf), "rt.pftrace");
		tmp_path(js2, sizeof(js2), "rt2.json");
		tmp_path(pf2, sizeof(pf2), "rt2.pftrace");
		CHECK_EQ_INT(convert(cap, js), 0);
		CHECK_EQ_INT(convert(cap, pf), 0);
		CHECK_EQ_INT(convert(pf, js2), 0);
		CHECK_EQ_INT(convert(js2, pf2), 0);
		CHECK_EQ_INT(stats_of(cap, &a), 0);
		CHECK_EQ_INT(stats_of(js, &b), 0);
		CHECK_EQ_INT(stats_of(pf, &c), 0);
		CHECK_EQ_INT(stats_of(pf2, &dd), 0);
		CHECK(a.slices > 0);
		CHECK(same_stats(&a, &b, e->d_name));
		CHECK(same_stats(&a, &c, e->d_name));
		CHECK(same_stats(&c, &dd, e->d_name));
		struct cuptrace_json_check ck;
		CHECK_EQ_INT(json_file(js2, NULL, &ck), 0);
		CHECK_EQ_INT(ck.cuptrace, 1);
		CHECK(ck.slices == c.slices && ck.flows == c.flows && ck.counters == c.counters);
		CHECK_EQ_INT(ck.skipped + ck.lanes + ck.flows_unbound + ck.negative_dur, 0);
		cuptrace_stats_free(&a);
		cuptrace_stats_free(&b);
		cuptrace_stats_free(&c);
		cuptrace_stats_free(&dd);
		unlink(js);
		unlink(pf);
		unlink(js2);
		unlink(pf2);
		n++;
	}
	if (d)
		closedir(d);
	CHECK(n >= 10);
}

/* The real torch.profiler traces of tests/data, counted in the files with Python's json module:
 * torch_small (tests/gpu/kineto_small.py) and torch_stack (tests/gpu/kineto_stack.py: with
 * Python stacks, whose record_function ranges partially overlap 18 Python frames). */
static const struct real_trace {
	const char *file;
	uint64_t slices, instants, flows, dangling, gpu, gpu_in, lanes;
	uint64_t kernel, memcpy, memset, runtime, cpu_op, python;
} real[] = {
    {"torch_small.kineto.json.gz", 416, 2, 84, 5, 72, 66, 0, 60, 0, 6, 68, 261, 0},
    {"torch_stack.kineto.json.gz", 4651, 431, 312, 57, 246, 237, 1, 228, 9, 0, 270, 1344, 2754},
};

static uint64_t category_count(const struct cuptrace_stats *st, const char *cat)
{
	uint64_t n = 0;
	for (size_t i = 0; i < st->nnames; i++)
		if (st->names[i].category && !strcmp(st->names[i].category, cat))
			n += st->names[i].count;
	return n;
}

static void check_real(const struct real_trace *t, const struct cuptrace_stats *a,
                       const struct cuptrace_json_check *ck)
{
	CHECK_EQ_INT(a->slices, t->slices);
	CHECK_EQ_INT(a->instants, t->instants);
	CHECK_EQ_INT(a->flows, t->flows);
	CHECK_EQ_INT(ck->flows_dangling, t->dangling);
	CHECK_EQ_INT(a->gpu_slices, t->gpu);
	CHECK_EQ_INT(a->gpu_slices_with_flow_in, t->gpu_in);
	CHECK_EQ_INT(ck->lanes, t->lanes);
	CHECK_EQ_INT(ck->overlaps_dropped + ck->skipped + ck->flows_unbound, 0);
	CHECK_EQ_INT(category_count(a, "kernel"), t->kernel);
	CHECK_EQ_INT(category_count(a, "memcpy"), t->memcpy);
	CHECK_EQ_INT(category_count(a, "memset"), t->memset);
	CHECK_EQ_INT(category_count(a, "cuda_runtime"), t->runtime);
	CHECK_EQ_INT(category_count(a, "cpu_op"), t->cpu_op);
	CHECK_EQ_INT(category_count(a, "python_function"), t->python);
	CHECK_EQ_INT(category_count(a, "gpu_memcpy") + category_count(a, "gpu_memset"), 0);
}

/* Every JSON file of tests/data: the torch.profiler traces (*.kineto.json*) read with GPU work,
 * flows into it and no partial overlap, and keep their counts through cuptrace's JSON and
 * Perfetto; other JSON there is no trace and must say so. The real ones of real[] are checked
 * exactly where present. */
static void test_data_json(void)
{
	DIR *d = opendir(data_dir());
	struct dirent *e;
	int kineto = 0;

	cuptrace_log_fn prev = cuptrace_log_set(capture_log);
	while (d && (e = readdir(d))) {
		if (!strstr(e->d_name, ".json"))
			continue;
		char path[1024];
		struct cuptrace_json_check ck;
		snprintf(path, sizeof(path), "%s/%s", data_dir(), e->d_name);
		if (!strstr(e->d_name, ".kineto.json")) {
			/* torch_train.profiler.json: torch.profiler's numbers, not a trace. */
			last_log[0] = 0;
			CHECK_EQ_INT(json_file(path, NULL, &ck), -EINVAL);
			CHECK(strstr(last_log, e->d_name) && strstr(last_log, "traceEvents"));
			continue;
		}
		kineto++;
		struct cuptrace_stats a, b, c;
		char js[512], pf[512];
		tmp_path(js, sizeof(js), "k.json.gz");
		tmp_path(pf, sizeof(pf), "k.pftrace");
		CHECK_EQ_INT(json_file(path, NULL, &ck), 0);
		CHECK_EQ_INT(ck.cuptrace, 0);
		CHECK_EQ_INT(stats_of(path, &a), 0);
		CHECK_EQ_INT(convert(path, js), 0);
		CHECK_EQ_INT(convert(js, pf), 0);
		CHECK_EQ_INT(stats_of(js, &b), 0);
		CHECK_EQ_INT(stats_of(pf, &c), 0);
		CHECK(a.gpu_slices > 0 && a.gpu_slices_with_flow_in > 0 && a.flows > 0);
		CHECK(same_stats(&a, &b, e->d_name));
		CHECK(same_stats(&a, &c, e->d_name));
		for (size_t i = 0; i < a.ntrk; i++)
			CHECK_EQ_INT(a.trk[i].partial_overlaps, 0);
		for (size_t k = 0; k < sizeof(real) / sizeof(real[0]); k++)
			if (!strcmp(e->d_name, real[k].file))
				check_real(&real[k], &a, &ck);
		cuptrace_stats_free(&a);
		cuptrace_stats_free(&b);
		cuptrace_stats_free(&c);
		unlink(js);
		unlink(pf);
	}
	if (d)
		closedir(d);
	cuptrace_log_set(prev);
	if (!kineto)
		printf(
		    "note: no *.kineto.json* in %s: only the hand-written Kineto trace was read\n",
		    data_dir());
}

/* ---- sniffing ---- */

static void test_sniff(void)
{
	CHECK_EQ_INT(cuptrace_sniff("CUPTCAP\0\1\0\0\0", 12), CUPTRACE_FORMAT_CAPTURE);
	CHECK_EQ_INT(cuptrace_sniff("\x0a\x05\x40\x01\x50\x01\x02", 7), CUPTRACE_FORMAT_PERFETTO);
	CHECK_EQ_INT(cuptrace_sniff("", 0), CUPTRACE_FORMAT_PERFETTO);
	CHECK_EQ_INT(cuptrace_sniff("[{\"ph\":\"X\"}]", 12), CUPTRACE_FORMAT_JSON);
	CHECK_EQ_INT(cuptrace_sniff("\n  {\n \"schemaVersion\"", 21), CUPTRACE_FORMAT_JSON);
	CHECK_EQ_INT(cuptrace_sniff("\xef\xbb\xbf[]", 5), CUPTRACE_FORMAT_JSON);
	CHECK_EQ_INT(cuptrace_sniff("\x0a{\x08\x01", 4), CUPTRACE_FORMAT_PERFETTO);
	CHECK_EQ_INT(cuptrace_sniff("MZ\x90\x00", 4), CUPTRACE_FORMAT_UNKNOWN);
	CHECK_EQ_INT(cuptrace_sniff("hello", 5), CUPTRACE_FORMAT_UNKNOWN);
	/* gzip: by what it inflates to. */
	char path[512];
	size_t n;
	tmp_path(path, sizeof(path), "sniff.gz");
	spit(path, KINETO, KINETO_LEN, 1);
	char *gz = slurp(path, &n);
	CHECK_EQ_INT(cuptrace_sniff(gz, n), CUPTRACE_FORMAT_JSON);
	free(gz);
	spit(path, "\x0a\x02\x40\x01", 4, 1);
	gz = slurp(path, &n);
	CHECK_EQ_INT(cuptrace_sniff(gz, n), CUPTRACE_FORMAT_PERFETTO);
	free(gz);
	unlink(path);
}

/* ---- bad input ---- */

static int read_quiet(const char *data, size_t len, struct cuptrace_json_check *ck)
{
	struct cuptrace_stats st;
	memset(&st, 0, sizeof(st));
	struct cuptrace_sink *s = cuptrace_stats_sink_new(&st);
	int r = cuptrace_json_read_mem(data, len, "bad.json", s, ck);
	if (!r)
		CHECK_EQ_INT(s->ops->finish(s), 0);
	cuptrace_sink_destroy(s);
	cuptrace_stats_free(&st);
	return r;
}

static void test_bad_input(void)
{
	static const struct {
		const char *text, *what;
	} c[] = {
	    {"hello", "expected a value"},
	    {"{\"a\": 1}", "without \"traceEvents\""},
	    {"{\"traceEvents\": 5}", "\"traceEvents\" is not an array"},
	    {"[1, 2, \"x\"]", "none of the 3 elements"},
	    {"\"just a string\"", "not a trace"},
	    {"{\"traceEvents\": [{\"ph\": \"X\", \"ts\": 1,}]}", "trailing comma"},
	    {"[{\"ph\":\"X\",\"ts\":1}] [", "after the end"},
	};
	cuptrace_log_fn prev = cuptrace_log_set(capture_log);
	struct cuptrace_json_check ck;
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		last_log[0] = 0;
		CHECK_EQ_INT(read_quiet(c[i].text, strlen(c[i].text), &ck), -EINVAL);
		CHECK(strstr(last_log, "bad.json") && strstr(last_log, c[i].what));
		if (!strstr(last_log, c[i].what))
			fprintf(stderr, "  case %zu: %s\n", i, last_log);
	}
	/* An object whose events are cut after a whole event keeps it (torch.profiler's form,
	 * cut like the bare array). */
	static const char cut[] = "{\"traceEvents\": [{\"ph\": \"X\", \"ts\": 1, \"dur\": 2, "
	                          "\"pid\": 1, \"tid\": 1, \"name\": \"a\"}";
	CHECK_EQ_INT(read_quiet(cut, strlen(cut), &ck), 0);
	CHECK_EQ_INT(ck.truncated, 1);
	CHECK_EQ_INT(ck.slices, 1);
	/* Huge and tiny numbers: the events with such times are dropped, args keep them. */
	static const char nums[] =
	    "[{\"ph\":\"X\",\"ts\":1e400,\"pid\":1,\"tid\":1,\"name\":\"a\"},"
	    "{\"ph\":\"X\",\"ts\":123456789012345678901234567890,\"pid\":1,\"tid\":1},"
	    "{\"ph\":\"X\",\"ts\":5,\"dur\":-3,\"pid\":1,\"tid\":1,\"name\":\"ok\",\"args\":{"
	    "\"big\":123456789012345678901234567890,\"u\":18446744073709551615,\"neg\":-1e999,"
	    "\"tiny\":1e-999}}]";
	struct rec_sink *s = rec_sink_new();
	CHECK_EQ_INT(cuptrace_json_read_mem(nums, strlen(nums), "n.json", &s->base, &ck), 0);
	CHECK_EQ_INT(ck.slices, 1);
	CHECK_EQ_INT(ck.skipped, 2);
	CHECK_EQ_INT(ck.negative_dur, 1);
	CHECK_EQ_INT(s->nslices, 1);
	if (s->nslices) {
		CHECK_EQ_INT(s->slices[0].ts, 0);
		CHECK_EQ_INT(s->slices[0].dur, 0);
		CHECK(strstr(s->slices[0].args, "u=-1;") != NULL); /* UINT max, printed as int */
		CHECK(strstr(s->slices[0].args, "neg=-inf;") != NULL);
		CHECK(strstr(s->slices[0].args, "tiny=0.000;") != NULL);
	}
	r_destroy(&s->base);

	/* A cut gzip is read as far as it inflates, and a document cut inside its events (the
	 * object form too, torch.profiler's) up to its last whole event; a cut plain array
	 * (cuptrace's writer killed) likewise. */
	char path[512], gzpath[512];
	size_t n;
	struct cuptrace_json_check whole;
	CHECK_EQ_INT(read_quiet(KINETO, KINETO_LEN, &whole), 0);
	tmp_path(gzpath, sizeof(gzpath), "cut.json.gz");
	spit(gzpath, KINETO, KINETO_LEN, 1);
	char *gz = slurp(gzpath, &n);
	int r = read_quiet(gz, n / 2, &ck);
	if (r) /* the half that inflated ends before the first whole event */
		CHECK_EQ_INT(r, -EINVAL);
	else {
		CHECK_EQ_INT(ck.gz_damaged, 1);
		CHECK(ck.slices <= whole.slices);
	}
	gz[n / 2] ^= 0x55;
	r = read_quiet(gz, n, &ck);
	if (!r) {
		CHECK(ck.gz_damaged != 0 || ck.slices == whole.slices);
		CHECK(ck.slices <= whole.slices);
	}
	free(gz);
	unlink(gzpath);
	/* The object form cut 40 bytes before its end: every whole event, said cut. */
	r = read_quiet(KINETO, KINETO_LEN - 40, &ck);
	if (!r)
		CHECK(ck.truncated == 1 || ck.slices == whole.slices);
	else
		CHECK_EQ_INT(r, -EINVAL);

	tmp_path(path, sizeof(path), "cut.json");
	char cap[1024];
	snprintf(cap, sizeof(cap), "%s/vector_add.cupti", data_dir());
	CHECK_EQ_INT(convert(cap, path), 0);
	char *js = slurp(path, &n);
	size_t full = 0;
	CHECK_EQ_INT(read_quiet(js, n, &ck), 0);
	full = ck.slices;
	CHECK_EQ_INT(ck.truncated, 0);
	size_t prev_slices = 0, cuts = 0;
	/* From after the first event (an array cut before it is an error) to before "]\n". */
	for (size_t at = (size_t)(strchr(js, '\n') - js) + 1; at < n - 2; at += n / 97 + 1) {
		CHECK_EQ_INT(read_quiet(js, at, &ck), 0);
		if (!ck.truncated)
			fprintf(stderr, "  cut at %zu of %zu: %s\n", at, n, last_log);
		CHECK_EQ_INT(ck.truncated, 1);
		CHECK(ck.slices <= full && ck.slices >= prev_slices);
		prev_slices = ck.slices;
		cuts++;
	}
	CHECK(cuts > 50 && prev_slices > full / 2);
	free(js);
	unlink(path);
	cuptrace_log_set(prev);
}

/* Every byte of a Kineto and a cuptrace document changed, and every length cut: a clean
 * result or a clean error, never a crash (the sanitizer build runs this too). */
static void test_mutations(void)
{
	char path[512], cap[1024];
	size_t n;
	tmp_path(path, sizeof(path), "mut.json");
	snprintf(cap, sizeof(cap), "%s/nvtx.cupti", data_dir());
	CHECK_EQ_INT(convert(cap, path), 0);
	char *ours = slurp(path, &n);
	unlink(path);
	const struct {
		const char *data;
		size_t len;
	} docs[] = {{KINETO, KINETO_LEN}, {ours, ours ? n : 0}};
	static const char subst[] = {'"', '{', '}', '[', ']', ',', ':', '\\', '0',  '9',       '-',
	                             'e', 'X', 's', 'f', 'i', 'M', 'C', ' ',  '\0', (char)0xff};
	cuptrace_log_fn prev = cuptrace_log_set(capture_log);
	unsigned seed = 12345;
	long runs = 0, ok = 0;
	for (size_t d = 0; d < sizeof(docs) / sizeof(docs[0]); d++) {
		size_t len = docs[d].len;
		char *buf = malloc(len + 1);
		size_t step = len / 2000 + 1;
		for (size_t at = 0; at < len; at += step) {
			memcpy(buf, docs[d].data, len);
			seed = seed * 1103515245 + 12345;
			buf[at] = subst[(seed >> 16) % sizeof(subst)];
			struct cuptrace_json_check ck;
			int r = read_quiet(buf, len, &ck);
			CHECK(r == 0 || r == -EINVAL);
			ok += !r;
			runs++;
			r = read_quiet(buf, at, &ck);
			CHECK(r == 0 || r == -EINVAL);
		}
		free(buf);
	}
	cuptrace_log_set(prev);
	CHECK(runs > 2000 && ok > 0 && ok < runs);
	free(ours);
}

TEST_MAIN(T(load_kineto), T(test_parser_grammar), T(test_parser_values), T(test_scaled),
          T(test_kineto_handwritten), T(test_data_roundtrips), T(test_data_json), T(test_sniff),
          T(test_bad_input), T(test_mutations))
