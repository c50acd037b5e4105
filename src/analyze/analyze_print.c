/* The `cuptrace analyze` report from a struct cuptrace_analysis: text, GitHub markdown, and JSON
 * (schema "cuptrace-analyze/1", documented in README "Why is it slow: analyze"). Output depends
 * only on the analysis. */
#include "analyze/analyze.h"
#include "format/json_writer.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
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
	fprintf(f,
	        "%sstep%speriod ms%sGPU extent ms%sGPU busy %%%sidle ms%skernels%slaunches%snote%s",
	        row0(md), cell(md), cell(md), cell(md), cell(md), cell(md), cell(md), cell(md),
	        rowend(md));
	sep(f, md, 8);
	size_t shown = 0, left = 0;
	for (size_t i = 0; i < a->nsteps; i++) {
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
		fprintf(f, "%s%s%s%s%.3f%s%.3f%s%.1f%s%.3f%s%" PRIu64 "%s%" PRIu64 "%s", row0(md),
		        label, s->outlier ? " (outlier)" : "", cell(md), ms(s->dur), cell(md),
		        ms(s->gpu_end - s->gpu_ts), cell(md), pct(s->busy_ns, s->dur), cell(md),
		        ms(s->idle_ns), cell(md), s->kernels, cell(md), s->launches, cell(md));
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
	fprintf(f,
	        "\n%zu steps (%s): judged (after start-up), period median %.3f ms, min %.3f, max "
	        "%.3f, MAD %.3f ms.",
	        a->nsteps, a->step_source ? a->step_source : "", ms(a->step_median_ns),
	        ms(a->step_min_ns), ms(a->step_max_ns), ms(a->step_mad_ns));
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
		fprintf(f, "%s%s (pid %d, at %.3f ms): %.3f ms; ", md ? "- " : "  - ", label,
		        s->pid, ms(s->ts), ms(s->dur));
		step_cause(s, f);
		fputs(".\n", f);
		k++;
	}
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
		fprintf(f, "%s%s (pid %d)%s%" PRIu64 "%s%.3f%s%.1f%s%.3f", row0(md), d->name,
		        d->pid, cell(md), d->kernels + d->copies + d->memsets + d->graphs, cell(md),
		        ms(d->busy_ns), cell(md), pct(d->busy_ns, win), cell(md), ms(d->idle_ns));
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
	fprintf(f, "%sstart ms%sidle ms%scause%snext work%shost thread%shost range%shost call%s",
	        row0(md), cell(md), cell(md), cell(md), cell(md), cell(md), cell(md), rowend(md));
	sep(f, md, 7);
	for (size_t i = 0; i < a->nidle; i++) {
		const struct cuptrace_an_idle *d = &a->idle[i];
		fprintf(f, "%s%.3f%s%.3f%s%s%s%.60s%s%" PRId64 "%s%.60s%s%s%s", row0(md), ms(d->ts),
		        cell(md), ms(d->dur), cell(md), cuptrace_idle_cause_names[d->cause],
		        cell(md), d->next_work ? d->next_work : "-", cell(md), d->host.tid,
		        cell(md), d->host.range ? d->host.range : "-", cell(md),
		        d->host.api ? d->host.api : "-", rowend(md));
	}
}

static void print_ops(const struct cuptrace_analysis *a, FILE *f, int md)
{
	hdr(f, md, "GPU time by op, module, NVTX range");
	if (!a->nops) {
		fputs("No GPU work was launched from inside a range.\n", f);
		return;
	}
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

static void print_findings(const struct cuptrace_analysis *a, FILE *f, int md)
{
	hdr(f, md, "Findings");
	fprintf(f, "Severe: a total of at least 5%% of %s, %.3f ms. Start-up is never severe.\n\n",
	        a->steady_steps  ? "the steady state (the completion of the start-up steps to that "
	                           "of the last)"
	        : a->startup_end ? "the traced span after start-up (no steps)"
	                         : "the traced span (no steps)",
	        ms(a->steady_to - a->steady_from));
	if (!a->nfindings) {
		fputs("Nothing found: a clean bill.\n", f);
		return;
	}
	for (size_t i = 0; i < a->nfindings; i++) {
		const struct cuptrace_an_finding *x = &a->findings[i];
		fprintf(f, "%s%s%s [%s]: %" PRIu64 " times, %.3f ms in all.\n", md ? "- **" : "* ",
		        x->title, md ? "**" : "", x->severe ? "severe" : "note", x->count,
		        ms(x->total_ns));
		fprintf(f, "%sAdvice: %s.\n", md ? "  " : "    ", x->advice);
		for (size_t k = 0; k < x->nworst; k++) {
			const struct cuptrace_an_instance *in = &x->worst[k];
			fprintf(f, "%sat %.3f ms: %.3f ms, tid %" PRId64 ", %s",
			        md ? "  - " : "    - ", ms(in->ts), ms(in->dur), in->tid,
			        in->what ? in->what : "-");
			if (in->op)
				fprintf(f, ", op %.60s", in->op);
			if (in->bytes)
				fprintf(f, ", %" PRIu64 " bytes", in->bytes);
			fputc('\n', f);
		}
	}
	if (a->nranks) {
		hdr(f, md, "Ranks");
		fprintf(f,
		        "%spid%sGPU busy ms%scompute ms%scollectives ms%soverlap ms%smean step ms%s"
		        "host in collectives ms%s",
		        row0(md), cell(md), cell(md), cell(md), cell(md), cell(md), cell(md),
		        rowend(md));
		sep(f, md, 7);
		for (size_t i = 0; i < a->nranks; i++) {
			const struct cuptrace_an_rank *r = &a->ranks[i];
			fprintf(f, "%s%d%s%.3f%s%.3f%s%.3f%s%.3f%s%.3f%s%.3f%s", row0(md), r->pid,
			        cell(md), ms(r->busy_ns), cell(md), ms(r->compute_ns), cell(md),
			        ms(r->comm_ns), cell(md), ms(r->overlap_ns), cell(md),
			        ms(r->step_median_ns), cell(md), ms(r->host_comm_ns), rowend(md));
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
	print_gpus(a, f, md);
	print_ops(a, f, md);
	print_findings(a, f, md);
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
		cuptrace_json_end_object(w);
	}
	cuptrace_json_end_array(w);
	cuptrace_json_end_object(w);
	cuptrace_json_name(w, "gpus");
	cuptrace_json_start_array(w);
	for (size_t g = 0; g < a->ngpus; g++) {
		const struct cuptrace_an_gpu *d = &a->gpus[g];
		cuptrace_json_start_object(w);
		cuptrace_json_string_field(w, "name", d->name);
		cuptrace_json_int_field(w, "pid", d->pid);
		cuptrace_json_int_field(w, "file", (int64_t)d->file);
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
		cuptrace_json_int_field(w, "total_ns", x->total_ns);
		cuptrace_json_int_field(w, "gpu_idle_ns", x->idle_ns);
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
			cuptrace_json_end_object(w);
		}
		cuptrace_json_end_array(w);
		cuptrace_json_end_object(w);
	}
	cuptrace_json_end_array(w);
	cuptrace_json_name(w, "ranks");
	cuptrace_json_start_array(w);
	for (size_t i = 0; i < a->nranks; i++) {
		const struct cuptrace_an_rank *r = &a->ranks[i];
		cuptrace_json_start_object(w);
		cuptrace_json_int_field(w, "pid", r->pid);
		cuptrace_json_int_field(w, "file", (int64_t)r->file);
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
