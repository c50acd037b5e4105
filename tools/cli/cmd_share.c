/* cuptrace share: a copy of a trace that is safe to attach to a public bug report (no host,
 * user, paths, arguments; optionally no names and only part of the timeline), and OUT.md, its
 * summary to paste above the attachment. The rewriting is src/analyze/share.c; this file reads
 * the options, runs the passes and picks the window that fits --max-size. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rewrite/share.h"
#include "stats/stats.h"
#include "cmd.h"
#include "opt_table.h"
#include "output/outfile.h"
#include "format/formats.h"

static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (end == s || errno || !(v > 0))
		return -1;
	double mul = 1;
	const char *u = end;
	int bin = u[0] && (u[1] == 'i' || u[1] == 'I');
	switch (*u) {
	case 'k':
	case 'K':
		mul = bin ? 1024.0 : 1e3;
		break;
	case 'm':
	case 'M':
		mul = bin ? 1048576.0 : 1e6;
		break;
	case 'g':
	case 'G':
		mul = bin ? 1073741824.0 : 1e9;
		break;
	case 0:
		break;
	default:
		return -1;
	}
	if (*u) {
		u += 1 + bin;
		if (*u == 'b' || *u == 'B')
			u++;
	}
	if (*u || v * mul > 1e15 || v * mul < 1)
		return -1;
	*out = (uint64_t)(v * mul);
	return 0;
}

/* A time from the trace's start: NUMBER[s|ms|us|ns] (plain: seconds). */
static int parse_time(const char *s, size_t n, int64_t *out)
{
	char buf[64], *end;
	if (!n || n >= sizeof(buf))
		return -1;
	memcpy(buf, s, n);
	buf[n] = 0;
	errno = 0;
	double v = strtod(buf, &end);
	if (end == buf || errno || !(v >= 0) || isinf(v))
		return -1;
	double mul = !strcmp(end, "") || !strcmp(end, "s") ? 1e9
	             : !strcmp(end, "ms")                  ? 1e6
	             : !strcmp(end, "us")                  ? 1e3
	             : !strcmp(end, "ns")                  ? 1
	                                                   : -1;
	if (mul < 0 || v * mul > 9e18)
		return -1;
	*out = (int64_t)llround(v * mul);
	return 0;
}

/* One end of --window: empty, a time, or NAME#K. */
struct wend {
	int empty;
	int64_t t;
	char *name;
	size_t k;
};

static int parse_end(const char *s, size_t n, struct wend *e)
{
	memset(e, 0, sizeof(*e));
	if (!n) {
		e->empty = 1;
		return 0;
	}
	if (!parse_time(s, n, &e->t))
		return 0;
	size_t h = n;
	while (h && s[h - 1] >= '0' && s[h - 1] <= '9')
		h--;
	if (h == n || h < 2 || s[h - 1] != '#' || n - h > 9)
		return -1;
	e->k = (size_t)strtoul(s + h, NULL, 10);
	if (!e->k || !(e->name = strndup(s, h - 1)))
		return -1;
	return 0;
}

/* FROM:TO, or NAME#K alone. Names may hold ':' (aten::mm#2): every split is tried first, then
 * the whole as one NAME#K. */
static int parse_window(const char *s, struct wend *from, struct wend *to)
{
	size_t n = strlen(s);
	for (const char *c = strchr(s, ':'); c; c = strchr(c + 1, ':')) {
		if (!parse_end(s, (size_t)(c - s), from) &&
		    !parse_end(c + 1, n - (size_t)(c - s) - 1, to))
			return 0;
		free(from->name);
		free(to->name);
		from->name = to->name = NULL;
	}
	if (parse_end(s, n, from) || !from->name) {
		free(from->name);
		from->name = NULL;
		return -1;
	}
	*to = *from;
	return (to->name = strdup(from->name)) ? 0 : -1;
}

/* NAME#K: a range named exactly "NAME#K" first (torch.profiler's "ProfilerStep#551"), else
 * the K-th range named NAME. */
static int window_range(const struct cuptrace_share_scan *sc, const struct wend *e, int64_t *from,
                        int64_t *to)
{
	char whole[512];
	int n = snprintf(whole, sizeof(whole), "%s#%zu", e->name, e->k);
	if (n > 0 && (size_t)n < sizeof(whole) && !cuptrace_share_range(sc, whole, 1, from, to))
		return 0;
	return cuptrace_share_range(sc, e->name, e->k, from, to);
}

static void fmt_time(int64_t ns, char *buf, size_t cap)
{
	snprintf(buf, cap, "%.6f s", (double)ns / 1e9);
}

static int open_failed; /* the last write_pass could not create its file */

/* One rewrite of in into path, in the format that name (the user's OUTPUT) says. Returns 0 or a
 * negative errno; *size the file's bytes. */
static int write_pass(struct cuptrace_share *sh, const char *in, const char *name, const char *path,
                      const struct cuptrace_share_window *w, uint64_t *size)
{
	struct cuptrace_sink *wr = cuptrace_sink_open_as(name, path, NULL, NULL, 0);
	if (!wr) {
		open_failed = 1;
		return -errno;
	}
	struct cuptrace_sink *s = cuptrace_share_sink_new(sh, wr, w);
	if (!s)
		return -ENOMEM;
	int r = cmd_replay(in, s);
	int f = s->ops->finish(s);
	cuptrace_sink_destroy(s);
	struct stat st;
	if (!r && !f && stat(path, &st))
		f = -errno;
	if (r || f) {
		unlink(path);
		return r ? r : f;
	}
	*size = (uint64_t)st.st_size;
	return 0;
}

/* OUT.md (into its outfile's temporary file md): `stats --markdown` of what was written (out,
 * the output's temporary file), read back. */
static int write_md(const char *out, const char *md)
{
	struct cuptrace_stats st;
	memset(&st, 0, sizeof(st));
	struct cuptrace_sink *sink = cuptrace_stats_sink_new(&st);
	if (!sink)
		return -ENOMEM;
	int r = cmd_replay(out, sink);
	if (!r)
		r = sink->ops->finish(sink);
	cuptrace_sink_destroy(sink);
	FILE *f = r ? NULL : fopen(md, "w");
	if (!r && !f)
		r = -errno;
	if (f) {
		cuptrace_stats_print(&st, f, 1);
		if (fclose(f))
			r = -EIO;
	}
	cuptrace_stats_free(&st);
	return r;
}

struct search {
	uint64_t max;
	struct cuptrace_share_window user; /* where to look (the whole trace, or --window) */
	struct cuptrace_share_window best;
	uint64_t best_size;
	int found;
};

/* --max-size: the most events whose busiest window fits, by writing candidates to tmp and
 * keeping the best as out. The first candidate is everything; then the count of events is
 * scaled by the size it gave, inside the bracket of counts known to fit and not to fit. */
static int search_size(struct cuptrace_share *sh, const struct cuptrace_share_scan *sc,
                       const char *in, const char *name, const char *out, const char *tmp,
                       struct search *s)
{
	uint64_t size = 0;
	int r = write_pass(sh, in, name, tmp, s->user.on ? &s->user : NULL, &size);
	if (r)
		return r;
	if (size <= s->max) {
		s->found = 1;
		s->best = s->user;
		s->best_size = size;
		return rename(tmp, out) ? -errno : 0;
	}
	int64_t lo, hi;
	cuptrace_share_span(sc, &lo, &hi);
	if (s->user.on) {
		lo = s->user.from;
		hi = s->user.to;
	}
	uint64_t total = cuptrace_share_count(sc, lo, hi);
	uint64_t fit = 0, nofit = total + 1, k = total;
	uint64_t last_size = size;
	for (int iter = 0; iter < 16 && nofit - fit > 1 && nofit - fit > fit / 100; iter++) {
		/* Sizes grow about linearly with events: aim a little under, then close in. */
		double target = (double)s->max * (fit ? 0.995 : 0.97);
		uint64_t next = (uint64_t)((double)k * target / (double)last_size);
		uint64_t step = (nofit - fit) / 2 < fit / 50 + 1 ? (nofit - fit) / 2 : fit / 50 + 1;
		step = step ? step : 1;
		if (next <= fit)
			next = fit + step;
		if (next >= nofit)
			next = nofit - step > fit ? nofit - step : fit + 1;
		k = next ? next : 1;
		struct cuptrace_share_window w;
		if (cuptrace_share_busiest(sc, k, lo, hi, &w))
			break;
		if ((r = write_pass(sh, in, name, tmp, &w, &size)))
			return r;
		last_size = size;
		if (size <= s->max) {
			fit = k;
			s->found = 1;
			s->best = w;
			s->best_size = size;
			if (rename(tmp, out))
				return -errno;
			if (size >= s->max / 100 * 99)
				break; /* close enough: a percent of the size */
		} else {
			nofit = k;
		}
	}
	unlink(tmp);
	return 0;
}

/* What `share` was asked: the options (borrowed from argv) and, after the check, the window's
 * ends (their names malloc'd). */
struct share_args {
	const char *in, *out, *window;
	struct cuptrace_share_opts o;
	uint64_t max;
	struct wend from, to;
};

/* The options into a: -1 to go on, else the exit code (0 after --help). */
static int share_parse(struct share_args *a, int argc, char **argv)
{
	int c;
	while ((c = cli_next(CLI_SHARE, argc, argv)) != CLI_END) {
		switch (c) {
		case 'o':
			a->out = optarg;
			break;
		case 'r':
			a->o.redact_names = 1;
			break;
		case 's':
			a->o.salt = optarg;
			break;
		case 'w':
			a->window = optarg;
			break;
		case 'm':
			if (parse_size(optarg, &a->max)) {
				fprintf(
				    stderr,
				    "cuptrace share: bad value for --max-size: '%s' (e.g. 25M)\n",
				    optarg);
				return EXIT_USAGE;
			}
			break;
		case 't':
			a->o.keep_time = 1;
			break;
		}
	}
	if (cli_status() >= 0)
		return cli_status();
	if (optind != argc - 1) {
		cli_usage_error(CLI_SHARE, "takes one TRACE (got %d)", argc - optind);
		return EXIT_USAGE;
	}
	a->in = argv[optind];
	return -1;
}

/* The combinations, the window, the input and the output's name: -1, or the exit code after
 * one line on stderr. */
static int share_check(struct share_args *a)
{
	char kind_why[512];
	if (!a->out) {
		cli_usage_error(CLI_SHARE, "needs -o OUTPUT");
		return EXIT_USAGE;
	}
	if (a->o.salt && !a->o.redact_names) {
		fprintf(stderr, "cuptrace share: --salt needs --redact-names\n");
		return EXIT_USAGE;
	}
	if (a->window && parse_window(a->window, &a->from, &a->to)) {
		fprintf(stderr,
		        "cuptrace share: bad value for --window: '%s' (FROM:TO with times like "
		        "1.5s, 200ms, 10us, or NAME#K)\n",
		        a->window);
		return EXIT_USAGE;
	}
	int ret = cmd_input("share", a->in, "share reads its trace more than once");
	if (ret)
		return ret;
	if (!strcmp(a->out, "-")) {
		fprintf(stderr, "cuptrace share: -o needs a file (OUTPUT.md is written beside it, "
		                "from OUTPUT read back)\n");
		return EXIT_USAGE;
	}
	if (!cuptrace_out_kind(a->out, NULL, CUPTRACE_OUT_PERFETTO | CUPTRACE_OUT_CHROME, kind_why,
	                       sizeof(kind_why))) {
		fprintf(stderr, "cuptrace share: %s\n", kind_why);
		return EXIT_USAGE;
	}
	return -1;
}

/* What was written, on stderr: what was removed or changed, the window and what it kept. */
static void share_report(const struct cuptrace_share *sh, const char *out, const char *md,
                         const struct cuptrace_share_window *wp, int64_t first, int64_t last,
                         uint64_t max, uint64_t size)
{
	struct cuptrace_share_window w = *wp;
	cuptrace_share_report(sh, stderr, "cuptrace share: ");
	if (w.on) {
		struct cuptrace_share_kept k = cuptrace_share_kept(sh);
		char a[48], b[48], e[48], s0[48];
		fmt_time(w.from < first ? first : w.from, a, sizeof(a));
		fmt_time(w.to > last ? last : w.to, b, sizeof(b));
		fmt_time(first, s0, sizeof(s0));
		fmt_time(last, e, sizeof(e));
		char why[96] = "";
		if (max)
			snprintf(why, sizeof(why), "the busiest that fits in %" PRIu64 " bytes; ",
			         max);
		fprintf(stderr,
		        "cuptrace share: window: %s to %s of %s to %s (%sslices that cross its "
		        "edges kept whole)\n",
		        a, b, s0, e, why);
		fprintf(stderr,
		        "cuptrace share: kept %" PRIu64 " of %" PRIu64 " slices, %" PRIu64
		        " of %" PRIu64 " instants, %" PRIu64 " of %" PRIu64
		        " counter values, %" PRIu64 " of %" PRIu64 " flows\n",
		        k.slices, k.slices_in, k.instants, k.instants_in, k.counters, k.counters_in,
		        k.flows, k.flows_in);
	} else if (max) {
		fprintf(stderr,
		        "cuptrace share: window: the whole trace fits in %" PRIu64 " bytes\n", max);
	}
	fprintf(stderr, "cuptrace share: wrote %s (%" PRIu64 " bytes) and %s\n", out, size, md);
}

/* Scans the input, finds the window, writes the copy and its summary aside and puts both in
 * place. 0, or the exit code after one line on stderr. */
static int share_run(struct share_args *a)
{
	struct cuptrace_outfile of = {0}, ofmd = {0};
	int ret = EXIT_FAIL;
	struct cuptrace_share_scan *sc = NULL;
	struct cuptrace_share *sh = NULL;
	char *md = NULL, *tmp = NULL;
	ret = EXIT_USAGE;
	if (!(md = malloc(strlen(a->out) + 4))) {
		fprintf(stderr, "cuptrace share: out of memory\n");
		goto out;
	}
	sprintf(md, "%s.md", a->out);
	if ((ret = cmd_out_begin(&of, "share", a->out, &a->in, 1)) ||
	    (ret = cmd_out_begin(&ofmd, "share", md, &a->in, 1)))
		goto out;
	ret = EXIT_FAIL;
	/* Each end's NAME and its whole "NAME#K" (torch.profiler's step names carry the #K). */
	const char *names[4];
	char whole[2][512];
	size_t nnames = 0;
	if (a->from.name)
		names[nnames++] = a->from.name;
	if (a->to.name && (!a->from.name || strcmp(a->to.name, a->from.name)))
		names[nnames++] = a->to.name;
	for (int i = 0; i < 2; i++) {
		const struct wend *e = i ? &a->to : &a->from;
		int n = e->name ? snprintf(whole[i], sizeof(whole[i]), "%s#%zu", e->name, e->k) : 0;
		if (n > 0 && (size_t)n < sizeof(whole[i]) && (!i || strcmp(whole[0], whole[1])))
			names[nnames++] = whole[i];
	}
	if (!(sc = cuptrace_share_scan_new(names, nnames, a->window || a->max))) {
		fprintf(stderr, "cuptrace share: out of memory\n");
		goto out;
	}
	struct cuptrace_sink *scan = cuptrace_share_scan_sink(sc);
	int r = cmd_replay(a->in, scan);
	if (!r)
		r = scan->ops->finish(scan);
	if (r) {
		cmd_read_failed("share", a->in, r, NULL);
		goto out;
	}

	/* The window in trace time. */
	struct cuptrace_share_window w = {0};
	int64_t first, last;
	cuptrace_share_span(sc, &first, &last);
	if (a->window) {
		int64_t ta, tb;
		w.on = 1;
		w.from = a->from.empty ? INT64_MIN : a->from.t;
		w.to = a->to.empty ? INT64_MAX : a->to.t;
		if (a->from.name && window_range(sc, &a->from, &w.from, &tb)) {
			fprintf(stderr,
			        "cuptrace share: --window: %s has no range #%zu named '%s'\n",
			        a->in, a->from.k, a->from.name);
			goto out;
		}
		if (a->to.name && window_range(sc, &a->to, &ta, &w.to)) {
			fprintf(stderr,
			        "cuptrace share: --window: %s has no range #%zu named '%s'\n",
			        a->in, a->to.k, a->to.name);
			goto out;
		}
		if (w.from > w.to) {
			fprintf(stderr, "cuptrace share: --window: %s ends before it starts\n",
			        a->window);
			ret = EXIT_USAGE;
			goto out;
		}
	}
	if (!(sh = cuptrace_share_new(&a->o, sc)) || !(tmp = malloc(strlen(of.tmp) + 16))) {
		fprintf(stderr, "cuptrace share: out of memory\n");
		goto out;
	}
	/* Candidates beside the output's temporary file (one file system for the renames); the
	 * format whose size counts is OUTPUT's. */
	sprintf(tmp, "%s.partial", of.tmp);

	uint64_t size = 0;
	if (a->max) {
		struct search s = {.max = a->max, .user = w};
		if ((r = search_size(sh, sc, a->in, a->out, of.tmp, tmp, &s)))
			goto failed;
		if (!s.found) {
			fprintf(stderr,
			        "cuptrace share: no window of %s fits in %" PRIu64
			        " bytes (its metadata and tracks alone may not)\n",
			        a->in, a->max);
			goto out;
		}
		w = s.best;
		/* Once more, the window kept: the report below is of what was written. */
		if ((r = write_pass(sh, a->in, a->out, of.tmp, w.on ? &w : NULL, &size)))
			goto failed;
	} else if ((r = write_pass(sh, a->in, a->out, of.tmp, w.on ? &w : NULL, &size))) {
		goto failed;
	}
	if ((r = write_md(of.tmp, ofmd.tmp))) {
		fprintf(stderr, "cuptrace share: cannot write %s: %s\n", md, strerror(-r));
		goto out;
	}
	/* Both whole: the trace first, so that a report never describes a trace not there. */
	if ((ret = cmd_out_end(&of, "share", 1)) || (ret = cmd_out_end(&ofmd, "share", 1)))
		goto out;
	ret = EXIT_FAIL;

	share_report(sh, a->out, md, &w, first, last, a->max, size);
	ret = 0;
	goto out;
failed:
	if (open_failed)
		fprintf(stderr, "cuptrace share: cannot write %s: %s\n", a->out, strerror(-r));
	else
		fprintf(stderr, "cuptrace share: %s -> %s failed: %s\n", a->in, a->out,
		        strerror(-r));
out:
	if (tmp)
		unlink(tmp);
	cuptrace_outfile_abort(&of);
	cuptrace_outfile_abort(&ofmd);
	free(tmp);
	free(md);
	cuptrace_share_free(sh);
	cuptrace_share_scan_free(sc);
	return ret;
}

int cmd_share(int argc, char **argv)
{
	struct share_args a = {.o = {.sz = sizeof(a.o)}, .from = {.empty = 1}, .to = {.empty = 1}};
	int r = share_parse(&a, argc, argv);
	if (r < 0)
		r = share_check(&a);
	if (r < 0)
		r = share_run(&a);
	free(a.from.name);
	free(a.to.name);
	return r;
}
