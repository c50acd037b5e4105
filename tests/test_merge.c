/* Unit tests of `cuptrace merge --side-by-side`: synthetic runs (tests/steps.h) and real captures
 * merged into a Perfetto file, read back with the Perfetto reader: every slice, flow, counter
 * value and instant kept, uuids and pids unique, names, ranks, metadata, and each input's first
 * event and aligned slice where the shift puts them. */
#include "check.h"
#include "merge/merge.h"
#include "stats/stats.h"
#include "common/util.h"
#include "convert/convert.h"
#include "format/formats.h"
#include "read/read.h"
#include "steps.h"

#include <errno.h>
#include <unistd.h>

/* Inputs by path: "steps:N" feeds specs[N]; "fail" fails; anything else is a file. */
struct inputs {
	const struct steps_spec *specs;
	int replays;
};

static int replay(void *ctx, const char *path, struct cuptrace_sink *sink)
{
	struct inputs *in = ctx;
	in->replays++;
	if (!strncmp(path, "steps:", 6))
		return steps_feed(sink, &in->specs[atoi(path + 6)]);
	if (!strcmp(path, "fail"))
		return -EIO;
	return cuptrace_read_trace(path, sink, 0);
}

/* What the merged trace holds, per process (pid): its first event and the starts of its "step"
 * slices; filled by a sink that the Perfetto reader replays into, next to the stats sink. */
#define MAXP 8
struct seen {
	struct cuptrace_sink base;
	struct cuptrace_sink *stats;
	struct cuptrace_u64map pid_of; /* track uuid -> pid */
	int32_t pids[MAXP];
	int64_t first[MAXP], step[MAXP][8];
	size_t npids, nsteps[MAXP];
	/* instants of category "cuptrace" (each input's info and summary): name, pid of the
	 * track, and the arguments "merge_input", "pid", "process_name", "dropped_records_cupti" */
	struct minst {
		char name[96], input[64], pname[32];
		int32_t track_pid;
		int64_t pid, dropped, ts;
	} mi[16];
	size_t nmi;
	int64_t boottime, realtime; /* the clocks at relative 0, as read back */
};

static size_t pid_slot(struct seen *s, uint64_t track)
{
	uint64_t *v = cuptrace_u64map_get(&s->pid_of, track);
	int32_t pid = v ? (int32_t)*v : -1;
	size_t i = 0;
	while (i < s->npids && s->pids[i] != pid)
		i++;
	if (i == s->npids && i < MAXP) {
		s->pids[s->npids++] = pid;
		s->first[i] = INT64_MAX;
	}
	return i < MAXP ? i : MAXP - 1;
}

static void seen_at(struct seen *s, uint64_t track, int64_t ts)
{
	size_t i = pid_slot(s, track);
	if (ts < s->first[i])
		s->first[i] = ts;
}

static int sn_begin(struct cuptrace_sink *sk, const struct cuptrace_trace_info *info)
{
	struct seen *s = (struct seen *)sk;
	s->boottime = info->start_boottime_ns;
	s->realtime = info->start_realtime_ns;
	return s->stats->ops->begin(s->stats, info);
}

static int sn_track(struct cuptrace_sink *sk, const struct cuptrace_track *t)
{
	struct seen *s = (struct seen *)sk;
	uint64_t *v = cuptrace_u64map_put(&s->pid_of, t->uuid, NULL);
	if (v)
		*v = (uint32_t)t->pid;
	return s->stats->ops->track(s->stats, t);
}

static int sn_slice(struct cuptrace_sink *sk, const struct cuptrace_slice *e)
{
	struct seen *s = (struct seen *)sk;
	seen_at(s, e->track_uuid, e->ts);
	size_t i = pid_slot(s, e->track_uuid);
	if ((!strcmp(e->name, "step") || !strncmp(e->name, "ProfilerStep#", 13)) &&
	    s->nsteps[i] < 8)
		s->step[i][s->nsteps[i]++] = e->ts;
	return s->stats->ops->slice(s->stats, e);
}

static int sn_instant(struct cuptrace_sink *sk, const struct cuptrace_instant *e)
{
	struct seen *s = (struct seen *)sk;
	if (e->category && !strcmp(e->category, "cuptrace") && s->nmi < 16) {
		struct minst *x = &s->mi[s->nmi++];
		uint64_t *v = cuptrace_u64map_get(&s->pid_of, e->track_uuid);
		*x = (struct minst){.track_pid = v ? (int32_t)*v : -1, .pid = -1, .dropped = -1};
		x->ts = e->ts;
		snprintf(x->name, sizeof(x->name), "%s", e->name);
		for (size_t k = 0; k < e->nargs; k++) {
			const struct cuptrace_arg *a = &e->args[k];
			int str = a->type == CUPTRACE_ARG_STRING;
			int64_t i = a->type == CUPTRACE_ARG_INT ? a->v.i : (int64_t)a->v.u;
			if (!strcmp(a->key, "merge_input") && str)
				snprintf(x->input, sizeof(x->input), "%s", a->v.s);
			else if (!strcmp(a->key, "process_name") && str)
				snprintf(x->pname, sizeof(x->pname), "%s", a->v.s);
			else if (!strcmp(a->key, "pid"))
				x->pid = str ? atoll(a->v.s) : i;
			else if (!strcmp(a->key, "dropped_records_cupti"))
				x->dropped = str ? atoll(a->v.s) : i;
		}
	}
	seen_at(s, e->track_uuid, e->ts);
	return s->stats->ops->instant(s->stats, e);
}

static int sn_counter(struct cuptrace_sink *sk, const struct cuptrace_counter *e)
{
	struct seen *s = (struct seen *)sk;
	seen_at(s, e->track_uuid, e->ts);
	return s->stats->ops->counter(s->stats, e);
}

static int sn_meta(struct cuptrace_sink *sk, const struct cuptrace_meta *m, size_t n)
{
	struct seen *s = (struct seen *)sk;
	return s->stats->ops->meta(s->stats, m, n);
}

static const struct cuptrace_sink_ops seen_ops = {.name = "seen",
                                                  .begin = sn_begin,
                                                  .track = sn_track,
                                                  .slice = sn_slice,
                                                  .instant = sn_instant,
                                                  .counter = sn_counter,
                                                  .meta = sn_meta};

/* Reads path back: stats into *st, positions into *sn, reader checks into *chk. */
static int read_back(const char *path, struct cuptrace_stats *st, struct seen *sn,
                     struct cuptrace_pf_check *chk)
{
	memset(sn, 0, sizeof(*sn));
	memset(chk, 0, sizeof(*chk));
	sn->base.ops = &seen_ops;
	cuptrace_u64map_init(&sn->pid_of);
	sn->stats = cuptrace_stats_sink_new(st);
	int pf = strstr(path, ".pftrace") != NULL;
	int r = !sn->stats ? -ENOMEM
	        : pf       ? cuptrace_perfetto_read(path, &sn->base, chk)
	                   : cuptrace_read_trace(path, &sn->base, 0);
	if (!r)
		r = sn->stats->ops->finish(sn->stats);
	cuptrace_sink_destroy(sn->stats);
	cuptrace_u64map_free(&sn->pid_of);
	return r;
}

static const char *tmp_path(const char *name, char *buf, size_t cap)
{
	const char *dir = getenv("CUPTRACE_TMP");
	snprintf(buf, cap, "%s/%s", dir ? dir : "/tmp", name);
	return buf;
}

/* Merges inputs into path (Perfetto); 0 or the first error. */
static int merge_to(const char *path, const struct cuptrace_merge_input *in, size_t n,
                    const struct cuptrace_merge_opts *o, struct inputs *ctx,
                    struct cuptrace_merge *m)
{
	int r = cuptrace_merge_plan(m, in, n, o, replay, ctx);
	if (r)
		return r;
	struct cuptrace_sink *sink = cuptrace_sink_open(path, NULL, NULL);
	if (!sink)
		return -errno;
	r = cuptrace_merge_write(m, replay, ctx, sink);
	int f = sink->ops->finish(sink);
	cuptrace_sink_destroy(sink);
	return r ? r : f;
}

static const struct cuptrace_meta *meta(const struct cuptrace_stats *st, const char *key)
{
	for (size_t i = 0; i < st->nmeta; i++)
		if (!strcmp(st->meta[i].key, key))
			return &st->meta[i];
	return NULL;
}

static const struct cuptrace_stats_track *process(const struct cuptrace_stats *st, const char *name)
{
	for (size_t i = 0; i < st->ntrk; i++)
		if (st->trk[i].kind == CUPTRACE_TRACK_PROCESS && !strcmp(st->trk[i].name, name))
			return &st->trk[i];
	return NULL;
}

static size_t slot_of(const struct seen *sn, int32_t pid)
{
	for (size_t i = 0; i < sn->npids; i++)
		if (sn->pids[i] == pid)
			return i;
	return MAXP;
}

/* Two runs of one program (same pid), starting at different times: each starts at 0, the
 * second gets another pid, nothing is lost or merged by mistake. */
static void test_side_by_side(void)
{
	struct steps_spec specs[2] = {STEPS_DEFAULT, STEPS_DEFAULT};
	specs[1].start_ns = 50000;
	specs[1].steps = 5;
	specs[1].softmax = 1;
	struct inputs ctx = {specs, 0};
	struct cuptrace_merge_input in[] = {{"steps:0", "base"}, {"steps:1", NULL}};
	struct cuptrace_merge m;
	struct cuptrace_stats st;
	struct seen sn;
	struct cuptrace_pf_check chk;
	char path[512];

	tmp_path("test_merge_sbs.pftrace", path, sizeof(path));
	CHECK_EQ_INT(merge_to(path, in, 2, NULL, &ctx, &m), 0);
	CHECK_EQ_INT(ctx.replays, 4); /* two passes */
	CHECK_EQ_STR(m.in[0].label, "base");
	CHECK_EQ_STR(m.in[1].label, "steps:1"); /* no '/': the path is the file's name */
	CHECK_EQ_INT(m.in[0].offset_ns, -1000);
	CHECK_EQ_INT(m.in[1].offset_ns, -50000);
	CHECK_EQ_INT(m.in[0].first_ts, 1000);
	CHECK_EQ_INT(m.in[0].orig_pid, 4242);
	CHECK_EQ_INT(m.in[0].pid, 4242);
	CHECK_EQ_INT(m.in[1].orig_pid, 4242);
	CHECK_EQ_INT(m.in[1].pid, 4244); /* 4243 is a tid of both: the loader thread */
	cuptrace_merge_free(&m);
	cuptrace_merge_free(&m);

	CHECK_EQ_INT(read_back(path, &st, &sn, &chk), 0);
	/* The sums of the inputs: 7 tracks each; 3 * 9 + 5 * 11 slices; 3 * 3 + 5 * 4 flows. */
	CHECK_EQ_INT(st.tracks, 14);
	CHECK_EQ_INT(st.slices, 27 + 55);
	CHECK_EQ_INT(st.flows, 9 + 20);
	CHECK_EQ_INT(st.flows_dangling, 0);
	CHECK_EQ_INT(st.counters, 3 + 5);
	CHECK_EQ_INT(st.instants, 3 + 5 + 2); /* "step done", and each input's trace info */
	CHECK_EQ_INT(st.gpu_slices_with_flow_in, st.gpu_slices);
	CHECK_EQ_INT(st.gpu_busy_ns, 3 * 4500 + 5 * 5300);
	CHECK_EQ_INT(st.unknown_track_events, 0);
	for (size_t i = 0; i < st.ntrk; i++)
		CHECK_EQ_INT(st.trk[i].partial_overlaps, 0);
	CHECK_EQ_INT(chk.duplicate_process_uuid + chk.duplicate_thread_uuid, 0);
	CHECK_EQ_INT(chk.event_on_unknown_track + chk.counter_before_descriptor, 0);
	CHECK_EQ_INT(chk.flows_dangling + chk.negative_timestamps + chk.partial_overlaps, 0);
	/* uuids unique: 14 distinct. */
	for (size_t i = 0; i < st.ntrk; i++)
		for (size_t j = i + 1; j < st.ntrk; j++)
			CHECK(st.trk[i].uuid != st.trk[j].uuid);
	/* One process per input, named and ranked in input order, its origin described. */
	const struct cuptrace_stats_track *a = process(&st, "base: steps");
	const struct cuptrace_stats_track *b = process(&st, "steps:1: steps");
	CHECK(a && b);
	if (a && b) {
		CHECK_EQ_INT(a->pid, 4242);
		CHECK_EQ_INT(b->pid, 4244);
		CHECK(a->sort_rank > 0 && a->sort_rank < b->sort_rank);
	}
	/* Threads keep their tids under their process's new pid. */
	int threads = 0;
	for (size_t i = 0; i < st.ntrk; i++) {
		const struct cuptrace_stats_track *t = &st.trk[i];
		if (t->kind != CUPTRACE_TRACK_THREAD)
			continue;
		threads++;
		CHECK(t->pid == 4242 || t->pid == 4244);
		CHECK(t->tid == 4242 || t->tid == 4243);
	}
	CHECK_EQ_INT(threads, 4);
	/* Each input starts at 0; its steps every 10 us from there. */
	CHECK_EQ_INT(sn.npids, 2);
	size_t pa = slot_of(&sn, 4242), pb = slot_of(&sn, 4244);
	CHECK(pa < MAXP && pb < MAXP);
	if (pa < MAXP && pb < MAXP) {
		CHECK_EQ_INT(sn.first[pa], 0);
		CHECK_EQ_INT(sn.first[pb], 0);
		CHECK_EQ_INT(sn.nsteps[pa], 3);
		CHECK_EQ_INT(sn.nsteps[pb], 5);
		for (size_t i = 0; i < sn.nsteps[pb]; i++)
			CHECK_EQ_INT(sn.step[pb][i], 10000 * (int64_t)i);
	}
	/* Metadata: each input's under its label, and what the merge did. */
	const struct cuptrace_meta *x;
	CHECK((x = meta(&st, "merged_inputs")) && x->is_int && x->i == 2);
	CHECK((x = meta(&st, "base: pid")) && x->is_int && x->i == 4242);
	CHECK((x = meta(&st, "steps:1: merge_offset_ns")) && x->is_int && x->i == -50000);
	CHECK((x = meta(&st, "steps:1: merge_file")) && !strcmp(x->s, "steps:1"));
	CHECK((x = meta(&st, "base: driver_version")) && !strcmp(x->s, "580.159.04"));
	CHECK((x = meta(&st, "steps:1: gpu0")) != NULL);
	CHECK(meta(&st, "merge_alignment") == NULL);
	cuptrace_stats_free(&st);
	unlink(path);
}

/* --align-on step#2: the second step starts at the same moment in both, and the earliest event
 * of all is at 0. */
static void test_align(void)
{
	struct steps_spec specs[2] = {STEPS_DEFAULT, STEPS_DEFAULT};
	specs[1].start_ns = 50000;
	specs[1].lead_ns = 7000; /* a cudaMalloc at 43000: 17 us before its second step */
	specs[1].pid = 77;
	struct inputs ctx = {specs, 0};
	struct cuptrace_merge_input in[] = {{"steps:0", "a"}, {"steps:1", "b"}};
	struct cuptrace_merge_opts o = {.sz = sizeof(o), .align_name = "step", .align_k = 2};
	struct cuptrace_merge m;
	struct cuptrace_stats st;
	struct seen sn;
	struct cuptrace_pf_check chk;
	char path[512];

	tmp_path("test_merge_align.pftrace", path, sizeof(path));
	CHECK_EQ_INT(merge_to(path, in, 2, &o, &ctx, &m), 0);
	CHECK_EQ_INT(m.in[0].align_found, 3);
	CHECK_EQ_INT(m.in[0].align_ts, 11000);
	CHECK_EQ_INT(m.in[1].align_ts, 60000);
	CHECK_EQ_INT(m.in[1].first_ts, 43000);
	CHECK_EQ_INT(m.in[0].offset_ns, 6000);
	CHECK_EQ_INT(m.in[1].offset_ns, -43000);
	CHECK_EQ_INT(m.in[1].pid, 77); /* no clash: kept */
	cuptrace_merge_free(&m);
	CHECK_EQ_INT(read_back(path, &st, &sn, &chk), 0);
	size_t pa = slot_of(&sn, 4242), pb = slot_of(&sn, 77);
	CHECK(pa < MAXP && pb < MAXP);
	if (pa < MAXP && pb < MAXP) {
		CHECK_EQ_INT(sn.first[pa], 7000);
		CHECK_EQ_INT(sn.first[pb], 0);
		CHECK(sn.nsteps[pa] == 3 && sn.nsteps[pb] == 3);
		CHECK_EQ_INT(sn.step[pa][1], 17000);
		CHECK_EQ_INT(sn.step[pb][1], 17000);
	}
	CHECK_EQ_INT(st.min_ts, 0);
	const struct cuptrace_meta *x = meta(&st, "merge_alignment");
	CHECK(x && !strcmp(x->s, "step#2"));
	cuptrace_stats_free(&st);
	unlink(path);

	/* An input with too few: -ENOENT, and which one. */
	o.align_k = 4;
	CHECK_EQ_INT(cuptrace_merge_plan(&m, in, 2, &o, replay, &ctx), -ENOENT);
	CHECK_EQ_INT(m.bad, 0);
	CHECK_EQ_INT(m.in[0].align_found, 3);
	cuptrace_merge_free(&m);
	o.align_name = "epoch";
	o.align_k = 1;
	CHECK_EQ_INT(cuptrace_merge_plan(&m, in, 2, &o, replay, &ctx), -ENOENT);
	CHECK_EQ_INT(m.bad, 0);
	CHECK_EQ_INT(m.in[0].align_found, 0);
	cuptrace_merge_free(&m);
}

/* Issue 42: the merged trace's clocks are the first input's moved by its shift. Here that shift
 * (6 s: the second run's first step comes 6 s after its first event) is more than the first
 * input's BOOTTIME at its start (5 s, steps.h), which used to give a snapshot at BOOTTIME -1 s:
 * trace_processor's time is the BOOTTIME reading, and every event of the first second (the
 * second run's cudaMalloc, each input's trace info) was at a negative time, dropped. A BOOTTIME
 * that cannot be below 0 is not known: 0; REALTIME moves with the shift. The same in the
 * one-file-per-input form (.tar), whose files all begin with the merged trace's clocks. */
struct each_ctx {
	char path[2][512];
};

static struct cuptrace_sink *each_open(void *octx, size_t i)
{
	struct each_ctx *c = octx;
	return i < 2 ? cuptrace_sink_open(c->path[i], "perfetto", NULL) : NULL;
}

static int each_close(void *octx, size_t i, struct cuptrace_sink *sink)
{
	(void)octx;
	(void)i;
	int r = sink->ops->finish(sink);
	cuptrace_sink_destroy(sink);
	return r;
}

static void test_clock_below_zero(void)
{
	struct steps_spec specs[2] = {STEPS_DEFAULT, STEPS_DEFAULT};
	specs[1].start_ns = 6000001000ll;
	specs[1].lead_ns = 6000000000ll; /* its cudaMalloc at 1000, 6 s before its first step */
	specs[1].pid = 77;
	struct inputs ctx = {specs, 0};
	struct cuptrace_merge_input in[] = {{"steps:0", "a"}, {"steps:1", "b"}};
	struct cuptrace_merge m;
	struct cuptrace_stats st;
	struct seen sn;
	struct cuptrace_pf_check chk;
	struct each_ctx each;
	char path[512];

	tmp_path("test_merge_clock.pftrace", path, sizeof(path));
	struct cuptrace_merge_opts o = {.sz = sizeof(o), .align_name = "step", .align_k = 1};
	CHECK_EQ_INT(merge_to(path, in, 2, &o, &ctx, &m), 0);
	CHECK_EQ_INT(m.in[0].offset_ns, 6000000000ll - 1000);
	CHECK_EQ_INT(m.in[1].offset_ns, -1000);
	CHECK_EQ_INT(read_back(path, &st, &sn, &chk), 0);
	CHECK_EQ_INT(chk.negative_timestamps + chk.before_snapshot + chk.clock_errors, 0);
	CHECK_EQ_INT(chk.end_without_begin + chk.unterminated_slices, 0);
	CHECK_EQ_INT(st.slices, 27 + 27 + 1); /* 9 per step, and b's cudaMalloc */
	CHECK_EQ_INT(st.counters, 3 + 3);
	CHECK_EQ_INT(sn.nmi, 2); /* each input's trace info, at its first event */
	CHECK_EQ_INT(st.min_ts, 0);
	CHECK_EQ_INT(sn.boottime, 0);
	CHECK_EQ_INT(sn.realtime, 1763703060000000000ll - (6000000000ll - 1000));
	cuptrace_stats_free(&st);
	unlink(path);

	tmp_path("test_merge_clock_1.pftrace", each.path[0], sizeof(each.path[0]));
	tmp_path("test_merge_clock_2.pftrace", each.path[1], sizeof(each.path[1]));
	CHECK_EQ_INT(cuptrace_merge_write_each(&m, replay, &ctx, each_open, each_close, &each), 0);
	for (int i = 0; i < 2; i++) {
		CHECK_EQ_INT(read_back(each.path[i], &st, &sn, &chk), 0);
		CHECK_EQ_INT(chk.negative_timestamps + chk.before_snapshot + chk.clock_errors, 0);
		CHECK_EQ_INT(chk.end_without_begin + chk.unterminated_slices, 0);
		CHECK_EQ_INT(st.slices, i ? 28 : 27);
		CHECK_EQ_INT(sn.nmi, 1);
		CHECK_EQ_INT(sn.boottime, 0);
		cuptrace_stats_free(&st);
		unlink(each.path[i]);
	}
	cuptrace_merge_free(&m);
}

/* Real captures: the merged trace holds the sum of what each holds. */
static void test_captures(void)
{
	const char *data = getenv("CUPTRACE_TEST_DATA");
	char va[512], ms[512], path[512];
	struct cuptrace_stats one[2], st;
	struct seen sn;
	struct cuptrace_pf_check chk;
	struct inputs ctx = {NULL, 0};
	struct cuptrace_merge m;

	CHECK(data != NULL);
	if (!data)
		return;
	snprintf(va, sizeof(va), "%s/vector_add.cupti", data);
	snprintf(ms, sizeof(ms), "%s/multi_stream.cupti", data);
	struct cuptrace_merge_input in[] = {{va, NULL}, {ms, NULL}, {va, NULL}};
	const char *paths[] = {va, ms};
	for (int i = 0; i < 2; i++) {
		struct cuptrace_sink *s = cuptrace_stats_sink_new(&one[i]);
		CHECK(s && !cuptrace_read_trace(paths[i], s, 0) && !s->ops->finish(s));
		cuptrace_sink_destroy(s);
	}
	tmp_path("test_merge_captures.pftrace", path, sizeof(path));
	struct cuptrace_merge_opts o = {.sz = sizeof(o), .no_auto_align = 1};
	CHECK_EQ_INT(merge_to(path, in, 3, &o, &ctx, &m), 0);
	CHECK_EQ_STR(m.in[0].label, "vector_add.cupti");
	CHECK_EQ_STR(m.in[2].label, "vector_add.cupti (2)");
	CHECK(m.in[0].pid != m.in[2].pid && m.in[0].pid != m.in[1].pid);
	CHECK_EQ_INT(m.in[0].offset_ns, -one[0].min_ts);
	CHECK_EQ_INT(m.in[1].offset_ns, -one[1].min_ts);
	cuptrace_merge_free(&m);
	CHECK_EQ_INT(read_back(path, &st, &sn, &chk), 0);
	CHECK_EQ_INT(st.tracks, 2 * one[0].tracks + one[1].tracks);
	CHECK_EQ_INT(st.slices, 2 * one[0].slices + one[1].slices);
	/* Besides, each input's info and summary (a capture's replay ends with its summary). */
	CHECK_EQ_INT(st.instants - sn.nmi, 2 * one[0].instants + one[1].instants);
	CHECK_EQ_INT(sn.nmi, 3 * 2);
	CHECK_EQ_INT(st.counters, 2 * one[0].counters + one[1].counters);
	CHECK_EQ_INT(st.flows, 2 * one[0].flows + one[1].flows);
	CHECK_EQ_INT(st.flows_dangling, 2 * one[0].flows_dangling + one[1].flows_dangling);
	CHECK_EQ_INT(st.gpu_slices_with_flow_in,
	             2 * one[0].gpu_slices_with_flow_in + one[1].gpu_slices_with_flow_in);
	CHECK_EQ_INT(st.gpu_busy_ns, 2 * one[0].gpu_busy_ns + one[1].gpu_busy_ns);
	CHECK_EQ_INT(st.min_ts, 0);
	CHECK_EQ_INT(chk.duplicate_process_uuid + chk.duplicate_thread_uuid + chk.corrupt, 0);
	/* Three processes, each starting at 0. */
	CHECK_EQ_INT(sn.npids, 3);
	for (size_t i = 0; i < sn.npids; i++)
		CHECK_EQ_INT(sn.first[i], 0);
	/* Per name: counts doubled or summed. */
	for (size_t i = 0; i < one[1].nnames; i++) {
		const struct cuptrace_stats_name *w = &one[1].names[i];
		uint64_t want = w->count, got = 0;
		for (size_t k = 0; k < one[0].nnames; k++)
			if (!strcmp(one[0].names[k].name, w->name) &&
			    !strcmp(one[0].names[k].category, w->category))
				want += 2 * one[0].names[k].count;
		for (size_t k = 0; k < st.nnames; k++)
			if (!strcmp(st.names[k].name, w->name) &&
			    !strcmp(st.names[k].category, w->category))
				got = st.names[k].count;
		CHECK_EQ_INT(got, want);
	}
	cuptrace_stats_free(&st);
	cuptrace_stats_free(&one[0]);
	cuptrace_stats_free(&one[1]);
	unlink(path);
}

static void test_errors(void)
{
	struct steps_spec specs[1] = {STEPS_DEFAULT};
	struct inputs ctx = {specs, 0};
	struct cuptrace_merge_input in[] = {{"steps:0", NULL}, {"fail", NULL}};
	struct cuptrace_merge m;

	CHECK_EQ_INT(cuptrace_merge_plan(&m, in, 0, NULL, replay, &ctx), -EINVAL);
	cuptrace_merge_free(&m);
	CHECK_EQ_INT(cuptrace_merge_plan(&m, in, 2, NULL, replay, &ctx), -EIO);
	CHECK_EQ_INT(m.bad, 1);
	cuptrace_merge_free(&m);
	CHECK_EQ_INT(cuptrace_merge_write(&m, replay, &ctx, NULL), -EINVAL);

	uint64_t k;
	char *name;
	CHECK((name = cuptrace_merge_parse_align("step", &k)) && !strcmp(name, "step") && k == 1);
	free(name);
	CHECK((name = cuptrace_merge_parse_align("step#12", &k)) && !strcmp(name, "step") &&
	      k == 12);
	free(name);
	CHECK((name = cuptrace_merge_parse_align("a#b#3", &k)) && !strcmp(name, "a#b") && k == 3);
	free(name);
	CHECK((name = cuptrace_merge_parse_align("f()::{lambda()#1}", &k)) &&
	      !strcmp(name, "f()::{lambda()#1}") && k == 1);
	free(name);
	CHECK((name = cuptrace_merge_parse_align("x#", &k)) && !strcmp(name, "x#") && k == 1);
	free(name);
	CHECK(cuptrace_merge_parse_align("#2", &k) == NULL);
	CHECK(cuptrace_merge_parse_align("step#0", &k) == NULL);
	CHECK(cuptrace_merge_parse_align("", &k) == NULL);
	CHECK(cuptrace_merge_parse_align("s#99999999999999999999999", &k) == NULL);
}

/* Without --align-on: the first ProfilerStep#N where every run has one, else the first GPU work,
 * else each from its start. Run b starts 3 s later and spends 2 s in start-up (a cudaMalloc 2 s
 * before its first step): its steps still land on a's. */
static void test_auto_align(void)
{
	static const int64_t B_START = 3000000000, B_LEAD = 2000000000;
	struct steps_spec specs[3] = {STEPS_DEFAULT, STEPS_DEFAULT, STEPS_DEFAULT};
	specs[0].step_name = specs[1].step_name = "ProfilerStep#1";
	specs[1].start_ns = specs[2].start_ns = B_START;
	specs[1].lead_ns = specs[2].lead_ns = B_LEAD;
	specs[1].pid = specs[2].pid = 77;
	struct inputs ctx = {specs, 0};
	/* a and b: both have ProfilerStep#N; a and c: c has none, both have GPU work */
	struct cuptrace_merge_input ab[] = {{"steps:0", "a"}, {"steps:1", "b"}};
	struct cuptrace_merge_input ac[] = {{"steps:0", "a"}, {"steps:2", "c"}};
	const struct cuptrace_merge_input *pairs[] = {ab, ac};
	const enum cuptrace_merge_auto want[] = {CUPTRACE_MERGE_AUTO_STEP, CUPTRACE_MERGE_AUTO_GPU};
	/* the marks, from steps.h: steps start at start_ns, the first gemm 1 us later */
	const int64_t mark_a[] = {1000, 2000}, mark_b[] = {B_START, B_START + 1000};
	struct cuptrace_merge m;
	struct cuptrace_stats st;
	struct seen sn;
	struct cuptrace_pf_check chk;
	char path[512];

	tmp_path("test_merge_auto.pftrace", path, sizeof(path));
	for (int k = 0; k < 2; k++) {
		CHECK_EQ_INT(merge_to(path, pairs[k], 2, NULL, &ctx, &m), 0);
		CHECK_EQ_INT(m.auto_align, want[k]);
		CHECK_EQ_INT(m.in[0].align_ts, mark_a[k]);
		CHECK_EQ_INT(m.in[1].align_ts, mark_b[k]);
		CHECK_EQ_INT(m.in[1].first_ts, B_START - B_LEAD);
		/* b's start-up is the earliest event of all: b goes to 0, a's mark meets b's */
		CHECK_EQ_INT(m.in[1].offset_ns, -(B_START - B_LEAD));
		CHECK_EQ_INT(m.in[0].offset_ns, B_LEAD - 1000);
		cuptrace_merge_free(&m);
		CHECK_EQ_INT(read_back(path, &st, &sn, &chk), 0);
		size_t pa = slot_of(&sn, 4242), pb = slot_of(&sn, 77);
		CHECK(pa < MAXP && pb < MAXP);
		if (pa < MAXP && pb < MAXP) {
			CHECK(sn.nsteps[pa] == 3 && sn.nsteps[pb] == 3);
			for (size_t i = 0; i < 3; i++) {
				CHECK_EQ_INT(sn.step[pa][i], sn.step[pb][i]);
				CHECK_EQ_INT(sn.step[pb][i], B_LEAD + 10000 * (int64_t)i);
			}
			CHECK_EQ_INT(sn.first[pb], 0);
		}
		cuptrace_stats_free(&st);
		unlink(path);
	}
	/* --no-align: each from its own start, as before */
	struct cuptrace_merge_opts o = {.sz = sizeof(o), .no_auto_align = 1};
	CHECK_EQ_INT(cuptrace_merge_plan(&m, ab, 2, &o, replay, &ctx), 0);
	CHECK_EQ_INT(m.auto_align, CUPTRACE_MERGE_AUTO_NONE);
	CHECK_EQ_INT(m.in[0].offset_ns, -1000);
	CHECK_EQ_INT(m.in[1].offset_ns, -(B_START - B_LEAD));
	cuptrace_merge_free(&m);
}

/* Each input's trace info and summary (issue 25): inputs written to files with a summary of
 * their own (dropped records 5 and 7), merged into Perfetto and into Chrome JSON, read back:
 * per input one info and one summary instant, named after its label, on its own process, with
 * what that input said. */
static void test_meta_per_input(void)
{
	struct steps_spec specs[2] = {STEPS_DEFAULT, STEPS_DEFAULT};
	specs[1].steps = 4;
	specs[1].pid = 77;
	const int64_t dropped[2] = {5, 7};
	const char *labels[2] = {"run A", "run B"};
	char files[2][512], path[512];
	struct inputs ctx = {NULL, 0};

	for (int i = 0; i < 2; i++) {
		char name[64];
		snprintf(name, sizeof(name), "test_merge_meta_in%d.pftrace", i);
		tmp_path(name, files[i], sizeof(files[i]));
		struct cuptrace_sink *s = cuptrace_sink_open(files[i], NULL, NULL);
		CHECK(s != NULL);
		if (!s)
			return;
		struct cuptrace_meta sum = {
		    .key = "dropped_records_cupti", .is_int = 1, .i = dropped[i]};
		steps_err = 0;
		CHECK_EQ_INT(steps_feed(s, &specs[i]), 0);
		CHECK_EQ_INT(s->ops->meta(s, &sum, 1), 0);
		CHECK_EQ_INT(s->ops->finish(s), 0);
		cuptrace_sink_destroy(s);
	}
	struct cuptrace_merge_input in[] = {{files[0], labels[0]}, {files[1], labels[1]}};
	const char *outs[] = {"test_merge_meta.pftrace", "test_merge_meta.json"};
	for (int f = 0; f < 2; f++) {
		struct cuptrace_merge m;
		struct cuptrace_stats st;
		struct seen sn;
		struct cuptrace_pf_check chk;
		int32_t newpid[2] = {0, 0};
		int64_t last[2] = {0, 0};

		tmp_path(outs[f], path, sizeof(path));
		CHECK_EQ_INT(merge_to(path, in, 2, NULL, &ctx, &m), 0);
		for (int i = 0; i < 2; i++)
			newpid[i] = m.in[i].pid;
		cuptrace_merge_free(&m);
		CHECK_EQ_INT(read_back(path, &st, &sn, &chk), 0);
		for (int i = 0; i < 2; i++) {
			char info[96], sum[96];
			int ninfo = 0, nsum = 0;
			snprintf(info, sizeof(info), "cuptrace: trace info (%s)", labels[i]);
			snprintf(sum, sizeof(sum), "cuptrace: summary (%s)", labels[i]);
			for (size_t k = 0; k < sn.nmi; k++) {
				const struct minst *x = &sn.mi[k];
				int is_info = !strcmp(x->name, info),
				    is_sum = !strcmp(x->name, sum);
				if (!is_info && !is_sum)
					continue;
				ninfo += is_info;
				nsum += is_sum;
				CHECK_EQ_STR(x->input, labels[i]);
				CHECK_EQ_INT(x->track_pid, newpid[i]);
				if (is_info) {
					CHECK_EQ_INT(x->pid,
					             specs[i].pid); /* the input's own pid */
					CHECK_EQ_STR(x->pname, "steps");
					CHECK_EQ_INT(x->ts, 0); /* where the input begins */
				} else {
					CHECK_EQ_INT(x->dropped, dropped[i]);
					last[i] = x->ts;
				}
			}
			CHECK_EQ_INT(ninfo, 1);
			CHECK_EQ_INT(nsum, 1);
			/* the summary at the input's last moment: its last step's end (each input
			 * starts at 0; steps of 10 us) */
			CHECK_EQ_INT(last[i], 10000 * (int64_t)specs[i].steps);
		}
		/* Nothing else of the category: one info and one summary per input. */
		CHECK_EQ_INT(sn.nmi, 4);
		CHECK_EQ_INT(st.instants, 3 + 4 + 4);
		cuptrace_stats_free(&st);
		unlink(path);
	}
	unlink(files[0]);
	unlink(files[1]);
}

TEST_MAIN(T(test_side_by_side), T(test_meta_per_input), T(test_align), T(test_auto_align),
          T(test_clock_below_zero), T(test_captures), T(test_errors))
