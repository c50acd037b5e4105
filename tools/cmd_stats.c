/* cuptrace stats: a summary of a trace or capture, to read, to paste into a bug report, or for a
 * script (--json). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stats/gpumetrics_stats.h"
#include "lines/lines.h"
#include "stats/stats.h"
#include "cmd.h"

static void stats_usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: cuptrace stats [--markdown | --json] [--group-by line] TRACE\n\n"
	    "TRACE is a .pftrace (any compression), a raw capture (.cupti), or a\n"
	    "Chrome JSON trace (.json, .json.gz): cuptrace's own or torch.profiler's\n"
	    "(export_chrome_trace). Its format is told from its content.\n\n"
	    "  -m, --markdown   GitHub markdown tables (for bug reports)\n"
	    "  -j, --json       one JSON object, times in ns (keys: README, 'stats --json')\n"
	    "      --group-by line  add GPU time by source line: each kernel, copy and\n"
	    "                   memset under the innermost frame of the user's own code\n"
	    "                   in its launch's call stack (README, 'Call stacks')\n" CMD_LINES_HELP
	    "  -h, --help       this help\n");
}

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

static int stats_main(int argc, char **argv, struct cmd_lines *lines)
{
	static const struct option opts[] = {
	    {"markdown", no_argument, NULL, 'm'},
	    {"json", no_argument, NULL, 'j'},
	    {"group-by", required_argument, NULL, 'g'},
	    {"help", no_argument, NULL, 'h'},
	    CMD_LINES_OPTIONS,
	    {0},
	};
	int markdown = 0, json = 0, by_line = 0;
	optind = 1;
	int c;
	while ((c = getopt_long(argc, argv, "mjh", opts, NULL)) != -1) {
		int taken = cmd_lines_option(lines, c, optarg);
		if (taken < 0) {
			fprintf(stderr, "cuptrace stats: out of memory\n");
			return EXIT_FAIL;
		}
		if (taken)
			continue;
		switch (c) {
		case 'm':
			markdown = 1;
			break;
		case 'j':
			json = 1;
			break;
		case 'g':
			if (strcmp(optarg, "line")) {
				fprintf(stderr, "cuptrace stats: --group-by takes line\n");
				return EXIT_USAGE;
			}
			by_line = 1;
			break;
		case 'h':
			stats_usage(stdout);
			return 0;
		default:
			stats_usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (optind != argc - 1 || (markdown && json)) {
		if (markdown && json)
			fprintf(stderr,
			        "cuptrace stats: --markdown and --json exclude each other\n");
		stats_usage(stderr);
		return EXIT_USAGE;
	}
	struct cuptrace_stats st;
	memset(&st, 0, sizeof(st));
	struct cuptrace_gm_stats gms;
	struct cuptrace_lines ln = {0};
	struct cuptrace_lines_opts lo = cmd_lines_opts(lines);
	struct cuptrace_sink *inner = cuptrace_stats_sink_new(&st);
	struct cuptrace_sink *sink = inner ? cuptrace_gm_stats_sink_new(&gms, inner) : NULL;
	/* Native frames are symbolized before the lines sink reads them. */
	if (sink && by_line)
		sink = cmd_lines_symbolize(lines, cuptrace_lines_sink_new(&ln, &lo, sink));
	if (!sink) {
		fprintf(stderr, "cuptrace stats: out of memory\n");
		return EXIT_FAIL;
	}
	int r = cmd_replay(argv[optind], sink);
	if (!r)
		r = sink->ops->finish(sink);
	cuptrace_sink_destroy(sink);
	if (r) {
		fprintf(stderr, "cuptrace stats: cannot read %s\n", argv[optind]);
		cuptrace_stats_free(&st);
		cuptrace_gm_stats_free(&gms);
		cuptrace_lines_free(&ln);
		return EXIT_FAIL;
	}
	if (json && by_line) {
		r = cmd_lines_print_json(&ln, print_stats_json, &(struct stats_json){&st, &gms});
	} else if (json) {
		r = print_json(&st, &gms, stdout);
	} else {
		cuptrace_stats_print(&st, stdout, markdown);
		cuptrace_gm_stats_print(&gms, stdout, markdown);
		if (by_line)
			cuptrace_lines_print(&ln, stdout, markdown, 0);
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
	struct cmd_lines lines = {0};
	int r = stats_main(argc, argv, &lines);
	cmd_lines_free(&lines);
	return r;
}
