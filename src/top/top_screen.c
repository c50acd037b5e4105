/* cuptrace top's screen: the text of one refresh, fitted to the terminal's width and height
 * (80x24 at least), as lines ended by '\n'. Styles are bold and reverse video only (no
 * colours of fixed background), so the screen reads the same on light and dark terminals; with
 * ansi off it is plain text. Putting the lines on the terminal without flicker is the
 * caller's (tools/cli/cmd_top.c). */
#include "top/screen.h"

#include <stdlib.h>
#include <string.h>

#include "stats/report.h"

#define BOLD "\033[1m"
#define REV  "\033[7m"
#define OFF  "\033[0m"

static void dur(char *b, size_t n, int64_t ns)
{
	if (ns < 1000)
		snprintf(b, n, "%lldns", (long long)ns);
	else if (ns < 1000000)
		snprintf(b, n, "%.1fus", (double)ns / 1e3);
	else if (ns < 1000000000)
		snprintf(b, n, "%.1fms", (double)ns / 1e6);
	else
		snprintf(b, n, "%.2fs", (double)ns / 1e9);
}

/* A count or a byte rate in 6 characters: 999, 12.3k, 4.56M, 7.89G. */
static void num(char *b, size_t n, double v)
{
	if (v < 1000)
		snprintf(b, n, "%.0f", v);
	else if (v < 1e6)
		snprintf(b, n, "%.1fk", v / 1e3);
	else if (v < 1e9)
		snprintf(b, n, "%.1fM", v / 1e6);
	else
		snprintf(b, n, "%.1fG", v / 1e9);
}

static double pct(int64_t a, int64_t b)
{
	return b > 0 ? 100.0 * (double)a / (double)b : 0.0;
}

static double per_s(double v, int64_t dt)
{
	return dt > 0 ? v * 1e9 / (double)dt : 0.0;
}

/* One line: text cut to the width (bytes: names are cleaned to one line first), styled. */
static void line(FILE *f, const struct top_view *v, const char *style, const char *text)
{
	char clean[1024];
	size_t w = v->width > 0 ? (size_t)v->width : 80;
	if (w > sizeof(clean) - 8)
		w = sizeof(clean) - 8;
	report_clean(clean, sizeof(clean), text, w, 0);
	/* report_clean marks a cut; the mark may take bytes past w: cut by display width. */
	size_t cols = 0, i = 0;
	for (; clean[i]; i++) {
		if (((unsigned char)clean[i] & 0xC0) != 0x80 && ++cols > w)
			break;
	}
	clean[i] = 0;
	if (v->ansi && style)
		fprintf(f, "%s%s%s\n", style, clean, OFF);
	else
		fprintf(f, "%s\n", clean);
}

/* Idle causes in a few columns (idle_cause.h's order), so that the GPU line's worst case
 * (busy 100.0%, kern/s 12.3k, mem and peak in GB, a cause at 100%) is 80 columns. */
static const char *const cause_short[CUPTRACE_IDLE_NCAUSES] = {"wait", "lat", "strm", "sync",
                                                               "oth"};

/* The interval's idle by cause: the main cause and its share (narrow), or every cause with a
 * share (wide); "" before any gap closed. */
static void idle_text(char *b, size_t n, const struct top_gpu *g, int wide)
{
	int64_t sum = 0;
	int top = 0;
	b[0] = 0;
	for (int k = 0; k < CUPTRACE_IDLE_NCAUSES; k++) {
		sum += g->idle_last[k];
		if (g->idle_last[k] > g->idle_last[top])
			top = k;
	}
	if (sum <= 0)
		return;
	if (!wide) {
		snprintf(b, n, " idle %s %.0f%%", cause_short[top], pct(g->idle_last[top], sum));
		return;
	}
	size_t len = (size_t)snprintf(b, n, " idle");
	for (int k = 0; k < CUPTRACE_IDLE_NCAUSES && len < n; k++)
		if (g->idle_last[k] > 0)
			len += (size_t)snprintf(b + len, n - len, " %s %.0f%%", cause_short[k],
			                        pct(g->idle_last[k], sum));
}

static const char *view_names[TOP_NVIEWS] = {"kernels", "API calls", "streams", "ranks", "NCCL"};

static void header(FILE *f, const struct cuptrace_top *t, const struct top_view *v, int *used)
{
	char b[512];
	/* The tracer's own CPU (cuptrace-* threads of the watched processes) and top's: before
	 * the source, which may be long and is cut first. */
	char cpu[64] = "";
	double tr = -1;
	for (size_t i = 0; i < t->nprocs; i++)
		if (t->procs[i].tracer_cpu_pct >= 0)
			tr = (tr < 0 ? 0 : tr) + t->procs[i].tracer_cpu_pct;
	if (tr >= 0 || t->top_cpu_pct >= 0) {
		size_t k = (size_t)snprintf(cpu, sizeof(cpu), "  cpu");
		if (tr >= 0)
			k += (size_t)snprintf(cpu + k, sizeof(cpu) - k, " tracer %.1f%%", tr);
		if (t->top_cpu_pct >= 0)
			snprintf(cpu + k, sizeof(cpu) - k, " top %.1f%%", t->top_cpu_pct);
	}
	snprintf(b, sizeof(b), "cuptrace top  t %.1fs  every %.2fs%s%s  %s", v->t_s,
	         (double)t->last_dt / 1e9, cpu, v->paused ? "  [paused]" : "",
	         v->source ? v->source : "");
	line(f, v, BOLD, b);
	(*used)++;
	size_t maxg = v->height > 16 ? (size_t)(v->height - 14) : 2;
	for (size_t i = 0; i < t->ngpus && i < maxg; i++) {
		const struct top_gpu *g = &t->gpus[i];
		char m[96] = "", mp[32], mm[32];
		if (g->have_mem) {
			num(mm, sizeof(mm), (double)g->mem);
			num(mp, sizeof(mp), (double)g->mem_peak);
			snprintf(m, sizeof(m), "  mem %sB pk %sB", mm, mp);
		}
		char kps[32];
		num(kps, sizeof(kps), per_s((double)g->kern_last.calls, t->last_dt));
		double bp = pct(g->busy_last, g->win_last);
		/* A bar where the width allows: 20 cells of busy. */
		char bar[32] = "";
		if (v->width >= 110) {
			int n = (int)(bp / 5 + 0.5);
			bar[0] = '[';
			for (int k = 0; k < 20; k++)
				bar[1 + k] = k < n ? '#' : '.';
			bar[21] = ']';
			bar[22] = ' ';
			bar[23] = 0;
		}
		char name[48];
		report_clean(name, sizeof(name), g->name,
		             v->width >= 100 ? 28
		             : t->nprocs > 1 ? 12
		                             : 17,
		             0);
		char who[24] = "";
		if (t->nprocs > 1)
			snprintf(who, sizeof(who), " pid %-6d", (int)t->procs[g->proc].pid);
		char avg[32] = "";
		if (v->width >= 100)
			snprintf(avg, sizeof(avg), "(avg %5.1f%%) ", pct(g->busy_tot, g->win_tot));
		char idle[96];
		idle_text(idle, sizeof(idle), g, v->width >= 130);
		snprintf(b, sizeof(b), "%-*s%s busy %5.1f%% %s%skern/s %s%s%s",
		         v->width >= 100 ? 28 : 18, name, who, bp, bar, avg, kps, m, idle);
		line(f, v, NULL, b);
		(*used)++;
	}
	if (t->ngpus > maxg) {
		snprintf(b, sizeof(b), "... %zu more GPUs (r: the ranks view)", t->ngpus - maxg);
		line(f, v, NULL, b);
		(*used)++;
	}
	if (!t->ngpus) {
		line(f, v, NULL, "no GPU work seen yet");
		(*used)++;
	}
	uint64_t kc = 0, ac = 0, dropped = 0, ended = 0;
	int64_t an = 0;
	for (size_t i = 0; i < t->nprocs; i++) {
		kc += t->procs[i].kern_last.calls;
		ac += t->procs[i].api_last.calls;
		an += t->procs[i].api_last.ns;
		dropped += t->procs[i].dropped_cupti + t->procs[i].dropped_cuptrace;
		ended += t->procs[i].ended;
	}
	const struct top_copy *c = &t->copy_last;
	uint64_t cb = c->htod + c->dtoh + c->other;
	char k1[32], a1[32], h1[32], d1[32], ah[32];
	num(k1, sizeof(k1), per_s((double)kc, t->last_dt));
	num(a1, sizeof(a1), per_s((double)ac, t->last_dt));
	num(h1, sizeof(h1), per_s((double)c->htod, t->last_dt));
	num(d1, sizeof(d1), per_s((double)c->dtoh, t->last_dt));
	dur(ah, sizeof(ah), an);
	snprintf(b, sizeof(b),
	         "kernels/s %s  API/s %s (%s)  HtoD %sB/s  DtoH %sB/s  pageable %.0f%%", k1, a1, ah,
	         h1, d1, cb ? 100.0 * (double)c->pageable / (double)cb : 0.0);
	line(f, v, NULL, b);
	char st[32] = "-", sp[32] = "-", nc[32];
	if (t->step_last.calls) {
		snprintf(sp, sizeof(sp), "%.2f", per_s((double)t->step_last.calls, t->last_dt));
		dur(st, sizeof(st),
		    t->step_last.ns ? t->step_last.ns / (int64_t)t->step_last.calls
		                    : t->last_dt / (int64_t)t->step_last.calls);
	}
	int64_t nccl = 0;
	for (size_t i = 0; i < t->nccl.n; i++)
		nccl += t->nccl.v[i].last.ns;
	dur(nc, sizeof(nc), nccl);
	snprintf(b, sizeof(b),
	         "steps/s %s  step %s  NCCL %s  dropped %llu  processes %zu (%llu ended)", sp, st,
	         nc, (unsigned long long)dropped, t->nprocs, (unsigned long long)ended);
	line(f, v, NULL, b);
	if (v->status && *v->status)
		line(f, v, BOLD, v->status);
	else
		line(f, v, NULL, "");
	*used += 3;
}

static int table(FILE *f, const struct cuptrace_top *t, const struct top_view *v, int rows)
{
	const struct top_tab *tab = v->view == TOP_VIEW_API       ? &t->api
	                            : v->view == TOP_VIEW_STREAMS ? &t->streams
	                            : v->view == TOP_VIEW_NCCL    ? &t->nccl
	                                                          : &t->kernels;
	int wide = v->width >= 110;
	char b[1024];
	snprintf(b, sizeof(b), "%8s %6s %8s %8s %9s%s  %s (by %s)", "TIME", "SHARE", "CALLS", "AVG",
	         "TOTAL", wide ? "  TOT.CALLS" : "", view_names[v->view],
	         cuptrace_top_sort_names[v->sort]);
	if (v->ansi) /* the reverse video across the screen */
		snprintf(b + strlen(b), sizeof(b) - strlen(b), "%*s", v->width > 0 ? v->width : 80,
		         "");
	line(f, v, REV, b);
	size_t *o = cuptrace_top_order(tab, v->sort);
	int64_t sum = 0;
	for (size_t i = 0; i < tab->n; i++)
		sum += tab->v[i].last.ns;
	int shown = 0;
	for (size_t i = 0; o && i < tab->n && shown < rows; i++) {
		const struct top_row *r = &tab->v[o[i]];
		if (!r->last.calls && !r->tot.calls)
			continue;
		char tm[32], av[32], tt[32], ca[32], tc[32];
		dur(tm, sizeof(tm), r->last.ns);
		dur(av, sizeof(av), r->last.calls ? r->last.ns / (int64_t)r->last.calls : 0);
		dur(tt, sizeof(tt), r->tot.ns);
		num(ca, sizeof(ca), (double)r->last.calls);
		num(tc, sizeof(tc), (double)r->tot.calls);
		char who[24] = "";
		if (v->view == TOP_VIEW_STREAMS && t->nprocs > 1)
			snprintf(who, sizeof(who), "pid %d ", (int)t->procs[r->proc].pid);
		snprintf(b, sizeof(b), "%8s %5.1f%% %8s %8s %9s%s%10s  %s%s", tm,
		         pct(r->last.ns, sum), ca, av, tt, wide ? " " : "", wide ? tc : "", who,
		         r->name);
		if (!wide) /* the 10-wide empty column only spaces the name on a wide screen */
			snprintf(b, sizeof(b), "%8s %5.1f%% %8s %8s %9s  %s%s", tm,
			         pct(r->last.ns, sum), ca, av, tt, who, r->name);
		line(f, v, NULL, b);
		shown++;
	}
	free(o);
	return shown;
}

static int ranks(FILE *f, const struct cuptrace_top *t, const struct top_view *v, int rows)
{
	char b[1024];
	snprintf(b, sizeof(b), "%8s %6s %8s %9s %9s %8s  %s", "PID", "BUSY", "KERN/s", "KERNELS",
	         "API", "DROPPED", "process (ranks view)");
	if (v->ansi) /* the reverse video across the screen */
		snprintf(b + strlen(b), sizeof(b) - strlen(b), "%*s", v->width > 0 ? v->width : 80,
		         "");
	line(f, v, REV, b);
	int shown = 0;
	for (size_t i = 0; i < t->nprocs && shown < rows; i++, shown++) {
		const struct top_proc *p = &t->procs[i];
		int64_t busy = 0, win = 0;
		for (size_t j = 0; j < t->ngpus; j++)
			if (t->gpus[j].proc == i) {
				busy += t->gpus[j].busy_last;
				win += t->gpus[j].win_last;
			}
		char kps[32], kn[32], an[32];
		num(kps, sizeof(kps), per_s((double)p->kern_last.calls, t->last_dt));
		dur(kn, sizeof(kn), p->kern_last.ns);
		dur(an, sizeof(an), p->api_last.ns);
		snprintf(b, sizeof(b), "%8d %5.1f%% %8s %9s %9s %8llu  %s%s", (int)p->pid,
		         pct(busy, win), kps, kn, an,
		         (unsigned long long)(p->dropped_cupti + p->dropped_cuptrace), p->name,
		         p->ended ? " (ended)" : "");
		line(f, v, NULL, b);
	}
	return shown;
}

void cuptrace_top_render(const struct cuptrace_top *t, const struct top_view *v, FILE *f)
{
	int used = 0;
	int h = v->height > 0 ? v->height : 24;
	header(f, t, v, &used);
	int rows = h - used - 1 - !!v->keys; /* the table's head and the keys line */
	if (rows < 1)
		rows = 1;
	int shown = v->view == TOP_VIEW_RANKS ? ranks(f, t, v, rows) : table(f, t, v, rows);
	if (v->keys) {
		for (int i = 0; i < rows - shown; i++)
			line(f, v, NULL, ""); /* the keys stay on the last line */
		line(f, v, NULL,
		     "k kernels a API s streams r ranks n NCCL o sort p pause t trace q quit");
	}
}
