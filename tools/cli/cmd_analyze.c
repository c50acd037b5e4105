/* cuptrace analyze: why a run is slow (steps, GPU idle by cause, GPU time per op, findings), as
 * text, markdown or JSON, and drawn into a copy of the trace with --annotate. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "why/analyze.h"
#include "lines/lines.h"
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

/* What `analyze` was asked besides the report options. */
struct analyze_args {
	struct cuptrace_analyze_opts o;
	const char *ann; /* --annotate OUT */
};

/* The options into x and rep: -1 to go on, else the exit code (0 after --help). */
static int analyze_parse(struct analyze_args *x, struct cmd_report *rep, int argc, char **argv)
{
	int c;
	char *end;
	while ((c = cli_next(CLI_ANALYZE, argc, argv)) != CLI_END) {
		int e = cmd_report_option(CLI_ANALYZE, rep, c, optarg);
		if (e >= 0) {
			if (e)
				return e;
			continue;
		}
		switch (c) {
		case 'a':
			x->ann = optarg;
			break;
		case 's':
			x->o.step_name = optarg;
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
				x->o.gap_ns = (int64_t)(v * 1000);
			else if (c == 't')
				x->o.tiny_ns = (int64_t)(v * 1000);
			else
				x->o.top = (int)v;
			break;
		}
		}
	}
	return cli_status();
}

/* The operands and the inputs, before the analysis (which may take a while) and before
 * anything is written: -1, or the exit code after one line. */
static int analyze_check(const struct analyze_args *x, const struct cmd_report *rep, int argc,
                         char **argv)
{
	if (cmd_report_check(CLI_ANALYZE, rep))
		return EXIT_USAGE;
	if (optind >= argc) {
		cli_usage_error(CLI_ANALYZE, "needs at least one TRACE (got 0)");
		return EXIT_USAGE;
	}
	if (x->ann && argc - optind != 1) {
		cli_usage_error(CLI_ANALYZE, "--annotate takes one trace (got %d)", argc - optind);
		return EXIT_USAGE;
	}
	for (int i = optind; i < argc; i++) {
		int e = cmd_input("analyze", argv[i],
		                  x->ann ? "--annotate reads the trace twice" : NULL);
		if (e)
			return e;
	}
	/* Refused before the analysis, which may take a while, and before anything is written. */
	if (x->ann && cuptrace_same_file(x->ann, argv[optind])) {
		fprintf(stderr,
		        "cuptrace analyze: --annotate %s is the input %s: give another output "
		        "name; nothing was written\n",
		        x->ann, argv[optind]);
		return EXIT_USAGE;
	}
	return -1;
}

/* Reads the traces (argv[optind]...) as ranks of one job, prints the analysis, and writes the
 * annotated trace. 0, or EXIT_FAIL after one line. */
static int analyze_run(const struct analyze_args *x, struct cmd_report *rep, int argc, char **argv)
{
	struct cuptrace_analysis a;
	struct cuptrace_lines ln = {0};
	struct cuptrace_lines_opts lo = cmd_lines_opts(&rep->lines);
	struct cuptrace_analyze_opts o = x->o;
	o.by_line = rep->by_line;
	struct cuptrace_sink *an = cuptrace_analyze_sink_new(&a, &o), *s = an, *ls = NULL;
	/* --group-by line: symbolize -> lines -> analyze. */
	if (s && rep->by_line && (ls = cuptrace_lines_sink_new(&ln, &lo, s)))
		s = cmd_lines_symbolize(&rep->lines, ls);
	else if (rep->by_line)
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
	if (rep->json && rep->by_line) {
		r = cmd_lines_print_json(&ln, print_analysis_json, &a);
	} else if (rep->json) {
		r = cuptrace_analysis_print_json(&a, stdout);
	} else {
		cuptrace_analysis_print(&a, stdout, rep->markdown);
		if (rep->by_line) {
			cuptrace_lines_print(&ln, stdout, rep->markdown, 0);
			cuptrace_analysis_print_line_waits(&a, stdout, rep->markdown);
		}
	}
	cuptrace_lines_free(&ln);
	if (!r && x->ann)
		r = annotate(argv[optind], x->ann, &a);
	else if (r || fflush(stdout)) {
		fprintf(stderr, "cuptrace analyze: cannot write the report\n");
		r = EXIT_FAIL;
	}
	cuptrace_analysis_free(&a);
	return r ? EXIT_FAIL : 0;
}

int cmd_analyze(int argc, char **argv)
{
	struct analyze_args x = {0};
	struct cmd_report rep = {0};
	int r = analyze_parse(&x, &rep, argc, argv);
	if (r < 0)
		r = analyze_check(&x, &rep, argc, argv);
	if (r < 0)
		r = analyze_run(&x, &rep, argc, argv);
	cmd_lines_free(&rep.lines);
	return r;
}
