/* cuptrace analyze: why a run is slow (steps, GPU idle by cause, GPU time per op, findings), as
 * text, markdown or JSON, and drawn into a copy of the trace with --annotate. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/analyze.h"
#include "analyze/lines.h"
#include "cmd.h"
#include "opt_table.h"
#include "output/outfile.h"
#include "format/formats.h"

static int annotate(const char *in, const char *out, const struct cuptrace_analysis *a)
{
	struct cuptrace_outfile of;
	int status;
	struct cuptrace_sink *w =
	    cmd_sink_open(&of, "analyze", out, NULL, NULL, 0, &in, 1, &status);
	if (!w)
		return status;
	struct cuptrace_sink *s = cuptrace_annotate_sink_new(w, a);
	if (!s) {
		fprintf(stderr, "cuptrace analyze: cannot write %s: out of memory\n", out);
		cuptrace_outfile_abort(&of);
		return EXIT_FAIL;
	}
	int r = cmd_replay(in, s);
	if (!r)
		r = s->ops->finish(s);
	cuptrace_sink_destroy(s);
	if (r) {
		fprintf(stderr, "cuptrace analyze: writing %s failed; what was there stays\n", out);
		cuptrace_outfile_abort(&of);
		return EXIT_FAIL;
	}
	return cmd_out_end(&of, "analyze", 1);
}

static int print_analysis_json(const void *a, FILE *f)
{
	return cuptrace_analysis_print_json(a, f);
}

static int analyze_main(int argc, char **argv, struct cmd_lines *lines)
{
	struct cuptrace_analyze_opts o = {0};
	const char *ann = NULL;
	int markdown = 0, json = 0, by_line = 0, c;
	char *end;
	optind = 1;
	while ((c = cli_next(CLI_ANALYZE, argc, argv)) != CLI_END) {
		if (c == CLI_HELP || c == CLI_BAD)
			return c == CLI_HELP ? 0 : EXIT_USAGE;
		int taken = cmd_lines_option(lines, c, optarg);
		if (taken < 0) {
			fprintf(stderr, "cuptrace analyze: out of memory\n");
			return EXIT_FAIL;
		}
		if (taken)
			continue;
		switch (c) {
		case CMD_OPT_GROUP_BY:
			if (strcmp(optarg, "line")) {
				fprintf(stderr,
				        "cuptrace analyze: bad value for --group-by: '%s' (takes "
				        "line)\n",
				        optarg);
				return EXIT_USAGE;
			}
			by_line = 1;
			break;
		case 'm':
			markdown = 1;
			break;
		case 'j':
			json = 1;
			break;
		case 'a':
			ann = optarg;
			break;
		case 's':
			o.step_name = optarg;
			break;
		case 'g':
		case 't':
		case 'n': {
			double v = strtod(optarg, &end);
			if (*end || v <= 0 || v > 1e12) {
				fprintf(
				    stderr,
				    "cuptrace analyze: bad value for %s: '%s' (a number above 0)\n",
				    cli_current(), optarg);
				return EXIT_USAGE;
			}
			if (c == 'g')
				o.gap_ns = (int64_t)(v * 1000);
			else if (c == 't')
				o.tiny_ns = (int64_t)(v * 1000);
			else
				o.top = (int)v;
			break;
		}
		}
	}
	if (markdown && json) {
		cli_usage_error(CLI_ANALYZE, "--markdown and --json exclude each other");
		return EXIT_USAGE;
	}
	if (optind >= argc) {
		cli_usage_error(CLI_ANALYZE, "needs at least one TRACE (got 0)");
		return EXIT_USAGE;
	}
	if (ann && argc - optind != 1) {
		cli_usage_error(CLI_ANALYZE, "--annotate takes one trace (got %d)", argc - optind);
		return EXIT_USAGE;
	}
	for (int i = optind; i < argc; i++) {
		int e =
		    cmd_input("analyze", argv[i], ann ? "--annotate reads the trace twice" : NULL);
		if (e)
			return e;
	}
	/* Refused before the analysis, which may take a while, and before anything is written. */
	if (ann && cuptrace_same_file(ann, argv[optind])) {
		fprintf(stderr,
		        "cuptrace analyze: --annotate %s is the input %s: give another output "
		        "name; nothing was written\n",
		        ann, argv[optind]);
		return EXIT_USAGE;
	}
	struct cuptrace_analysis a;
	struct cuptrace_lines ln = {0};
	struct cuptrace_lines_opts lo = cmd_lines_opts(lines);
	struct cuptrace_sink *an = cuptrace_analyze_sink_new(&a, &o), *s = an, *ls = NULL;
	/* --group-by line: symbolize -> lines -> analyze. */
	if (s && by_line && (ls = cuptrace_lines_sink_new(&ln, &lo, s)))
		s = cmd_lines_symbolize(lines, ls);
	else if (by_line)
		s = NULL;
	if (!s) {
		fprintf(stderr, "cuptrace analyze: out of memory\n");
		return EXIT_FAIL;
	}
	int r = 0;
	for (int i = optind; i < argc && !r; i++) {
		if (i > optind) {
			cuptrace_analyze_next_file(an);
			if (ls)
				cuptrace_lines_next_file(ls);
		}
		if ((r = cmd_replay(argv[i], s)))
			cmd_read_failed("analyze", argv[i], r, NULL);
	}
	if (!r && (r = s->ops->finish(s)))
		fprintf(stderr, "cuptrace analyze: analysis failed (out of memory)\n");
	cuptrace_sink_destroy(s);
	if (r) {
		cuptrace_analysis_free(&a);
		cuptrace_lines_free(&ln);
		return EXIT_FAIL;
	}
	if (!a.kernels && !a.copies && !a.memsets) {
		/* No false all-clear: with no GPU work there is nothing to judge. */
		fprintf(stderr, "cuptrace analyze: no GPU work in ");
		for (int i = optind; i < argc; i++)
			fprintf(stderr, "%s%s", i > optind ? (i + 1 < argc ? ", " : " or ") : "",
			        argv[i]);
		fprintf(stderr, ": nothing to analyze (no kernel, copy or memset was recorded)\n");
		cuptrace_lines_free(&ln);
		cuptrace_analysis_free(&a);
		return EXIT_FAIL;
	}
	if (json && by_line) {
		r = cmd_lines_print_json(&ln, print_analysis_json, &a);
	} else if (json) {
		r = cuptrace_analysis_print_json(&a, stdout);
	} else {
		cuptrace_analysis_print(&a, stdout, markdown);
		if (by_line)
			cuptrace_lines_print(&ln, stdout, markdown, 0);
	}
	cuptrace_lines_free(&ln);
	if (!r && ann)
		r = annotate(argv[optind], ann, &a);
	else if (r || fflush(stdout)) {
		fprintf(stderr, "cuptrace analyze: cannot write the report\n");
		r = EXIT_FAIL;
	}
	cuptrace_analysis_free(&a);
	return r ? EXIT_FAIL : 0;
}

int cmd_analyze(int argc, char **argv)
{
	struct cmd_lines lines = {0};
	int r = analyze_main(argc, argv, &lines);
	cmd_lines_free(&lines);
	return r;
}
