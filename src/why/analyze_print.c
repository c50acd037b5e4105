/* The `cuptrace analyze` report from a struct cuptrace_analysis: text, GitHub markdown, and JSON
 * (schema "cuptrace-analyze/1", documented in README "Why is it slow: analyze"). Output depends
 * only on the analysis. Text goes through common/text.h: aligned tables, each duration in the
 * unit that fits it, names cut so that different names stay different, prose wrapped. */
#include "why/analyze.h"
#include "common/text.h"
#include "format/json_writer.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME_COL 40 /* bytes of a kernel or range name in a table cell before it is cut */

static double pct(int64_t part, int64_t whole)
{
	return whole > 0 ? 100.0 * (double)part / (double)whole : 0.0;
}

static void print_idle_samples(const struct cuptrace_analysis *a, FILE *f, int md);

/* A duration in the unit that fits it, in one of a few rotating buffers (one printf may hold
 * several; printing is on one thread). */
static const char *D(int64_t ns)
{
	static char buf[8][48];
	static unsigned k;
	char *b = buf[k++ % 8];
	report_dur(b, sizeof(buf[0]), ns);
	return b;
}

static void hdr(FILE *f, int md, const char *title)
{
	fprintf(f, md ? "\n### %s\n\n" : "\n== %s ==\n", title);
}

/* Where the steps came from, in words. */
static void step_source(const struct cuptrace_analysis *a, FILE *f, int md)
{
	const char *k = a->step_kind ? a->step_kind : "";
	if (!strcmp(k, "option"))
		report_para(f, md, "",
		            "Steps: the ranges named \"%s\" (--step), numbered or not.\n",
		            a->step_source);
	else if (!strcmp(k, "profiler_step"))
		fputs("Steps: torch.profiler's ProfilerStep#N ranges.\n", f);
	else if (!strcmp(k, "nvtx_family"))
		report_para(f, md, "", "Steps: the numbered ranges \"%s N\".\n", a->step_source);
	else if (!strcmp(k, "optimizer"))
		report_para(f, md, "",
		            "Steps: %s, each from the end of the previous one to the end of its "
		            "own.\n",
		            !strcmp(a->step_source, "optimizer.step")
		                ? "the optimizer.step() marks `record` makes"
		                : "--pytorch's Optimizer.step# ranges");
	else if (!strcmp(k, "gpu_period"))
		report_para(f, md, "",
		            "Steps: no marks; iterations found in the GPU work, its launches "
		            "repeating (confidence %.2f).\n",
		            a->step_confidence);
	else
		report_para(f, md, "",
		            "Steps: from several sources (the processes differ; JSON rows say "
		            "which).\n");
}

/* What made an outlier slow, in words. */
static void step_cause(const struct cuptrace_an_step *s, char *buf, size_t n)
{
	switch (s->cause) {
	case CUPTRACE_STEP_CAUSE_GPU_WORK:
		snprintf(buf, n, "GPU work %s over the median", D(s->cause_ns));
		break;
	case CUPTRACE_STEP_CAUSE_HOST_GAP:
	case CUPTRACE_STEP_CAUSE_HOST_SYNC:
		snprintf(buf, n,
		         "GPU idle %s over the median, the host %s (its longest launch-free "
		         "stretch %s, %s)",
		         D(s->cause_ns),
		         s->cause == CUPTRACE_STEP_CAUSE_HOST_GAP ? "busy outside CUDA"
		                                                  : "in blocking CUDA calls",
		         D(s->host_gap_ns),
		         s->host_gap_ts <= s->host_ts && s->launches ? "before its first launch"
		                                                     : "inside it");
		break;
	case CUPTRACE_STEP_CAUSE_COLLECTIVE:
		snprintf(buf, n, "collectives %s over the median (a wait for another rank)",
		         D(s->cause_ns));
		break;
	default:
		snprintf(buf, n, "no single part grew");
	}
}

/* The cause of an outlier in a few words, for its table row (the sentence is under the table). */
static const char *step_cause_short(const struct cuptrace_an_step *s)
{
	switch (s->cause) {
	case CUPTRACE_STEP_CAUSE_GPU_WORK:
		return "slow: GPU work";
	case CUPTRACE_STEP_CAUSE_HOST_GAP:
		return "slow: host";
	case CUPTRACE_STEP_CAUSE_HOST_SYNC:
		return "slow: host sync";
	case CUPTRACE_STEP_CAUSE_COLLECTIVE:
		return "slow: collective";
	default:
		return "slow";
	}
}

/* A step's label: its name, and its number where the name does not carry it. */
static void step_label(const struct cuptrace_an_step *s, char *buf, size_t n)
{
	size_t len = strlen(s->name);
	int has = len && s->name[len - 1] >= '0' && s->name[len - 1] <= '9';
	if (has)
		snprintf(buf, n, "%.60s", s->name);
	else
		snprintf(buf, n, "%.60s %" PRId64, s->name, s->number);
}

/* Text tables hold every step up to this many; beyond, the first, the outliers, the last. */
enum { STEP_ROWS = 40 };

/* A rank's label (README: the rank and host the trace says, else input and pid). */
static const char *who(const struct cuptrace_analysis *a, size_t rank)
{
	return rank < a->nranks && a->ranks[rank].label ? a->ranks[rank].label : "-";
}

/* With many ranks the per-rank step rows are left to the JSON: the job's steps say it. */
enum { AN_PRINT_RANK_ROWS = 8 };

/* A row that says how many rows were left out: its first cell says it, the others are empty. */
static void more_row(struct table *t, size_t left)
{
	table_cell(t, "... %zu more", left);
	for (size_t c = 1; c < t->ncols; c++)
		table_cell(t, "%s", "");
}

static void print_steps(const struct cuptrace_analysis *a, FILE *f, int md)
{
	char buf[512];
	if (!a->nsteps) {
		fputs(md ? "\n" : "\n== Steps ==\n", f);
		report_para(f, md, "",
		            "No steps found: no step marks (--step NAME, ProfilerStep#N, numbered "
		            "ranges, optimizer.step()) and no repeating GPU work (best try: "
		            "confidence %.2f).\n",
		            a->step_confidence);
		return;
	}
	hdr(f, md, "Steps");
	step_source(a, f, md);
	report_para(f, md, "",
	            "A step's period runs from the previous step's completion to its own: the "
	            "later of its mark's end and the end of the GPU work launched in it (in an "
	            "async loop, when the GPU finished it). GPU extent: that work's first start to "
	            "its last end; busy %% over the period. Slow (an outlier): host = busy outside "
	            "CUDA, host sync = in blocking CUDA calls.\n\n");
	size_t ranks = 0;
	for (size_t i = 0; i < a->nranks; i++)
		ranks += a->ranks[i].nsteps > 0;
	int rows = !a->multi_rank || ranks <= AN_PRINT_RANK_ROWS;
	struct table t = {.md = md};
	if (a->multi_rank)
		t = (struct table){.md = md,
		                   .ncols = 10,
		                   .head = {"rank", "#", "step", "period", "GPU extent", "busy %",
		                            "idle", "kernels", "launches", "note"},
		                   .align = "LrLrrrrrrl"};
	else
		t = (struct table){.md = md,
		                   .ncols = 8,
		                   .head = {"step", "period", "GPU extent", "busy %", "idle",
		                            "kernels", "launches", "note"},
		                   .align = "lrrrrrrl"};
	if (!rows)
		report_para(
		    f, md, "",
		    "%zu ranks: their steps one by one are in --json (steps.rows); the job's "
		    "steps by number below.\n",
		    ranks);
	size_t shown = 0, left = 0;
	for (size_t i = 0; rows && i < a->nsteps; i++) {
		const struct cuptrace_an_step *s = &a->steps[i];
		int keep = a->nsteps <= STEP_ROWS || i < 3 || i + 1 == a->nsteps ||
		           (s->outlier && shown < STEP_ROWS);
		if (!keep) {
			left++;
			continue;
		}
		if (left)
			more_row(&t, left);
		left = 0;
		shown++;
		char label[96];
		step_label(s, label, sizeof(label));
		if (a->multi_rank) {
			table_cell_text(&t, who(a, s->rank));
			table_cell(&t, "%" PRId64, s->number);
		}
		table_cell(&t, "%s", label);
		table_cell_dur(&t, s->dur);
		table_cell_dur(&t, s->gpu_end - s->gpu_ts);
		table_cell(&t, "%.1f", pct(s->busy_ns, s->dur));
		table_cell_dur(&t, s->idle_ns);
		table_cell(&t, "%" PRIu64, s->kernels);
		table_cell(&t, "%" PRIu64, s->launches);
		table_cell(&t, "%s",
		           s->startup   ? "start-up"
		           : s->outlier ? step_cause_short(s)
		                        : "");
	}
	if (left)
		more_row(&t, left);
	if (rows)
		table_print(&t, f);
	size_t nout = 0;
	for (size_t i = 0; i < a->nsteps; i++)
		nout += a->steps[i].outlier;
	char over[64] = "";
	if (a->multi_rank)
		snprintf(over, sizeof(over), " over %zu ranks", ranks);
	report_para(f, md, "",
	            "\n%zu steps (%s)%s: judged (after start-up), period median %s, min %s, max "
	            "%s, MAD %s.",
	            a->nsteps, a->step_source ? a->step_source : "", over, D(a->step_median_ns),
	            D(a->step_min_ns), D(a->step_max_ns), D(a->step_mad_ns));
	if (!nout) {
		fputs(" No outliers.\n", f);
		return;
	}
	fprintf(f, " %zu outlier%s (above the median by 20%% and 5 MADs):\n", nout,
	        nout == 1 ? "" : "s");
	for (size_t i = 0, k = 0; i < a->nsteps && k < 20; i++) {
		const struct cuptrace_an_step *s = &a->steps[i];
		if (!s->outlier)
			continue;
		char label[96];
		step_label(s, label, sizeof(label));
		step_cause(s, buf, sizeof(buf));
		if (a->multi_rank)
			report_para(f, md, "    ", "%s%s (%s, at %s): %s; %s.\n",
			            md ? "- " : "  - ", label, who(a, s->rank), D(s->ts), D(s->dur),
			            buf);
		else
			report_para(f, md, "    ", "%s%s (pid %d, at %s): %s; %s.\n",
			            md ? "- " : "  - ", label, s->pid, D(s->ts), D(s->dur), buf);
		k++;
	}
}

/* With several ranks: the job's steps by number, each once, with the rank the others waited
 * for in its collectives; then its slow steps, each once. */
static void print_job_steps(const struct cuptrace_analysis *a, FILE *f, int md)
{
	if (!a->njob_steps)
		return;
	hdr(f, md, "Steps of the job (by number, over its ranks)");
	struct table t = {.md = md,
	                  .ncols = 9,
	                  .head = {"step", "median", "slowest", "its wall", "waited for", "wait",
	                           "GPU +", "host +", "slow"},
	                  .align = "rrLrLrrrl"};
	char g[48], h[48];
	for (size_t i = 0; i < a->njob_steps; i++) {
		const struct cuptrace_an_job_step *s = &a->job_steps[i];
		int met = s->waited_for != SIZE_MAX;
		table_cell(&t, "%" PRId64, s->number);
		table_cell_dur(&t, s->median_ns);
		table_cell_text(&t, who(a, s->slowest));
		table_cell_dur(&t, s->max_ns);
		table_cell_text(&t, met ? who(a, s->waited_for) : "-");
		report_dur_signed(g, sizeof(g), s->extra_gpu_ns);
		report_dur_signed(h, sizeof(h), s->extra_host_ns);
		if (met)
			table_cell_dur(&t, s->wait_ns);
		else
			table_cell(&t, "-");
		table_cell(&t, "%s", met ? g : "-");
		table_cell(&t, "%s", met ? h : "-");
		table_cell(&t, "%s",
		           s->startup                 ? "start-up"
		           : s->held_up && s->outlier ? "held up, outlier"
		           : s->held_up               ? "held up"
		           : s->outlier               ? "outlier"
		                                      : "-");
	}
	table_print(&t, f);
	fputs("\n", f);
	report_para(f, md, "",
	            "median: the median wall time of the ranks that ran the step; wait: how long "
	            "the others waited for the "
	            "rank they waited for; GPU +, host +: how much longer than usual that rank "
	            "took in its GPU work and on the host before its collective.\n");
	int any = 0;
	for (size_t i = 0; i < a->njob_steps; i++) {
		const struct cuptrace_an_job_step *s = &a->job_steps[i];
		if (!s->slow)
			continue;
		if (!any++)
			fputs("\nSlow steps:\n", f);
		report_dur_signed(g, sizeof(g), s->extra_gpu_ns);
		report_dur_signed(h, sizeof(h), s->extra_host_ns);
		if (s->held_up)
			report_para(f, md, "    ",
			            "%s%" PRId64
			            ": %s held up the others: they waited %s for it; its "
			            "GPU work %s, host %s before its collective.\n",
			            md ? "- " : "  - ", s->number, who(a, s->waited_for),
			            D(s->wait_ns), g, h);
		else
			report_para(f, md, "    ",
			            "%s%" PRId64 ": an outlier, nobody held up beyond the usual; "
			            "slowest %s, %s.\n",
			            md ? "- " : "  - ", s->number, who(a, s->slowest),
			            D(s->max_ns));
	}
	if (!any)
		fputs("\nNo slow steps.\n", f);
}

/* A GPU's row label. */
static void gpu_label(const struct cuptrace_analysis *a, const struct cuptrace_an_gpu *d, char *buf,
                      size_t n)
{
	if (a->multi_rank)
		snprintf(buf, n, "%s \u00b7 %s", who(a, d->rank), d->name);
	else
		snprintf(buf, n, "%s (pid %d)", d->name, d->pid);
}

static void print_gpus(const struct cuptrace_analysis *a, FILE *f, int md)
{
	char label[REPORT_CELL_BYTES];
	hdr(f, md, "GPU busy and idle");
	if (!a->ngpus) {
		fputs("No GPU work (kernels, copies, memsets) in the trace.\n", f);
		return;
	}
	if (a->steady_steps)
		report_para(f, md, "",
		            "The steady state: from the completion of the start-up steps to that "
		            "of the last (start-up on a line of its own, work after the last step "
		            "left out).\n");
	else if (a->startup_end)
		report_para(f, md, "",
		            "No steps: from the end of start-up at %s (the last long one-off GPU "
		            "idle: model load, compilation) to the end (start-up on a line of its "
		            "own).\n",
		            D(a->startup_end));
	else
		report_para(f, md, "", "The whole trace (no steps, no start-up phase found).\n");
	report_para(f, md, "",
	            "busy %%: of the GPU's window, from its first work's start to its last "
	            "work's end, for the GPU and for each of its streams.\n\n");
	struct table t = {.md = md,
	                  .ncols = 5,
	                  .head = {"GPU / stream", "work", "busy", "busy %", "idle"},
	                  .align = "lrrrr"};
	struct table c = {.md = md, .ncols = 1 + CUPTRACE_IDLE_NCAUSES, .head = {"GPU / stream"}};
	char calign[REPORT_MAX_COLS + 1] = "l";
	for (int k = 0; k < CUPTRACE_IDLE_NCAUSES; k++) {
		c.head[1 + k] = cuptrace_idle_cause_names[k];
		calign[1 + k] = 'r';
	}
	c.align = calign;
	for (size_t g = 0; g < a->ngpus; g++) {
		const struct cuptrace_an_gpu *d = &a->gpus[g];
		int64_t win = d->last_end - d->first_ts;
		gpu_label(a, d, label, sizeof(label));
		table_cell_text(&t, label);
		table_cell(&t, "%" PRIu64, d->kernels + d->copies + d->memsets + d->graphs);
		table_cell_dur(&t, d->busy_ns);
		table_cell(&t, "%.1f", pct(d->busy_ns, win));
		table_cell_dur(&t, d->idle_ns);
		table_cell_text(&c, label);
		for (int k = 0; k < CUPTRACE_IDLE_NCAUSES; k++)
			table_cell_dur(&c, d->idle_by_cause[k]);
		if (d->startup_ns) {
			table_cell(&t, "  start-up, before the window");
			table_cell(&t, "%s", "");
			table_cell_dur(&t, d->startup_ns - d->startup_idle_ns);
			table_cell(&t, "%.1f",
			           pct(d->startup_ns - d->startup_idle_ns, d->startup_ns));
			table_cell_dur(&t, d->startup_idle_ns);
		}
		for (size_t s = 0; s < a->nstreams; s++) {
			const struct cuptrace_an_stream *st = &a->streams[s];
			if (st->gpu != g)
				continue;
			snprintf(label, sizeof(label), "  %s", st->name);
			table_cell_text(&t, label);
			table_cell(&t, "%" PRIu64, st->ops);
			table_cell_dur(&t, st->busy_ns);
			/* The GPU's window, as the GPU's own row: a stream that ran a moment is
			 * not "busy" for that moment alone (and `stats` says the same). */
			table_cell(&t, "%.1f", pct(st->busy_ns, win));
			table_cell_dur(&t, st->idle_ns);
			table_cell_text(&c, label);
			for (int k = 0; k < CUPTRACE_IDLE_NCAUSES; k++)
				table_cell_dur(&c, st->idle_by_cause[k]);
		}
	}
	table_print(&t, f);
	fputs(md ? "\n" : "", f);
	report_para(f, md, "", "\nIdle by cause (a stream's, from its first work to its last):%s",
	            md ? "\n\n" : "\n");
	table_print(&c, f);
	if (!a->nidle)
		return;
	hdr(f, md, "Largest GPU idle intervals");
	struct table x = {
	    .md = md,
	    .ncols = 7 + (size_t)a->multi_rank,
	    .head = {"start", "idle", "cause", "next work", "tid", "host range", "host call"},
	    .align = "rrlLrLl"};
	if (a->multi_rank)
		x = (struct table){.md = md,
		                   .ncols = 8,
		                   .head = {"rank", "start", "idle", "cause", "next work", "tid",
		                            "host range", "host call"},
		                   .align = "lrrlLrLl"};
	for (size_t i = 0; i < a->nidle; i++) {
		const struct cuptrace_an_idle *d = &a->idle[i];
		if (a->multi_rank)
			table_cell_text(&x, who(a, d->rank));
		table_cell_dur(&x, d->ts);
		table_cell_dur(&x, d->dur);
		table_cell(&x, "%s", cuptrace_idle_cause_names[d->cause]);
		table_cell_text(&x, d->next_work ? d->next_work : "-");
		table_cell(&x, "%" PRId64, d->host.tid);
		table_cell_text(&x, d->host.range ? d->host.range : "-");
		table_cell_text(&x, d->host.api ? d->host.api : "-");
	}
	table_print(&x, f);
	print_idle_samples(a, f, md);
}

/* What the launching thread did in each of the largest idle intervals, from its host stack
 * samples (record --sample, issue 46); without samples, how to get them. */
static void print_idle_samples(const struct cuptrace_analysis *a, FILE *f, int md)
{
	fputc('\n', f);
	if (!a->host_samples) {
		fputs("No host stack samples in this trace: `cuptrace record --sample` records "
		      "what the\n"
		      "launching thread was doing in each idle interval.\n",
		      f);
		return;
	}
	fputs("What the launching thread was doing (host stack samples):\n\n", f);
	for (size_t i = 0; i < a->nidle; i++) {
		const struct cuptrace_an_idle *d = &a->idle[i];
		fprintf(f, "%sidle %s at %s, thread %" PRId64 ": ", md ? "- " : "  ", D(d->dur),
		        D(d->ts), d->host.tid);
		if (!d->host_samples) {
			fputs("no samples in it\n", f);
			continue;
		}
		for (size_t k = 0; k < d->nhost_frames; k++)
			fprintf(f, "%s%s%s%s in %.0f%%", k ? ", " : "", md ? "`" : "",
			        d->host_frames[k].frame, md ? "`" : "",
			        100.0 * d->host_frames[k].samples / d->host_samples);
		fprintf(f, " of %u samples\n", d->host_samples);
	}
}

static void print_ops(const struct cuptrace_analysis *a, FILE *f, int md)
{
	hdr(f, md, "GPU time by op, module, NVTX range");
	if (!a->nops) {
		fputs("No GPU work was launched from inside a range.\n", f);
		return;
	}
	if (a->multi_rank) /* ops are summed over the ranks: the job's GPU time */
		fputs("Over every rank (the job's GPU time).\n\n", f);
	size_t n = a->nops < 20 ? a->nops : 20, nk = 0;
	/* Names of the ranges, then of their top kernels, shortened together per kind. */
	const char **names = calloc(n * 4 + 1, sizeof(*names));
	char **sn = calloc(n * 4 + 1, sizeof(*sn));
	unsigned *lg = calloc(n * 4 + 1, sizeof(*lg));
	int ok = names && sn && lg;
	for (size_t i = 0; ok && i < n; i++) {
		names[i] = a->ops[i].name;
		for (int k = 0; k < 3 && a->ops[i].top[k].name; k++)
			names[n + nk++] = a->ops[i].top[k].name;
	}
	ok = ok && !report_shorten(names, n, NAME_COL, sn, lg) &&
	     !report_shorten(names + n, nk, 56, sn + n, lg + n);
	struct table t = {.md = md,
	                  .ncols = 5,
	                  .head = {"#", "range", "self GPU", "total GPU", "work"},
	                  .align = "rlrrr"};
	for (size_t i = 0; i < n; i++) {
		const struct cuptrace_an_op *o = &a->ops[i];
		table_cell(&t, "%zu", i + 1);
		table_cell_text(&t, ok ? sn[i] : o->name);
		table_cell_dur(&t, o->self_ns);
		table_cell_dur(&t, o->total_ns);
		table_cell(&t, "%" PRIu64, o->self_count);
	}
	table_print(&t, f);
	if (ok)
		report_legend(f, md, names, lg, n);
	report_para(f, md, "", "\nGPU time with no range around its launch: %s.\n",
	            D(a->unattributed_ns));
	if (nk) {
		fputs(md ? "\nTop kernels of each range (self GPU time):\n\n"
		         : "\nTop kernels of each range (self GPU time):\n",
		      f);
		struct table k = {
		    .md = md, .ncols = 3, .head = {"#", "kernel", "self GPU"}, .align = "rlr"};
		for (size_t i = 0, j = 0; i < n; i++)
			for (int q = 0; q < 3 && a->ops[i].top[q].name; q++, j++) {
				table_cell(&k, "%zu", i + 1);
				table_cell_text(&k, ok ? sn[n + j] : a->ops[i].top[q].name);
				table_cell_dur(&k, a->ops[i].top[q].ns);
			}
		table_print(&k, f);
		if (ok)
			report_legend(f, md, names + n, lg + n, nk);
	}
	for (size_t i = 0; sn && i < n + nk; i++)
		free(sn[i]);
	free(names);
	free(sn);
	free(lg);
}

/* Ranks in the order of their rank numbers (those without one last, by input and pid). */
static int rank_before(const struct cuptrace_an_rank *x, const struct cuptrace_an_rank *y)
{
	if ((x->rank >= 0) != (y->rank >= 0))
		return x->rank >= 0;
	if (x->rank != y->rank)
		return x->rank < y->rank;
	if (x->file != y->file)
		return x->file < y->file;
	return x->pid < y->pid;
}

static void print_ranks(const struct cuptrace_analysis *a, FILE *f, int md)
{
	hdr(f, md, "Ranks");
	struct table t = {
	    .md = md,
	    .ncols = 7,
	    .head = {"rank", "pid", "GPU busy", "compute", "collectives", "overlap", "mean step"},
	    .align = "Lrrrrrr"};
	struct table w = {
	    .md = md,
	    .ncols = 4,
	    .head = {"rank", "host in collectives", "steps it came last", "others' wait for it"},
	    .align = "Lrrr"};
	/* Selection in rank order: the ranks are few enough, and printing is once. */
	size_t done = 0;
	unsigned char *shown = calloc(a->nranks + 1, 1);
	while (shown && done < a->nranks) {
		size_t b = SIZE_MAX;
		for (size_t i = 0; i < a->nranks; i++)
			if (!shown[i] && (b == SIZE_MAX || rank_before(&a->ranks[i], &a->ranks[b])))
				b = i;
		shown[b] = 1;
		done++;
		const struct cuptrace_an_rank *r = &a->ranks[b];
		if (!r->busy_ns && !r->nsteps && !r->host_comm_ns)
			continue; /* a process with neither GPU work nor steps */
		table_cell_text(&t, r->label ? r->label : "-");
		table_cell(&t, "%d", r->pid);
		table_cell_dur(&t, r->busy_ns);
		table_cell_dur(&t, r->compute_ns);
		table_cell_dur(&t, r->comm_ns);
		table_cell_dur(&t, r->overlap_ns);
		table_cell_dur(&t, r->step_median_ns);
		table_cell_text(&w, r->label ? r->label : "-");
		table_cell_dur(&w, r->host_comm_ns);
		table_cell(&w, "%" PRIu64, r->last_steps);
		table_cell_dur(&w, r->waited_ns);
	}
	free(shown);
	table_print(&t, f);
	fputs("\n", f);
	table_print(&w, f);
}

/* What a finding counts, for a count of n: "copies", "copy". */
static const char *count_of(uint64_t n, const char *what, char *buf, size_t cap)
{
	static const char *const one[][2] = {{"copies", "copy"},
	                                     {"stretches", "stretch"},
	                                     {"times", "time"},
	                                     {"steps it came last", "step it came last"}};
	if (!what)
		what = "times";
	for (size_t i = 0; n == 1 && i < sizeof(one) / sizeof(one[0]); i++)
		if (!strcmp(what, one[i][0]))
			return one[i][1];
	size_t len = strlen(what);
	if (n == 1 && len > 1 && what[len - 1] == 's')
		snprintf(buf, cap, "%.*s", (int)len - 1, what);
	else
		snprintf(buf, cap, "%s", what);
	return buf;
}

/* The figures a finding keeps apart, those it has, as one sentence. */
static void finding_figures(const struct cuptrace_an_finding *x, char *buf, size_t cap)
{
	size_t n = 0;
	buf[0] = 0;
	if (x->call_ns && n < cap)
		n += (size_t)snprintf(buf + n, cap - n, "%sHost time in the calls %s",
		                      n ? "; " : "", D(x->call_ns));
	if (x->work_ns && n < cap)
		n += (size_t)snprintf(buf + n, cap - n, "%sGPU work %s", n ? "; " : "",
		                      D(x->work_ns));
	if (x->idle_ns && n < cap) {
		n += (size_t)snprintf(buf + n, cap - n, "%sGPU idle it explains %s", n ? "; " : "",
		                      D(x->idle_ns));
		if (x->idle_host_ns && n < cap)
			n += (size_t)snprintf(buf + n, cap - n,
			                      " (in %s of it the host was busy outside CUDA)",
			                      D(x->idle_host_ns));
	}
}

/* What the launching threads were doing in a finding's intervals, from the samples in them. */
static void finding_samples(const struct cuptrace_an_finding *x, char *buf, size_t cap, int md)
{
	size_t n = 0;
	if (!x->host_samples) {
		snprintf(buf, cap,
		         "No host stack sample of the launching thread fell in its intervals");
		return;
	}
	n += (size_t)snprintf(buf, cap, "The launching thread was in ");
	for (size_t k = 0; k < x->nhost_frames && k < CUPTRACE_AN_HOST_FRAMES && n < cap; k++)
		n += (size_t)snprintf(buf + n, cap - n, "%s%s%s%s in %.0f%%", k ? ", " : "",
		                      md ? "`" : "", x->host_frames[k].frame, md ? "`" : "",
		                      100.0 * x->host_frames[k].samples / x->host_samples);
	if (n < cap)
		n +=
		    (size_t)snprintf(buf + n, cap - n, " of %u host stack samples in its intervals",
		                     x->host_samples);
	if (x->host_samples_owned < x->host_samples && n < cap)
		snprintf(buf + n, cap - n, " (%u of them counted for another finding)",
		         x->host_samples - x->host_samples_owned);
}

static void print_findings(const struct cuptrace_analysis *a, FILE *f, int md)
{
	char buf[1024], what[64];
	hdr(f, md, "Findings");
	if (a->multi_rank)
		report_para(f, md, "",
		            "Severe: what a finding is judged on (said with each) is at least 5%% "
		            "of its rank's steady state on some rank (from the completion of the "
		            "rank's start-up steps to that of its last; its traced span after "
		            "start-up without steps). Start-up is never severe.\n\n");
	else
		report_para(f, md, "",
		            "Severe: what a finding is judged on (said with each) is at least 5%% "
		            "of %s, %s. Start-up is never severe.\n\n",
		            a->steady_steps  ? "the steady state (the completion of the start-up "
		                               "steps to that of the last)"
		            : a->startup_end ? "the traced span after start-up (no steps)"
		                             : "the traced span (no steps)",
		            D(a->steady_to - a->steady_from));
	if (!a->nfindings) {
		fputs("Nothing found: a clean bill.\n", f);
		return;
	}
	if (!a->host_samples)
		report_para(f, md, "",
		            "What the launching thread was doing in each finding's intervals needs "
		            "host stack samples: record with `cuptrace record --sample`.\n\n");
	else
		report_para(
		    f, md, "",
		    "%" PRIu64 " host stack samples fell in the findings' intervals. A "
		    "finding counts every sample in its own; one in two findings' intervals is "
		    "counted for the finding whose GPU idle interval holds it (else the run, "
		    "else the call or copy that came first).\n\n",
		    a->findings_host_samples);
	const char *ind = md ? "  " : "    ";
	for (size_t i = 0; i < a->nfindings; i++) {
		const struct cuptrace_an_finding *x = &a->findings[i];
		char straggler[160] = "", share[256];
		if (!strcmp(x->id, "straggler") && x->top_rank != SIZE_MAX)
			snprintf(straggler, sizeof(straggler), "%s; ", who(a, x->top_rank));
		const char *of = a->multi_rank ? "its rank's" : "the";
		if (!x->judged_on)
			snprintf(share, sizeof(share), " (a note, never severe)");
		else if (x->share <= 1.0)
			snprintf(share, sizeof(share), " = %.1f%% of %s steady state, judged on %s",
			         100.0 * x->share, of, x->judged_on);
		else /* instances on concurrent streams overlap: their sum outlasts the window */
			snprintf(
			    share, sizeof(share),
			    " = %.1f times the length of %s steady state (the instances overlap "
			    "on concurrent streams), judged on %s",
			    x->share, of, x->judged_on);
		report_para(
		    f, md, ind, "%s%s%s [%s]: %s%" PRIu64 " %s; %s%s.\n", md ? "- **" : "* ",
		    x->title, md ? "**" : "", x->severe ? "severe" : "note", straggler, x->count,
		    count_of(x->count, x->count_of, what, sizeof(what)), D(x->total_ns), share);
		finding_figures(x, buf, sizeof(buf));
		if (*buf)
			report_para(f, md, ind, "%s%s.\n", ind, buf);
		if (a->multi_rank && strcmp(x->id, "straggler") && x->top_rank != SIZE_MAX)
			report_para(f, md, ind, "%sFound on %zu rank%s; the most on %s (%s).\n",
			            ind, x->nranks, x->nranks == 1 ? "" : "s", who(a, x->top_rank),
			            D(x->top_rank_ns));
		if (!strcmp(x->id, "straggler")) {
			size_t n = 0;
			buf[0] = 0;
			for (size_t k = 0; k < a->njob_steps && n < sizeof(buf); k++) {
				const struct cuptrace_an_job_step *js = &a->job_steps[k];
				if (!js->held_up || js->waited_for != x->top_rank)
					continue;
				n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s%" PRId64,
				                      n ? ", " : "", js->number);
			}
			if (*buf)
				report_para(f, md, ind, "%sSlow steps it held up: %s.\n", ind, buf);
		}
		if (a->host_samples) {
			finding_samples(x, buf, sizeof(buf), md);
			report_para(f, md, ind, "%s%s.\n", ind, buf);
		}
		report_para(f, md, ind, "%sAdvice: %s.\n", ind, x->advice);
		for (size_t k = 0; k < x->nworst; k++) {
			const struct cuptrace_an_instance *in = &x->worst[k];
			size_t n = 0;
			char cut[96];
			if (a->multi_rank)
				n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s, ",
				                      who(a, in->rank));
			n += (size_t)snprintf(buf + n, sizeof(buf) - n, "at %s: %s", D(in->ts),
			                      D(in->dur));
			if (in->tid && n < sizeof(buf))
				n += (size_t)snprintf(buf + n, sizeof(buf) - n, ", tid %" PRId64,
				                      in->tid);
			report_clean(cut, sizeof(cut), in->what ? in->what : "-", 60, md);
			if (n < sizeof(buf))
				n += (size_t)snprintf(buf + n, sizeof(buf) - n, ", %s", cut);
			if (in->op && n < sizeof(buf)) {
				report_clean(cut, sizeof(cut), in->op, 60, md);
				n += (size_t)snprintf(buf + n, sizeof(buf) - n, ", op %s", cut);
			}
			if (in->bytes && n < sizeof(buf)) {
				char b[32];
				report_bytes(b, sizeof(b), in->bytes);
				n += (size_t)snprintf(buf + n, sizeof(buf) - n, ", %s", b);
			}
			if (in->host_samples && in->host_frame && n < sizeof(buf))
				snprintf(buf + n, sizeof(buf) - n,
				         ", host in %s%s%s %.0f%% of %u samples", md ? "`" : "",
				         in->host_frame, md ? "`" : "",
				         100.0 * in->host_frame_samples / in->host_samples,
				         in->host_samples);
			report_para(f, md, "        ", "%s%s\n", md ? "  - " : "    - ", buf);
		}
	}
}

void cuptrace_analysis_print(const struct cuptrace_analysis *a, FILE *f, int md)
{
	char graphs[64] = "", k[48], c[48], m[48], g[48];
	if (a->graphs)
		snprintf(graphs, sizeof(graphs), ", %s",
		         (report_count(g, sizeof(g), a->graphs, "CUDA graph launch",
		                       "CUDA graph launches"),
		          g));
	report_count(k, sizeof(k), a->kernels, "kernel", "kernels");
	report_count(c, sizeof(c), a->copies, "copy", "copies");
	report_count(m, sizeof(m), a->memsets, "memset", "memsets");
	report_para(f, md, "",
	            "%scuptrace analyze: %s traced; %s, %s, %s%s; %" PRIu64
	            " launch call%s; %" PRIu64 " GPU work item%s linked to %s launch.\n",
	            md ? "## " : "", D(a->max_ts - a->min_ts), k, c, m, graphs, a->launches,
	            a->launches == 1 ? "" : "s", a->linked, a->linked == 1 ? "" : "s",
	            a->linked == 1 ? "its" : "their");
	if (a->unrecorded_device_graphs)
		report_para(f, md, "",
		            "%sNot recorded: what %" PRIu64 " CUDA graph%s instantiated for launch "
		            "from the GPU ran (node by node CUPTI records none of it): the GPU was "
		            "busier than below. `record --cuda-graphs graph` records those "
		            "launches.\n",
		            md ? "\n**Warning.** " : "", a->unrecorded_device_graphs,
		            a->unrecorded_device_graphs == 1 ? "" : "s");
	if (a->damage)
		report_para(f, md, "", "%sDamaged input, analyzed up to the damage: %s\n",
		            md ? "\n**Warning.** " : "", a->damage);
	print_steps(a, f, md);
	print_job_steps(a, f, md);
	print_gpus(a, f, md);
	print_ops(a, f, md);
	print_findings(a, f, md);
	if (a->multi_rank)
		print_ranks(a, f, md);
}

/* ---- JSON ---- */

static void causes(struct cuptrace_json *w, const int64_t *by)
{
	cuptrace_json_name(w, "idle_by_cause_ns");
	cuptrace_json_start_object(w);
	for (int k = 0; k < CUPTRACE_IDLE_NCAUSES; k++)
		cuptrace_json_int_field(w, cuptrace_idle_cause_names[k], by[k]);
	cuptrace_json_end_object(w);
}

static void str_or_null(struct cuptrace_json *w, const char *name, const char *s)
{
	cuptrace_json_name(w, name);
	if (s)
		cuptrace_json_string(w, s);
	else
		cuptrace_json_null(w);
}

/* A rank's number (null where the trace says none) and label, as "<prefix>rank" and
 * "<prefix>rank_label" fields. */
static void rank_fields(struct cuptrace_json *w, const struct cuptrace_analysis *a, size_t rank)
{
	const struct cuptrace_an_rank *r = rank < a->nranks ? &a->ranks[rank] : NULL;
	cuptrace_json_name(w, "rank");
	if (r && r->rank >= 0)
		cuptrace_json_int(w, r->rank);
	else
		cuptrace_json_null(w);
	str_or_null(w, "rank_label", r ? r->label : NULL);
}

static void json_job_steps(const struct cuptrace_analysis *a, struct cuptrace_json *w)
{
	cuptrace_json_name(w, "job_steps");
	cuptrace_json_start_array(w);
	for (size_t i = 0; i < a->njob_steps; i++) {
		const struct cuptrace_an_job_step *s = &a->job_steps[i];
		cuptrace_json_start_object(w);
		cuptrace_json_int_field(w, "number", s->number);
		cuptrace_json_int_field(w, "ranks", (int64_t)s->nranks);
		cuptrace_json_int_field(w, "median_wall_ns", s->median_ns);
		cuptrace_json_int_field(w, "max_wall_ns", s->max_ns);
		str_or_null(w, "slowest_rank_label", who(a, s->slowest));
		int met = s->waited_for != SIZE_MAX;
		str_or_null(w, "waited_for_rank_label", met ? who(a, s->waited_for) : NULL);
		cuptrace_json_name(w, "waited_for_rank");
		if (met && a->ranks[s->waited_for].rank >= 0)
			cuptrace_json_int(w, a->ranks[s->waited_for].rank);
		else
			cuptrace_json_null(w);
		cuptrace_json_int_field(w, "wait_ns", s->wait_ns);
		cuptrace_json_int_field(w, "extra_gpu_ns", s->extra_gpu_ns);
		cuptrace_json_int_field(w, "extra_host_ns", s->extra_host_ns);
		cuptrace_json_name(w, "outlier");
		cuptrace_json_bool(w, s->outlier);
		cuptrace_json_name(w, "startup");
		cuptrace_json_bool(w, s->startup);
		cuptrace_json_name(w, "held_up");
		cuptrace_json_bool(w, s->held_up);
		cuptrace_json_name(w, "slow");
		cuptrace_json_bool(w, s->slow);
		cuptrace_json_end_object(w);
	}
	cuptrace_json_end_array(w);
}

static void json_body(const struct cuptrace_analysis *a, struct cuptrace_json *w)
{
	cuptrace_json_start_object(w);
	cuptrace_json_string_field(w, "schema", "cuptrace-analyze/1");
	cuptrace_json_name(w, "span");
	cuptrace_json_start_object(w);
	cuptrace_json_int_field(w, "start_ns", a->min_ts);
	cuptrace_json_int_field(w, "end_ns", a->max_ts);
	cuptrace_json_end_object(w);
	cuptrace_json_name(w, "steady_state");
	cuptrace_json_start_object(w);
	cuptrace_json_int_field(w, "start_ns", a->steady_from);
	cuptrace_json_int_field(w, "end_ns", a->steady_to);
	cuptrace_json_int_field(w, "dur_ns", a->steady_to - a->steady_from);
	cuptrace_json_name(w, "from_steps");
	cuptrace_json_bool(w, a->steady_steps);
	cuptrace_json_int_field(w, "startup_end_ns", a->startup_end);
	cuptrace_json_int_field(w, "severe_min_ns", (a->steady_to - a->steady_from + 19) / 20);
	cuptrace_json_end_object(w);
	cuptrace_json_name(w, "counts");
	cuptrace_json_start_object(w);
	cuptrace_json_int_field(w, "kernels", (int64_t)a->kernels);
	cuptrace_json_int_field(w, "copies", (int64_t)a->copies);
	cuptrace_json_int_field(w, "memsets", (int64_t)a->memsets);
	if (a->graphs) /* only in traces of --cuda-graphs graph */
		cuptrace_json_int_field(w, "graph_launches", (int64_t)a->graphs);
	if (a->unrecorded_device_graphs) /* their work is missing (per-node traces) */
		cuptrace_json_int_field(w, "unrecorded_device_graphs",
		                        (int64_t)a->unrecorded_device_graphs);
	if (a->damage) /* what damaged inputs lost (read_damage) */
		cuptrace_json_string_field(w, "damage", a->damage);
	cuptrace_json_int_field(w, "launches", (int64_t)a->launches);
	cuptrace_json_int_field(w, "linked", (int64_t)a->linked);
	cuptrace_json_end_object(w);
	cuptrace_json_int_field(w, "files", (int64_t)a->nfiles);
	cuptrace_json_name(w, "multi_rank");
	cuptrace_json_bool(w, a->multi_rank);
	cuptrace_json_name(w, "steps");
	cuptrace_json_start_object(w);
	str_or_null(w, "source", a->step_source);
	str_or_null(w, "kind", a->step_kind);
	cuptrace_json_name(w, "confidence");
	cuptrace_json_double(w, a->step_confidence);
	cuptrace_json_int_field(w, "median_ns", a->step_median_ns);
	cuptrace_json_int_field(w, "min_ns", a->step_min_ns);
	cuptrace_json_int_field(w, "max_ns", a->step_max_ns);
	cuptrace_json_int_field(w, "mad_ns", a->step_mad_ns);
	cuptrace_json_name(w, "rows");
	cuptrace_json_start_array(w);
	for (size_t i = 0; i < a->nsteps; i++) {
		const struct cuptrace_an_step *s = &a->steps[i];
		cuptrace_json_start_object(w);
		cuptrace_json_string_field(w, "name", s->name);
		cuptrace_json_int_field(w, "number", s->number);
		rank_fields(w, a, s->rank);
		cuptrace_json_int_field(w, "pid", s->pid);
		cuptrace_json_int_field(w, "file", (int64_t)s->file);
		cuptrace_json_int_field(w, "tid", s->tid);
		cuptrace_json_int_field(w, "start_ns", s->ts);
		cuptrace_json_int_field(w, "period_ns", s->dur);
		cuptrace_json_int_field(w, "wall_ns", s->dur);
		cuptrace_json_int_field(w, "host_start_ns", s->host_ts);
		cuptrace_json_int_field(w, "host_dur_ns", s->host_dur);
		cuptrace_json_int_field(w, "mark_start_ns", s->mark_ts);
		cuptrace_json_int_field(w, "mark_dur_ns", s->mark_dur);
		cuptrace_json_int_field(w, "gpu_start_ns", s->gpu_ts);
		cuptrace_json_int_field(w, "gpu_end_ns", s->gpu_end);
		cuptrace_json_int_field(w, "busy_ns", s->busy_ns);
		cuptrace_json_int_field(w, "idle_ns", s->idle_ns);
		cuptrace_json_int_field(w, "gpu_work_ns", s->gpu_work_ns);
		cuptrace_json_int_field(w, "comm_ns", s->comm_ns);
		cuptrace_json_int_field(w, "host_gap_start_ns", s->host_gap_ts);
		cuptrace_json_int_field(w, "host_gap_ns", s->host_gap_ns);
		cuptrace_json_int_field(w, "host_gap_blocked_ns", s->host_gap_blocked_ns);
		cuptrace_json_int_field(w, "kernels", (int64_t)s->kernels);
		cuptrace_json_int_field(w, "launches", (int64_t)s->launches);
		cuptrace_json_name(w, "startup");
		cuptrace_json_bool(w, s->startup);
		cuptrace_json_name(w, "outlier");
		cuptrace_json_bool(w, s->outlier);
		str_or_null(w, "cause", cuptrace_step_cause_names[s->cause]);
		cuptrace_json_int_field(w, "cause_ns", s->cause_ns);
		cuptrace_json_int_field(w, "host_comm_ns", s->host_comm_ns);
		cuptrace_json_int_field(w, "arrive_ns", s->arrive_ns);
		cuptrace_json_end_object(w);
	}
	cuptrace_json_end_array(w);
	cuptrace_json_end_object(w);
	json_job_steps(a, w);
	cuptrace_json_name(w, "gpus");
	cuptrace_json_start_array(w);
	for (size_t g = 0; g < a->ngpus; g++) {
		const struct cuptrace_an_gpu *d = &a->gpus[g];
		cuptrace_json_start_object(w);
		cuptrace_json_string_field(w, "name", d->name);
		cuptrace_json_int_field(w, "pid", d->pid);
		cuptrace_json_int_field(w, "file", (int64_t)d->file);
		rank_fields(w, a, d->rank);
		cuptrace_json_int_field(w, "kernels", (int64_t)d->kernels);
		cuptrace_json_int_field(w, "copies", (int64_t)d->copies);
		cuptrace_json_int_field(w, "memsets", (int64_t)d->memsets);
		if (d->graphs) /* only in traces of --cuda-graphs graph */
			cuptrace_json_int_field(w, "graph_launches", (int64_t)d->graphs);
		cuptrace_json_int_field(w, "first_ns", d->first_ts);
		cuptrace_json_int_field(w, "last_end_ns", d->last_end);
		cuptrace_json_int_field(w, "busy_ns", d->busy_ns);
		cuptrace_json_int_field(w, "idle_ns", d->idle_ns);
		causes(w, d->idle_by_cause);
		cuptrace_json_int_field(w, "compute_ns", d->compute_ns);
		cuptrace_json_int_field(w, "comm_ns", d->comm_ns);
		cuptrace_json_int_field(w, "overlap_ns", d->overlap_ns);
		cuptrace_json_int_field(w, "startup_ns", d->startup_ns);
		cuptrace_json_int_field(w, "startup_idle_ns", d->startup_idle_ns);
		cuptrace_json_name(w, "streams");
		cuptrace_json_start_array(w);
		for (size_t s = 0; s < a->nstreams; s++) {
			const struct cuptrace_an_stream *st = &a->streams[s];
			if (st->gpu != g)
				continue;
			cuptrace_json_start_object(w);
			cuptrace_json_string_field(w, "name", st->name);
			cuptrace_json_int_field(w, "work", (int64_t)st->ops);
			cuptrace_json_int_field(w, "first_ns", st->first_ts);
			cuptrace_json_int_field(w, "last_end_ns", st->last_end);
			cuptrace_json_int_field(w, "busy_ns", st->busy_ns);
			cuptrace_json_int_field(w, "idle_ns", st->idle_ns);
			causes(w, st->idle_by_cause);
			cuptrace_json_end_object(w);
		}
		cuptrace_json_end_array(w);
		cuptrace_json_end_object(w);
	}
	cuptrace_json_end_array(w);
	cuptrace_json_name(w, "largest_idle");
	cuptrace_json_start_array(w);
	for (size_t i = 0; i < a->nidle; i++) {
		const struct cuptrace_an_idle *d = &a->idle[i];
		cuptrace_json_start_object(w);
		cuptrace_json_int_field(w, "gpu", (int64_t)d->gpu);
		cuptrace_json_int_field(w, "start_ns", d->ts);
		cuptrace_json_int_field(w, "dur_ns", d->dur);
		cuptrace_json_string_field(w, "cause", cuptrace_idle_cause_names[d->cause]);
		causes(w, d->by_cause);
		str_or_null(w, "next_work", d->next_work);
		cuptrace_json_int_field(w, "host_tid", d->host.tid);
		str_or_null(w, "host_range", d->host.range);
		str_or_null(w, "host_call", d->host.api);
		cuptrace_json_int_field(w, "host_samples", d->host_samples);
		cuptrace_json_name(w, "host_frames");
		cuptrace_json_start_array(w);
		for (size_t k = 0; k < d->nhost_frames; k++) {
			cuptrace_json_start_object(w);
			cuptrace_json_string_field(w, "frame", d->host_frames[k].frame);
			cuptrace_json_int_field(w, "samples", d->host_frames[k].samples);
			cuptrace_json_end_object(w);
		}
		cuptrace_json_end_array(w);
		rank_fields(w, a, d->rank);
		cuptrace_json_end_object(w);
	}
	cuptrace_json_end_array(w);
	cuptrace_json_name(w, "ops");
	cuptrace_json_start_array(w);
	for (size_t i = 0; i < a->nops; i++) {
		const struct cuptrace_an_op *o = &a->ops[i];
		cuptrace_json_start_object(w);
		cuptrace_json_string_field(w, "name", o->name);
		cuptrace_json_int_field(w, "self_ns", o->self_ns);
		cuptrace_json_int_field(w, "total_ns", o->total_ns);
		cuptrace_json_int_field(w, "self_work", (int64_t)o->self_count);
		cuptrace_json_name(w, "top_kernels");
		cuptrace_json_start_array(w);
		for (int k = 0; k < 3 && o->top[k].name; k++) {
			cuptrace_json_start_object(w);
			cuptrace_json_string_field(w, "name", o->top[k].name);
			cuptrace_json_int_field(w, "self_ns", o->top[k].ns);
			cuptrace_json_int_field(w, "count", (int64_t)o->top[k].count);
			cuptrace_json_end_object(w);
		}
		cuptrace_json_end_array(w);
		cuptrace_json_end_object(w);
	}
	cuptrace_json_end_array(w);
	cuptrace_json_int_field(w, "unattributed_ns", a->unattributed_ns);
	cuptrace_json_int_field(w, "findings_host_samples", (int64_t)a->findings_host_samples);
	cuptrace_json_name(w, "findings");
	cuptrace_json_start_array(w);
	for (size_t i = 0; i < a->nfindings; i++) {
		const struct cuptrace_an_finding *x = &a->findings[i];
		cuptrace_json_start_object(w);
		cuptrace_json_string_field(w, "id", x->id);
		cuptrace_json_string_field(w, "title", x->title);
		cuptrace_json_string_field(w, "advice", x->advice);
		cuptrace_json_name(w, "severe");
		cuptrace_json_bool(w, x->severe);
		cuptrace_json_int_field(w, "count", (int64_t)x->count);
		str_or_null(w, "count_of", x->count_of);
		cuptrace_json_int_field(w, "total_ns", x->total_ns);
		str_or_null(w, "judged_on", x->judged_on);
		cuptrace_json_name(w, "steady_share");
		cuptrace_json_double(w, x->share);
		cuptrace_json_int_field(w, "call_ns", x->call_ns);
		cuptrace_json_int_field(w, "gpu_work_ns", x->work_ns);
		cuptrace_json_int_field(w, "gpu_idle_ns", x->idle_ns);
		cuptrace_json_int_field(w, "gpu_idle_host_outside_ns", x->idle_host_ns);
		str_or_null(w, "dominant", x->dominant);
		cuptrace_json_int_field(w, "ranks_found", (int64_t)x->nranks);
		str_or_null(w, "top_rank_label",
		            x->top_rank != SIZE_MAX ? who(a, x->top_rank) : NULL);
		cuptrace_json_int_field(w, "top_rank_ns", x->top_rank_ns);
		cuptrace_json_int_field(w, "host_samples", x->host_samples);
		cuptrace_json_int_field(w, "host_samples_owned", x->host_samples_owned);
		cuptrace_json_name(w, "host_frames");
		cuptrace_json_start_array(w);
		for (size_t k = 0; k < x->nhost_frames && k < CUPTRACE_AN_HOST_FRAMES; k++) {
			cuptrace_json_start_object(w);
			cuptrace_json_string_field(w, "frame", x->host_frames[k].frame);
			cuptrace_json_int_field(w, "samples", x->host_frames[k].samples);
			cuptrace_json_end_object(w);
		}
		cuptrace_json_end_array(w);
		cuptrace_json_name(w, "worst");
		cuptrace_json_start_array(w);
		for (size_t k = 0; k < x->nworst; k++) {
			const struct cuptrace_an_instance *in = &x->worst[k];
			cuptrace_json_start_object(w);
			cuptrace_json_int_field(w, "start_ns", in->ts);
			cuptrace_json_int_field(w, "dur_ns", in->dur);
			cuptrace_json_int_field(w, "tid", in->tid);
			str_or_null(w, "what", in->what);
			str_or_null(w, "op", in->op);
			cuptrace_json_int_field(w, "bytes", (int64_t)in->bytes);
			cuptrace_json_int_field(w, "host_samples", in->host_samples);
			str_or_null(w, "host_frame", in->host_frame);
			cuptrace_json_int_field(w, "host_frame_samples", in->host_frame_samples);
			cuptrace_json_name(w, "pid");
			if (in->rank < a->nranks)
				cuptrace_json_int(w, a->ranks[in->rank].pid);
			else
				cuptrace_json_null(w);
			rank_fields(w, a, in->rank);
			cuptrace_json_end_object(w);
		}
		cuptrace_json_end_array(w);
		cuptrace_json_end_object(w);
	}
	cuptrace_json_end_array(w);
	cuptrace_json_name(w, "ranks");
	cuptrace_json_start_array(w);
	for (size_t i = 0; a->multi_rank && i < a->nranks; i++) {
		const struct cuptrace_an_rank *r = &a->ranks[i];
		cuptrace_json_start_object(w);
		cuptrace_json_int_field(w, "pid", r->pid);
		cuptrace_json_int_field(w, "file", (int64_t)r->file);
		rank_fields(w, a, i);
		str_or_null(w, "host", r->host);
		cuptrace_json_int_field(w, "steady_ns", r->steady_to - r->steady_from);
		cuptrace_json_int_field(w, "steps", (int64_t)r->nsteps);
		cuptrace_json_int_field(w, "last_steps", (int64_t)r->last_steps);
		cuptrace_json_int_field(w, "waited_for_ns", r->waited_ns);
		cuptrace_json_int_field(w, "busy_ns", r->busy_ns);
		cuptrace_json_int_field(w, "compute_ns", r->compute_ns);
		cuptrace_json_int_field(w, "comm_ns", r->comm_ns);
		cuptrace_json_int_field(w, "overlap_ns", r->overlap_ns);
		cuptrace_json_int_field(w, "mean_step_ns", r->step_median_ns);
		cuptrace_json_int_field(w, "host_comm_ns", r->host_comm_ns);
		cuptrace_json_end_object(w);
	}
	cuptrace_json_end_array(w);
	if (a->by_line) {
		cuptrace_json_name(w, "host_wait_lines");
		cuptrace_json_start_object(w);
		cuptrace_json_int_field(w, "host_wait_ns", a->line_wait_total_ns);
		cuptrace_json_int_field(w, "unsampled_ns", a->line_wait_unsampled_ns);
		cuptrace_json_name(w, "rows");
		cuptrace_json_start_array(w);
		for (size_t i = 0; i < a->nline_waits; i++) {
			cuptrace_json_start_object(w);
			cuptrace_json_string_field(w, "line", a->line_waits[i].line);
			cuptrace_json_int_field(w, "host_wait_ns", a->line_waits[i].wait_ns);
			cuptrace_json_int_field(w, "samples", (int64_t)a->line_waits[i].samples);
			cuptrace_json_end_object(w);
		}
		cuptrace_json_end_array(w);
		cuptrace_json_end_object(w);
	}
	cuptrace_json_end_object(w);
}

/* Host wait by source line (--group-by line), after the lines table. */
void cuptrace_analysis_print_line_waits(const struct cuptrace_analysis *a, FILE *f, int md)
{
	hdr(f, md, "Host wait by source line (host stack samples)");
	if (!a->host_samples) {
		fputs(
		    "No host stack samples in this trace: `cuptrace record --sample` records them; "
		    "then each\nline gets the GPU idle (host_wait) its thread spent there.\n",
		    f);
		return;
	}
	report_para(f, md, "",
	            "GPU idle while the launching thread was busy outside CUDA (host_wait, %s in "
	            "all), each gap's split over that thread's samples in it; %s of it had no "
	            "sample.\n\n",
	            D(a->line_wait_total_ns), D(a->line_wait_unsampled_ns));
	struct table t = {.md = md,
	                  .ncols = 4,
	                  .head = {"line", "host wait", "share", "samples"},
	                  .align = "Lrrr"};
	size_t top = 20;
	for (size_t i = 0; i < a->nline_waits && i < top; i++) {
		const struct cuptrace_an_line_wait *r = &a->line_waits[i];
		table_cell_text(&t, r->line);
		table_cell_dur(&t, r->wait_ns);
		table_cell(&t, "%.1f%%", pct(r->wait_ns, a->line_wait_total_ns));
		table_cell(&t, "%" PRIu64, r->samples);
	}
	if (a->nline_waits > top)
		more_row(&t, a->nline_waits - top);
	table_print(&t, f);
}

int cuptrace_analysis_print_json(const struct cuptrace_analysis *a, FILE *f)
{
	struct cuptrace_json *w = cuptrace_json_new(NULL);
	if (!w)
		return -ENOMEM;
	json_body(a, w);
	size_t len = 0;
	const char *buf = cuptrace_json_buffer(w, &len);
	int err = cuptrace_json_error(w);
	if (!err && (fwrite(buf, 1, len, f) != len || fputc('\n', f) == EOF))
		err = -EIO;
	cuptrace_json_free(w);
	return err;
}
