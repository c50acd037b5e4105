/* The `cuptrace analyze` report from a struct cuptrace_analysis: text, GitHub markdown, and JSON
 * (schema "cuptrace-analyze/1", documented in README "Why is it slow: analyze"). Output depends
 * only on the analysis. */
#include "why/analyze.h"
#include "format/json_writer.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double ms(int64_t ns)
{
	return (double)ns / 1e6;
}

static double pct(int64_t part, int64_t whole)
{
	return whole > 0 ? 100.0 * (double)part / (double)whole : 0.0;
}

/* A table row: cells separated by " | " in markdown, by two spaces otherwise. */
static void print_idle_samples(const struct cuptrace_analysis *a, FILE *f, int md);

static void hdr(FILE *f, int md, const char *title)
{
	fprintf(f, md ? "\n### %s\n\n" : "\n== %s ==\n", title);
}

static void sep(FILE *f, int md, int cols)
{
	if (!md)
		return;
	fputc('|', f);
	for (int i = 0; i < cols; i++)
		fputs("---|", f);
	fputc('\n', f);
}

static const char *row0(int md)
{
	return md ? "| " : "";
}
static const char *cell(int md)
{
	return md ? " | " : "  ";
}
static const char *rowend(int md)
{
	return md ? " |\n" : "\n";
}

/* Where the steps came from, in words. */
static void step_source(const struct cuptrace_analysis *a, FILE *f)
{
	const char *k = a->step_kind ? a->step_kind : "";
	if (!strcmp(k, "option"))
		fprintf(f, "Steps: the ranges named \"%s\" (--step), numbered or not.\n",
		        a->step_source);
	else if (!strcmp(k, "profiler_step"))
		fputs("Steps: torch.profiler's ProfilerStep#N ranges.\n", f);
	else if (!strcmp(k, "nvtx_family"))
		fprintf(f, "Steps: the numbered ranges \"%s N\".\n", a->step_source);
	else if (!strcmp(k, "optimizer"))
		fprintf(f,
		        "Steps: %s, each from the end of the previous one to the end of its own.\n",
		        !strcmp(a->step_source, "optimizer.step")
		            ? "the optimizer.step() marks `record` makes"
		            : "--pytorch's Optimizer.step# ranges");
	else if (!strcmp(k, "gpu_period"))
		fprintf(f,
		        "Steps: no marks; iterations found in the GPU work, its launches repeating "
		        "(confidence %.2f).\n",
		        a->step_confidence);
	else
		fputs("Steps: from several sources (the processes differ; JSON rows say which).\n",
		      f);
}

/* What made an outlier slow, in words. */
static void step_cause(const struct cuptrace_an_step *s, FILE *f)
{
	switch (s->cause) {
	case CUPTRACE_STEP_CAUSE_GPU_WORK:
		fprintf(f, "GPU work %.3f ms over the median", ms(s->cause_ns));
		break;
	case CUPTRACE_STEP_CAUSE_HOST_GAP:
	case CUPTRACE_STEP_CAUSE_HOST_SYNC:
		fprintf(f,
		        "GPU idle %.3f ms over the median, the host %s (its longest launch-free "
		        "stretch %.3f ms, %s)",
		        ms(s->cause_ns),
		        s->cause == CUPTRACE_STEP_CAUSE_HOST_GAP ? "busy outside CUDA"
		                                                 : "in blocking CUDA calls",
		        ms(s->host_gap_ns),
		        s->host_gap_ts <= s->host_ts && s->launches ? "before its first launch"
		                                                    : "inside it");
		break;
	case CUPTRACE_STEP_CAUSE_COLLECTIVE:
		fprintf(f, "collectives %.3f ms over the median (a wait for another rank)",
		        ms(s->cause_ns));
		break;
	default:
		fputs("no single part grew", f);
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

/* The rank and number cells of a step row with several ranks ("" with one). */
static const char *step_who(const struct cuptrace_analysis *a, const struct cuptrace_an_step *s,
                            int md, char *buf, size_t len)
{
	if (!a->multi_rank)
		return "";
	snprintf(buf, len, "%s%s%" PRId64 "%s", who(a, s->rank), cell(md), s->number, cell(md));
	return buf;
}

/* With many ranks the per-rank step rows are left to the JSON: the job's steps say it. */
enum { AN_PRINT_RANK_ROWS = 8 };

static void print_steps(const struct cuptrace_analysis *a, FILE *f, int md)
{
	if (!a->nsteps) {
		fprintf(f,
		        "%sNo steps found: no step marks (--step NAME, ProfilerStep#N, numbered "
		        "ranges, optimizer.step()) and no repeating GPU work (best try: confidence "
		        "%.2f).\n",
		        md ? "\n" : "\n== Steps ==\n", a->step_confidence);
		return;
	}
	hdr(f, md, "Steps");
	step_source(a, f);
	fputs("A step's period runs from the previous step's completion to its own: the later of "
	      "its mark's end and the end of the GPU work launched in it (in an async loop, when "
	      "the GPU finished it). GPU extent: that work's first start to its last end; busy % "
	      "over the period.\n\n",
	      f);
	size_t ranks = 0;
	for (size_t i = 0; i < a->nranks; i++)
		ranks += a->ranks[i].nsteps > 0;
	int rows = !a->multi_rank || ranks <= AN_PRINT_RANK_ROWS;
	char wb[320];
	if (rows) {
		fprintf(
		    f,
		    "%s%sstep%speriod ms%sGPU extent ms%sGPU busy %%%sidle ms%skernels%slaunches%s"
		    "note%s",
		    row0(md), a->multi_rank ? (md ? "rank | # | " : "rank  #  ") : "", cell(md),
		    cell(md), cell(md), cell(md), cell(md), cell(md), cell(md), rowend(md));
		sep(f, md, 8 + 2 * a->multi_rank);
	} else {
		fprintf(f,
		        "%zu ranks: their steps one by one are in --json (steps.rows); the job's "
		        "steps by number below.\n",
		        ranks);
	}
	size_t shown = 0, left = 0;
	for (size_t i = 0; rows && i < a->nsteps; i++) {
		const struct cuptrace_an_step *s = &a->steps[i];
		int keep = a->nsteps <= STEP_ROWS || i < 3 || i + 1 == a->nsteps ||
		           (s->outlier && shown < STEP_ROWS);
		if (!keep) {
			left++;
			continue;
		}
		if (left) {
			fprintf(f, "%s... %zu more%s", row0(md), left,
			        md ? " | | | | | | | |\n" : "\n");
			left = 0;
		}
		shown++;
		char label[96];
		step_label(s, label, sizeof(label));
		fprintf(f, "%s%s%s%s%s%.3f%s%.3f%s%.1f%s%.3f%s%" PRIu64 "%s%" PRIu64 "%s", row0(md),
		        step_who(a, s, md, wb, sizeof(wb)), label, s->outlier ? " (outlier)" : "",
		        cell(md), ms(s->dur), cell(md), ms(s->gpu_end - s->gpu_ts), cell(md),
		        pct(s->busy_ns, s->dur), cell(md), ms(s->idle_ns), cell(md), s->kernels,
		        cell(md), s->launches, cell(md));
		if (s->startup)
			fputs("start-up", f);
		else if (s->outlier) {
			fputs("slow: ", f);
			step_cause(s, f);
		}
		fputs(rowend(md), f);
	}
	if (left)
		fprintf(f, "%s... %zu more%s", row0(md), left, md ? " | | | | | | | |\n" : "\n");
	size_t nout = 0;
	for (size_t i = 0; i < a->nsteps; i++)
		nout += a->steps[i].outlier;
	fprintf(f, "\n%zu steps (%s)", a->nsteps, a->step_source ? a->step_source : "");
	if (a->multi_rank)
		fprintf(f, " over %zu ranks", ranks);
	fprintf(f,
	        ": judged (after start-up), period median %.3f ms, min %.3f, max %.3f, MAD %.3f "
	        "ms.",
	        ms(a->step_median_ns), ms(a->step_min_ns), ms(a->step_max_ns), ms(a->step_mad_ns));
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
		if (a->multi_rank)
			fprintf(f, "%s%s (%s, at %.3f ms): %.3f ms; ", md ? "- " : "  - ", label,
			        who(a, s->rank), ms(s->ts), ms(s->dur));
		else
			fprintf(f, "%s%s (pid %d, at %.3f ms): %.3f ms; ", md ? "- " : "  - ",
			        label, s->pid, ms(s->ts), ms(s->dur));
		step_cause(s, f);
		fputs(".\n", f);
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
	fprintf(f,
	        "%sstep%sranks%smedian wall ms%sslowest rank%sits wall ms%swaited for%s"
	        "others' wait ms%sits GPU work +ms%sits host +ms%sslow%s",
	        row0(md), cell(md), cell(md), cell(md), cell(md), cell(md), cell(md), cell(md),
	        cell(md), cell(md), rowend(md));
	sep(f, md, 10);
	for (size_t i = 0; i < a->njob_steps; i++) {
		const struct cuptrace_an_job_step *s = &a->job_steps[i];
		int met = s->waited_for != SIZE_MAX;
		fprintf(f, "%s%" PRId64 "%s%zu%s%.3f%s%s%s%.3f%s%s", row0(md), s->number, cell(md),
		        s->nranks, cell(md), ms(s->median_ns), cell(md), who(a, s->slowest),
		        cell(md), ms(s->max_ns), cell(md), met ? who(a, s->waited_for) : "-");
		if (met)
			fprintf(f, "%s%.3f%s%+.3f%s%+.3f", cell(md), ms(s->wait_ns), cell(md),
			        ms(s->extra_gpu_ns), cell(md), ms(s->extra_host_ns));
		else
			fprintf(f, "%s-%s-%s-", cell(md), cell(md), cell(md));
		const char *what = s->startup                 ? "start-up"
		                   : s->held_up && s->outlier ? "held up, outlier"
		                   : s->held_up               ? "held up"
		                   : s->outlier               ? "outlier"
		                                              : "-";
		fprintf(f, "%s%s%s", cell(md), what, rowend(md));
	}
	int any = 0;
	for (size_t i = 0; i < a->njob_steps; i++) {
		const struct cuptrace_an_job_step *s = &a->job_steps[i];
		if (!s->slow)
			continue;
		fprintf(f, "%s%" PRId64, any++ ? "; " : "\nSlow steps: ", s->number);
		if (s->held_up)
			fprintf(f,
			        " (%s held up the others: they waited %.3f ms for it; its GPU work "
			        "%+.3f ms, host %+.3f ms before its collective)",
			        who(a, s->waited_for), ms(s->wait_ns), ms(s->extra_gpu_ns),
			        ms(s->extra_host_ns));
		else
			fprintf(
			    f,
			    " (an outlier, nobody held up beyond the usual; slowest %s, %.3f ms)",
			    who(a, s->slowest), ms(s->max_ns));
	}
	fputs(any ? ".\n" : "\nNo slow steps.\n", f);
}

static void print_gpus(const struct cuptrace_analysis *a, FILE *f, int md)
{
	hdr(f, md, "GPU busy and idle");
	if (!a->ngpus) {
		fputs("No GPU work (kernels, copies, memsets) in the trace.\n", f);
		return;
	}
	if (a->steady_steps)
		fputs(
		    "The steady state: from the completion of the start-up steps to that of the "
		    "last (start-up on a line of its own, work after the last step left out).\n\n",
		    f);
	else if (a->startup_end)
		fprintf(f,
		        "No steps: from the end of start-up at %.3f ms (the last long one-off GPU "
		        "idle: model load, compilation) to the end (start-up on a line of its "
		        "own).\n\n",
		        ms(a->startup_end));
	else
		fputs("The whole trace (no steps, no start-up phase found).\n\n", f);
	fprintf(f, "%sGPU / stream%swork%sbusy ms%sbusy %%%sidle ms", row0(md), cell(md), cell(md),
	        cell(md), cell(md));
	for (int k = 0; k < CUPTRACE_IDLE_NCAUSES; k++)
		fprintf(f, "%s%s", cell(md), cuptrace_idle_cause_names[k]);
	fputs(rowend(md), f);
	sep(f, md, 5 + CUPTRACE_IDLE_NCAUSES);
	for (size_t g = 0; g < a->ngpus; g++) {
		const struct cuptrace_an_gpu *d = &a->gpus[g];
		int64_t win = d->last_end - d->first_ts;
		if (a->multi_rank)
			fprintf(f, "%s%s · %s", row0(md), who(a, d->rank), d->name);
		else
			fprintf(f, "%s%s (pid %d)", row0(md), d->name, d->pid);
		fprintf(f, "%s%" PRIu64 "%s%.3f%s%.1f%s%.3f", cell(md),
		        d->kernels + d->copies + d->memsets + d->graphs, cell(md), ms(d->busy_ns),
		        cell(md), pct(d->busy_ns, win), cell(md), ms(d->idle_ns));
		for (int k = 0; k < CUPTRACE_IDLE_NCAUSES; k++)
			fprintf(f, "%s%.3f", cell(md), ms(d->idle_by_cause[k]));
		fputs(rowend(md), f);
		if (d->startup_ns)
			fprintf(f, "%s  start-up: %.3f ms, of which idle %.3f ms%s", row0(md),
			        ms(d->startup_ns), ms(d->startup_idle_ns), md ? " |" : "\n");
		if (d->startup_ns && md) {
			for (int k = 0; k < 4 + CUPTRACE_IDLE_NCAUSES; k++)
				fputs(" |", f);
			fputc('\n', f);
		}
		for (size_t s = 0; s < a->nstreams; s++) {
			const struct cuptrace_an_stream *st = &a->streams[s];
			if (st->gpu != g)
				continue;
			fprintf(f, "%s  %s%s%" PRIu64 "%s%.3f%s%.1f%s%.3f", row0(md), st->name,
			        cell(md), st->ops, cell(md), ms(st->busy_ns), cell(md),
			        pct(st->busy_ns, st->last_end - st->first_ts), cell(md),
			        ms(st->idle_ns));
			for (int k = 0; k < CUPTRACE_IDLE_NCAUSES; k++)
				fprintf(f, "%s%.3f", cell(md), ms(st->idle_by_cause[k]));
			fputs(rowend(md), f);
		}
	}
	if (!a->nidle)
		return;
	hdr(f, md, "Largest GPU idle intervals");
	fprintf(f, "%s%sstart ms%sidle ms%scause%snext work%shost thread%shost range%shost call%s",
	        row0(md), a->multi_rank ? (md ? "rank | " : "rank  ") : "", cell(md), cell(md),
	        cell(md), cell(md), cell(md), cell(md), rowend(md));
	sep(f, md, 7 + a->multi_rank);
	for (size_t i = 0; i < a->nidle; i++) {
		const struct cuptrace_an_idle *d = &a->idle[i];
		if (a->multi_rank)
			fprintf(f, "%s%s%s", row0(md), who(a, d->rank), cell(md));
		fprintf(f, "%s%.3f%s%.3f%s%s%s%.60s%s%" PRId64 "%s%.60s%s%s%s",
		        a->multi_rank ? "" : row0(md), ms(d->ts), cell(md), ms(d->dur), cell(md),
		        cuptrace_idle_cause_names[d->cause], cell(md),
		        d->next_work ? d->next_work : "-", cell(md), d->host.tid, cell(md),
		        d->host.range ? d->host.range : "-", cell(md),
		        d->host.api ? d->host.api : "-", rowend(md));
	}
	print_idle_samples(a, f, md);
}

/* What the launching thread did in each of the largest idle intervals, from its host stack
 * samples (record --sample, issue 46); without samples, how to get them. */
static void print_idle_samples(const struct cuptrace_analysis *a, FILE *f, int md)
{
	fputc('\n', f);
	if (!a->host_samples) {
		fputs("No host stack samples in this trace: `cuptrace record --sample` records "
		      "what the "
		      "launching thread was doing in each interval.\n",
		      f);
		return;
	}
	fputs("What the launching thread was doing (host stack samples):\n\n", f);
	for (size_t i = 0; i < a->nidle; i++) {
		const struct cuptrace_an_idle *d = &a->idle[i];
		fprintf(f, "%sidle %.3f ms at %.3f ms, thread %" PRId64 ": ", md ? "- " : "  ",
		        ms(d->dur), ms(d->ts), d->host.tid);
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
	fprintf(f, "%srange%sself GPU ms%stotal GPU ms%swork%stop kernels (self ms)%s", row0(md),
	        cell(md), cell(md), cell(md), cell(md), rowend(md));
	sep(f, md, 5);
	size_t n = a->nops < 20 ? a->nops : 20;
	for (size_t i = 0; i < n; i++) {
		const struct cuptrace_an_op *o = &a->ops[i];
		fprintf(f, "%s%.60s%s%.3f%s%.3f%s%" PRIu64 "%s", row0(md), o->name, cell(md),
		        ms(o->self_ns), cell(md), ms(o->total_ns), cell(md), o->self_count,
		        cell(md));
		for (int k = 0; k < 3 && o->top[k].name; k++)
			fprintf(f, "%s%.50s (%.3f)", k ? "; " : "", o->top[k].name,
			        ms(o->top[k].ns));
		fputs(rowend(md), f);
	}
	fprintf(f, "\nGPU time with no range around its launch: %.3f ms.\n",
	        ms(a->unattributed_ns));
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
	fprintf(f,
	        "%srank%spid%sGPU busy ms%scompute ms%scollectives ms%soverlap ms%smean step ms%s"
	        "host in collectives ms%ssteps it came last%sothers' wait for it ms%s",
	        row0(md), cell(md), cell(md), cell(md), cell(md), cell(md), cell(md), cell(md),
	        cell(md), cell(md), rowend(md));
	sep(f, md, 10);
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
		fprintf(f, "%s%s%s%d%s%.3f%s%.3f%s%.3f%s%.3f%s%.3f%s%.3f%s%" PRIu64 "%s%.3f%s",
		        row0(md), r->label ? r->label : "-", cell(md), r->pid, cell(md),
		        ms(r->busy_ns), cell(md), ms(r->compute_ns), cell(md), ms(r->comm_ns),
		        cell(md), ms(r->overlap_ns), cell(md), ms(r->step_median_ns), cell(md),
		        ms(r->host_comm_ns), cell(md), r->last_steps, cell(md), ms(r->waited_ns),
		        rowend(md));
	}
	free(shown);
}

/* What a finding counts, for a count of n: "copies", "copy". */
static void count_of(FILE *f, uint64_t n, const char *what)
{
	static const char *const one[][2] = {{"copies", "copy"},
	                                     {"stretches", "stretch"},
	                                     {"steps it came last", "step it came last"}};
	if (!what)
		what = "times";
	for (size_t i = 0; n == 1 && i < sizeof(one) / sizeof(one[0]); i++)
		if (!strcmp(what, one[i][0])) {
			fputs(one[i][1], f);
			return;
		}
	size_t len = strlen(what);
	if (n == 1 && len > 1 && what[len - 1] == 's')
		fprintf(f, "%.*s", (int)len - 1, what);
	else
		fputs(what, f);
}

/* The figures a finding keeps apart, those it has. */
static void print_figures(const struct cuptrace_an_finding *x, FILE *f, const char *ind)
{
	int any = 0;
	if (x->call_ns)
		fprintf(f, "%sHost time in the calls %.3f ms", any++ ? "; " : ind, ms(x->call_ns));
	if (x->work_ns)
		fprintf(f, "%sGPU work %.3f ms", any++ ? "; " : ind, ms(x->work_ns));
	if (x->idle_ns) {
		fprintf(f, "%sGPU idle it explains %.3f ms", any++ ? "; " : ind, ms(x->idle_ns));
		if (x->idle_host_ns)
			fprintf(f, " (in %.3f ms of it the host was busy outside CUDA)",
			        ms(x->idle_host_ns));
	}
	if (any)
		fputs(".\n", f);
}

static void print_findings(const struct cuptrace_analysis *a, FILE *f, int md)
{
	hdr(f, md, "Findings");
	if (a->multi_rank)
		fprintf(
		    f,
		    "Severe: what a finding is judged on (said with each) is at least 5%% of its "
		    "rank's steady state on some rank (from the completion of the rank's start-up "
		    "steps to that of its last; its traced span after start-up without steps). "
		    "Start-up is never severe.\n\n");
	else
		fprintf(
		    f,
		    "Severe: what a finding is judged on (said with each) is at least 5%% of %s, "
		    "%.3f ms. Start-up is never severe.\n\n",
		    a->steady_steps  ? "the steady state (the completion of the start-up steps "
		                       "to that of the last)"
		    : a->startup_end ? "the traced span after start-up (no steps)"
		                     : "the traced span (no steps)",
		    ms(a->steady_to - a->steady_from));
	if (!a->nfindings) {
		fputs("Nothing found: a clean bill.\n", f);
		return;
	}
	const char *ind = md ? "  " : "    ";
	for (size_t i = 0; i < a->nfindings; i++) {
		const struct cuptrace_an_finding *x = &a->findings[i];
		fprintf(f, "%s%s%s [%s]: ", md ? "- **" : "* ", x->title, md ? "**" : "",
		        x->severe ? "severe" : "note");
		if (!strcmp(x->id, "straggler") && x->top_rank != SIZE_MAX)
			fprintf(f, "%s; ", who(a, x->top_rank));
		fprintf(f, "%" PRIu64 " ", x->count);
		count_of(f, x->count, x->count_of);
		fprintf(f, "; %.3f ms", ms(x->total_ns));
		if (x->judged_on)
			fprintf(f, " = %.1f%% of %s steady state, judged on %s.\n",
			        100.0 * x->share, a->multi_rank ? "its rank's" : "the",
			        x->judged_on);
		else
			fputs(" (a note, never severe).\n", f);
		print_figures(x, f, ind);
		if (a->multi_rank && strcmp(x->id, "straggler") && x->top_rank != SIZE_MAX)
			fprintf(f, "%sFound on %zu rank%s; the most on %s (%.3f ms).\n", ind,
			        x->nranks, x->nranks == 1 ? "" : "s", who(a, x->top_rank),
			        ms(x->top_rank_ns));
		if (!strcmp(x->id, "straggler")) {
			int any = 0;
			for (size_t k = 0; k < a->njob_steps; k++) {
				const struct cuptrace_an_job_step *js = &a->job_steps[k];
				if (!js->held_up || js->waited_for != x->top_rank)
					continue;
				if (!any++)
					fprintf(f, "%sSlow steps it held up: ", ind);
				else
					fputs(", ", f);
				fprintf(f, "%" PRId64, js->number);
			}
			if (any)
				fputs(".\n", f);
		}
		fprintf(f, "%sAdvice: %s.\n", ind, x->advice);
		for (size_t k = 0; k < x->nworst; k++) {
			const struct cuptrace_an_instance *in = &x->worst[k];
			fputs(md ? "  - " : "    - ", f);
			if (a->multi_rank)
				fprintf(f, "%s, ", who(a, in->rank));
			fprintf(f, "at %.3f ms: %.3f ms", ms(in->ts), ms(in->dur));
			if (in->tid)
				fprintf(f, ", tid %" PRId64, in->tid);
			fprintf(f, ", %s", in->what ? in->what : "-");
			if (in->op)
				fprintf(f, ", op %.60s", in->op);
			if (in->bytes)
				fprintf(f, ", %" PRIu64 " bytes", in->bytes);
			fputc('\n', f);
		}
	}
}

void cuptrace_analysis_print(const struct cuptrace_analysis *a, FILE *f, int md)
{
	char graphs[64] = "";
	if (a->graphs)
		snprintf(graphs, sizeof(graphs), ", %" PRIu64 " CUDA graph launches", a->graphs);
	fprintf(f,
	        "%scuptrace analyze: %.3f ms traced; %" PRIu64 " kernels, %" PRIu64
	        " copies, %" PRIu64 " memsets%s; %" PRIu64 " launch calls; %" PRIu64
	        " GPU work items linked to their launch.\n",
	        md ? "## " : "", ms(a->max_ts - a->min_ts), a->kernels, a->copies, a->memsets,
	        graphs, a->launches, a->linked);
	if (a->unrecorded_device_graphs)
		fprintf(
		    f,
		    "%sNot recorded: what %" PRIu64 " CUDA graph%s instantiated for launch from "
		    "the GPU ran (node by node CUPTI records none of it): the GPU was busier than "
		    "below. `record --cuda-graphs graph` records those launches.\n",
		    md ? "\n**Warning.** " : "", a->unrecorded_device_graphs,
		    a->unrecorded_device_graphs == 1 ? "" : "s");
	if (a->damage)
		fprintf(f, "%sDamaged input, analyzed up to the damage: %s\n",
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
	cuptrace_json_end_object(w);
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
