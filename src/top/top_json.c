/* cuptrace top --json: one object per interval (keys in src/top/README.md). Every row of the
 * interval is listed (not only the screen's top rows), so that a script summing the intervals
 * gets the run's totals. */
#include "top/top.h"

#include <stdlib.h>

#include "format/json_writer.h"
#include "stats/report.h"

static double pct(int64_t a, int64_t b)
{
	return b > 0 ? 100.0 * (double)a / (double)b : 0.0;
}

static double per_s(double v, int64_t dt)
{
	return dt > 0 ? v * 1e9 / (double)dt : 0.0;
}

/* The rows of tab with work in the last interval, by time; share: of the sum of the interval's
 * times. */
static int rows(struct cuptrace_json *w, const char *key, const struct top_tab *tab,
                const struct cuptrace_top *t, int with_pid)
{
	size_t *o = cuptrace_top_order(tab, TOP_SORT_TIME);
	if (tab->n && !o)
		return -1;
	int64_t sum = 0;
	for (size_t i = 0; i < tab->n; i++)
		sum += tab->v[i].last.ns;
	cuptrace_json_name(w, key);
	cuptrace_json_start_array(w);
	for (size_t i = 0; i < tab->n; i++) {
		const struct top_row *r = &tab->v[o[i]];
		if (!r->last.calls)
			continue;
		cuptrace_json_start_object(w);
		cuptrace_json_string_field(w, "name", r->name);
		if (with_pid)
			cuptrace_json_int_field(w, "pid", t->procs[r->proc].pid);
		cuptrace_json_int_field(w, "calls", (int64_t)r->last.calls);
		cuptrace_json_int_field(w, "ns", r->last.ns);
		cuptrace_json_name(w, "share_pct");
		cuptrace_json_double(w, pct(r->last.ns, sum));
		cuptrace_json_int_field(w, "avg_ns", r->last.ns / (int64_t)r->last.calls);
		cuptrace_json_int_field(w, "total_calls", (int64_t)r->tot.calls);
		cuptrace_json_int_field(w, "total_ns", r->tot.ns);
		cuptrace_json_end_object(w);
	}
	cuptrace_json_end_array(w);
	free(o);
	return 0;
}

static void stat_fields(struct cuptrace_json *w, const char *calls, const char *ns,
                        const struct top_stat *s)
{
	cuptrace_json_int_field(w, calls, (int64_t)s->calls);
	cuptrace_json_int_field(w, ns, s->ns);
}

/* {"host_wait": ns, ...}: analyze's keys (idle_by_cause_ns). */
static void causes(struct cuptrace_json *w, const char *key, const int64_t *by)
{
	cuptrace_json_name(w, key);
	cuptrace_json_start_object(w);
	for (int k = 0; k < CUPTRACE_IDLE_NCAUSES; k++)
		cuptrace_json_int_field(w, cuptrace_idle_cause_names[k], by[k]);
	cuptrace_json_end_object(w);
}

/* A percentage of one core, or null when not known. */
static void cpu(struct cuptrace_json *w, const char *key, double v)
{
	cuptrace_json_name(w, key);
	if (v < 0)
		cuptrace_json_null(w);
	else
		cuptrace_json_double(w, v);
}

int cuptrace_top_json(const struct cuptrace_top *t, FILE *f, double t_s)
{
	struct cuptrace_json *w = report_json_begin("cuptrace-top/1");
	if (!w)
		return -1;
	int err = 0;
	int64_t dt = t->last_dt;
	cuptrace_json_int_field(w, "interval", (int64_t)t->interval);
	cuptrace_json_name(w, "t_s");
	cuptrace_json_double(w, t_s);
	cuptrace_json_name(w, "interval_s");
	cuptrace_json_double(w, (double)dt / 1e9);
	uint64_t kcalls = 0, dropped = 0;
	for (size_t i = 0; i < t->nprocs; i++) {
		kcalls += t->procs[i].kern_last.calls;
		dropped += t->procs[i].dropped_cupti + t->procs[i].dropped_cuptrace;
	}
	cuptrace_json_name(w, "kernels_per_s");
	cuptrace_json_double(w, per_s((double)kcalls, dt));
	cuptrace_json_name(w, "procs");
	cuptrace_json_start_array(w);
	for (size_t i = 0; i < t->nprocs; i++) {
		const struct top_proc *p = &t->procs[i];
		cuptrace_json_start_object(w);
		cuptrace_json_int_field(w, "pid", p->pid);
		cuptrace_json_string_field(w, "name", p->name);
		cuptrace_json_name(w, "ended");
		cuptrace_json_bool(w, p->ended);
		cuptrace_json_int_field(w, "dropped",
		                        (int64_t)(p->dropped_cupti + p->dropped_cuptrace));
		stat_fields(w, "kernels", "kernel_ns", &p->kern_last);
		stat_fields(w, "api_calls", "api_ns", &p->api_last);
		cuptrace_json_name(w, "busy_pct");
		cuptrace_json_double(w, pct(p->busy_last, p->win_last * (int64_t)p->ngpus));
		cpu(w, "tracer_cpu_pct", p->tracer_cpu_pct);
		cuptrace_json_int_field(w, "tracer_threads", p->tracer_threads);
		cuptrace_json_end_object(w);
	}
	cuptrace_json_end_array(w);
	cuptrace_json_name(w, "gpus");
	cuptrace_json_start_array(w);
	for (size_t i = 0; i < t->ngpus; i++) {
		const struct top_gpu *g = &t->gpus[i];
		cuptrace_json_start_object(w);
		cuptrace_json_string_field(w, "name", g->name);
		cuptrace_json_int_field(w, "pid", t->procs[g->proc].pid);
		cuptrace_json_name(w, "busy_pct");
		cuptrace_json_double(w, pct(g->busy_last, g->win_last));
		cuptrace_json_name(w, "busy_pct_total");
		cuptrace_json_double(w, pct(g->busy_tot, g->win_tot));
		cuptrace_json_int_field(w, "window_ns", g->win_last);
		cuptrace_json_int_field(w, "busy_ns", g->busy_last);
		cuptrace_json_name(w, "mem_bytes");
		if (g->have_mem)
			cuptrace_json_int(w, g->mem);
		else
			cuptrace_json_null(w);
		cuptrace_json_name(w, "mem_peak_bytes");
		if (g->have_mem)
			cuptrace_json_int(w, g->mem_peak);
		else
			cuptrace_json_null(w);
		stat_fields(w, "kernels", "kernel_ns", &g->kern_last);
		causes(w, "idle_by_cause_ns", g->idle_last);
		causes(w, "idle_by_cause_total_ns", g->idle_tot);
		cuptrace_json_end_object(w);
	}
	cuptrace_json_end_array(w);
	if (rows(w, "kernels", &t->kernels, t, 0) || rows(w, "api", &t->api, t, 0) ||
	    rows(w, "streams", &t->streams, t, 1) || rows(w, "nccl", &t->nccl, t, 0))
		err = -1;
	const struct top_copy *c = &t->copy_last;
	uint64_t cb = c->htod + c->dtoh + c->other;
	cuptrace_json_name(w, "copies");
	cuptrace_json_start_object(w);
	cuptrace_json_int_field(w, "count", (int64_t)c->count);
	cuptrace_json_name(w, "htod_bytes_per_s");
	cuptrace_json_double(w, per_s((double)c->htod, dt));
	cuptrace_json_name(w, "dtoh_bytes_per_s");
	cuptrace_json_double(w, per_s((double)c->dtoh, dt));
	cuptrace_json_name(w, "other_bytes_per_s");
	cuptrace_json_double(w, per_s((double)c->other, dt));
	cuptrace_json_name(w, "pageable_pct");
	cuptrace_json_double(w, cb ? 100.0 * (double)c->pageable / (double)cb : 0.0);
	cuptrace_json_int_field(w, "total_bytes",
	                        (int64_t)(t->copy_tot.htod + t->copy_tot.dtoh + t->copy_tot.other));
	cuptrace_json_end_object(w);
	cuptrace_json_name(w, "steps");
	cuptrace_json_start_object(w);
	cuptrace_json_int_field(w, "count", (int64_t)t->step_last.calls);
	cuptrace_json_name(w, "per_s");
	cuptrace_json_double(w, per_s((double)t->step_last.calls, dt));
	cuptrace_json_int_field(w, "total", (int64_t)t->step_tot.calls);
	cuptrace_json_end_object(w);
	cuptrace_json_int_field(w, "dropped", (int64_t)dropped);
	cpu(w, "top_cpu_pct", t->top_cpu_pct);
	struct top_stat kt = {0}, at = {0};
	for (size_t i = 0; i < t->nprocs; i++) {
		kt.calls += t->procs[i].kern_tot.calls;
		kt.ns += t->procs[i].kern_tot.ns;
		at.calls += t->procs[i].api_tot.calls;
		at.ns += t->procs[i].api_tot.ns;
	}
	cuptrace_json_name(w, "totals");
	cuptrace_json_start_object(w);
	stat_fields(w, "kernels", "kernel_ns", &kt);
	stat_fields(w, "api_calls", "api_ns", &at);
	cuptrace_json_end_object(w);
	return report_json_end(w, f, err);
}
