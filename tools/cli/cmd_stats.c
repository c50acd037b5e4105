/* cuptrace stats: a summary of a trace or capture, to read, to paste into a bug report, or for a
 * script (--json). */
#include <getopt.h> /* optind, optarg */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stats/gpumetrics_stats.h"
#include "lines/lines.h"
#include "stats/stats.h"
#include "cmd.h"
#include "opt_table.h"

/* stats --json, with "gpu_metrics" (the per-kernel averages) as a last key where the trace
 * has GPU metrics: the summary's object is printed with that key added before its close. */
static int print_json(const struct cuptrace_stats *st, const struct cuptrace_gm_stats *g, FILE *f)
{
	char *gm = NULL, *buf = NULL;
	size_t len = 0;
	int r = cuptrace_gm_stats_json(g, &gm);
	if (r || !gm)
		return r ? r : cuptrace_stats_print_json(st, f);
	FILE *mem = open_memstream(&buf, &len);
	r = mem ? cuptrace_stats_print_json(st, mem) : -1;
	if (mem && fclose(mem))
		r = r ? r : -1;
	/* The summary ends with "}\n". */
	if (!r && buf && len >= 2 && buf[len - 2] == '}' && buf[len - 1] == '\n') {
		fwrite(buf, 1, len - 2, f);
		fprintf(f, ",\"gpu_metrics\":%s}\n", gm);
	} else if (!r) {
		r = -1;
	}
	free(buf);
	free(gm);
	return r;
}

struct stats_json {
	const struct cuptrace_stats *st;
	const struct cuptrace_gm_stats *g;
};

static int print_stats_json(const void *ctx, FILE *f)
{
	const struct stats_json *j = ctx;
	return print_json(j->st, j->g, f);
}

/* The options into r: -1 to go on, else the exit code (0 after --help). */
static int stats_parse(struct cmd_report *r, int argc, char **argv)
{
	int c;
	while ((c = cli_next(CLI_STATS, argc, argv)) != CLI_END) {
		int e = cmd_report_option(CLI_STATS, r, c, optarg);
		if (e > 0)
			return e;
	}
	return cli_status();
}

static int stats_check(const struct cmd_report *r, int argc)
{
	if (cmd_report_check(CLI_STATS, r))
		return EXIT_USAGE;
	if (optind != argc - 1) {
		cli_usage_error(CLI_STATS, "takes one TRACE (got %d)", argc - optind);
		return EXIT_USAGE;
	}
	return -1;
}

/* Reads the trace at path and prints its summary. 0, or EXIT_FAIL after one line. */
static int stats_run(struct cmd_report *rep, const char *path)
{
	struct cuptrace_stats st;
	memset(&st, 0, sizeof(st));
	struct cuptrace_gm_stats gms;
	struct cuptrace_lines ln = {0};
	struct cuptrace_lines_opts lo = cmd_lines_opts(&rep->lines);
	struct cuptrace_sink *inner = cuptrace_stats_sink_new(&st);
	struct cuptrace_sink *sink = inner ? cuptrace_gm_stats_sink_new(&gms, inner) : NULL;
	/* Native frames are symbolized before the lines sink reads them. */
	if (sink && rep->by_line)
		sink = cmd_lines_symbolize(&rep->lines, cuptrace_lines_sink_new(&ln, &lo, sink));
	if (!sink) {
		fprintf(stderr, "cuptrace stats: out of memory\n");
		return EXIT_FAIL;
	}
	int r = cmd_replay(path, sink);
	if (!r)
		r = sink->ops->finish(sink);
	cuptrace_sink_destroy(sink);
	if (r) {
		cmd_read_failed("stats", path, r, NULL);
		cuptrace_stats_free(&st);
		cuptrace_gm_stats_free(&gms);
		cuptrace_lines_free(&ln);
		return EXIT_FAIL;
	}
	if (rep->json && rep->by_line) {
		r = cmd_lines_print_json(&ln, print_stats_json, &(struct stats_json){&st, &gms});
	} else if (rep->json) {
		r = print_json(&st, &gms, stdout);
	} else {
		cuptrace_stats_print(&st, stdout, rep->markdown);
		cuptrace_gm_stats_print(&gms, stdout, rep->markdown);
		if (rep->by_line)
			cuptrace_lines_print(&ln, stdout, rep->markdown, 0);
	}
	cuptrace_stats_free(&st);
	cuptrace_gm_stats_free(&gms);
	cuptrace_lines_free(&ln);
	if (r || fflush(stdout)) {
		fprintf(stderr, "cuptrace stats: cannot write the summary\n");
		return EXIT_FAIL;
	}
	return 0;
}

int cmd_stats(int argc, char **argv)
{
	struct cmd_report r = {0};
	int e = stats_parse(&r, argc, argv);
	if (e < 0)
		e = stats_check(&r, argc);
	if (e < 0)
		e = stats_run(&r, argv[optind]);
	cmd_lines_free(&r.lines);
	return e;
}
