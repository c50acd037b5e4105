/* cuptrace convert: any trace the read layer takes in (capture, Perfetto, Chrome or
 * torch.profiler JSON), Perfetto or Chrome JSON out. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "symbolize/symbolize.h"
#include "cmd.h"
#include "opt_table.h"
#include "common/log.h"
#include "format/formats.h"
#include "format/otlp.h"
#include "output/outfile.h"
#include "otlp_cli.h"
#include "read/read.h"

/* What `convert` was asked (borrowed from argv; dirs malloc'd). */
struct convert_args {
	const char *otlp[CUPTRACE_NSETTINGS]; /* the OTLP settings given, by id (otlp_cli.h) */
	const char *in, *out, *format, *compress, **dirs;
	size_t ndirs;
	int flags, level; /* the reader's flags (read/read.h), the compression level */
};

/* The options into a: -1 to go on, else the exit code (0 after --help). */
static int convert_parse(struct convert_args *a, int argc, char **argv)
{
	struct cuptrace_setting_value v;
	int c;
	while ((c = cli_next(CLI_CONVERT, argc, argv)) != CLI_END) {
		switch (c) {
		case 'o':
			if (cmd_setting("convert", CUPTRACE_SET_OUTPUT, optarg, &v))
				return EXIT_USAGE;
			a->out = optarg;
			break;
		case 'f':
			a->format = optarg; /* checked with OUTPUT's name below */
			break;
		case 'z':
			if (cmd_setting("convert", CUPTRACE_SET_COMPRESS, optarg, &v))
				return EXIT_USAGE;
			a->compress = optarg;
			break;
		case 'd':
			if (cmd_setting("convert", CUPTRACE_SET_DRIVER, optarg, &v))
				return EXIT_USAGE;
			/* Which calls were recorded was decided when recording: a capture holds
			 * the calls its --driver kept, and convert keeps them. */
			if (v.i == CUPTRACE_DRIVER_WORK) {
				fprintf(stderr, "cuptrace convert: --driver takes user or all "
				                "(work applies to record)\n");
				return EXIT_USAGE;
			}
			if (v.i == CUPTRACE_DRIVER_ALL)
				a->flags |= CUPTRACE_READ_DRIVER_ALL;
			break;
		case 'R':
			if (cmd_setting("convert", CUPTRACE_SET_RUNTIME, optarg, &v))
				return EXIT_USAGE;
			/* watch keeps calls as they happen: a capture holds only what it kept. */
			if (v.i == CUPTRACE_RUNTIME_MODE_WATCH) {
				fprintf(stderr, "cuptrace convert: --runtime takes filtered or all "
				                "(watch applies to record)\n");
				return EXIT_USAGE;
			}
			if (v.i == CUPTRACE_RUNTIME_MODE_ALL)
				a->flags |= CUPTRACE_READ_RUNTIME_ALL;
			break;
		case CMD_WOPT + CUPTRACE_SET_OVERHEAD_TRACKS:
			if (cmd_setting("convert", CUPTRACE_SET_OVERHEAD_TRACKS, optarg, &v))
				return EXIT_USAGE;
			if (v.i == CUPTRACE_OVERHEAD_THREAD)
				a->flags |= CUPTRACE_READ_OVERHEAD_THREADS;
			break;
		case CMD_WOPT + CUPTRACE_SET_COMPRESS_LEVEL:
			if (cmd_setting("convert", CUPTRACE_SET_COMPRESS_LEVEL, optarg, &v))
				return EXIT_USAGE;
			a->level = (int)v.i;
			break;
		case CMD_LINES_OPT_DIR:
			if (cmd_symbol_dir_take(&a->dirs, &a->ndirs, optarg))
				return EXIT_FAIL;
			break;
		default:
			if (c < CMD_WOPT + CUPTRACE_SET_OTLP_URL ||
			    c > CMD_WOPT + CUPTRACE_SET_OTLP_TIMEOUT)
				break; /* not reached: the table holds no other row for convert */
			if (cmd_setting("convert", (enum cuptrace_setting_id)(c - CMD_WOPT), optarg,
			                &v))
				return EXIT_USAGE;
			a->otlp[c - CMD_WOPT] = optarg;
			break;
		}
	}
	return cli_status();
}

/* The OTLP values, the operand and the input: -1, or the exit code after one line. */
static int convert_check(struct convert_args *a, int argc, char **argv)
{
	if (otlp_cli_check(CLI_CONVERT, a->otlp))
		return EXIT_USAGE;
	if (optind != argc - 1) {
		cli_usage_error(CLI_CONVERT, "takes one INPUT (got %d)", argc - optind);
		return EXIT_USAGE;
	}
	if (!a->out && !a->otlp[CUPTRACE_SET_OTLP_URL]) {
		cli_usage_error(CLI_CONVERT, "needs -o OUTPUT (or --otlp URL)");
		return EXIT_USAGE;
	}
	a->in = argv[optind];
	int e = cmd_input("convert", a->in, NULL);
	return e ? e : -1;
}

/* Reads the input into the output (written aside, then put in place) and the OTLP spans.
 * 0, or the exit code after one line. */
static int convert_run(struct convert_args *a)
{
	int e;
	struct cuptrace_outfile of = {0};
	struct cuptrace_sink *sink = NULL;
	if (a->out && !(sink = cmd_sink_open(&of, "convert", a->out, a->format, a->compress,
	                                     a->level, &a->in, 1, &e)))
		return e;
	struct cuptrace_sink *spans = NULL;
	if (a->otlp[CUPTRACE_SET_OTLP_URL]) {
		/* Nothing waits on convert: a full queue waits for room rather than dropping. */
		struct cuptrace_otlp_opts o = {.sz = sizeof(o),
		                               .http = {.sz = sizeof(o.http), .block = 1}};
		otlp_cli_opts(a->otlp, &o);
		spans = cuptrace_otlp_sink_new(&o);
		if (!spans) {
			cuptrace_sink_destroy(sink);
			cuptrace_outfile_abort(&of);
			return errno == EINVAL ? EXIT_USAGE : EXIT_FAIL;
		}
		sink = sink ? cuptrace_tee_sink_new(sink, spans) : spans;
		if (!sink) {
			cuptrace_outfile_abort(&of);
			return EXIT_FAIL;
		}
	}
	/* Native frames are symbolized on the way (nothing to do for a trace without stacks). */
	struct cuptrace_symbolizer *sym = cuptrace_symbolizer_new(a->dirs, a->ndirs);
	if (!sym || !(sink = cuptrace_symbolize_sink_new(sym, sink))) {
		cuptrace_symbolizer_free(sym);
		cuptrace_sink_destroy(sym ? NULL : sink);
		cuptrace_outfile_abort(&of);
		return EXIT_FAIL;
	}
	int r = cmd_read(a->in, sink, a->flags);
	int f = sink->ops->finish(sink);
	int status = 0;
	if (spans) {
		struct cuptrace_otlp_stats st;
		char line[512];
		cuptrace_otlp_sink_stats(spans, &st);
		cuptrace_otlp_stats_line(line, sizeof(line), cuptrace_otlp_sink_url(spans), &st);
		fprintf(stderr, "cuptrace: %s\n", line);
		if (st.spans_dropped) {
			fprintf(stderr, "cuptrace convert: %llu of %llu spans did not reach %s\n",
			        (unsigned long long)st.spans_dropped, (unsigned long long)st.spans,
			        cuptrace_otlp_sink_url(spans));
			status = EXIT_FAIL;
		}
	}
	cuptrace_sink_destroy(sink);
	cuptrace_symbolizer_free(sym);
	if (r) {
		cmd_read_failed("convert", a->in, r,
		                a->out && strcmp(a->out, "-") ? "; nothing was written" : NULL);
		cuptrace_outfile_abort(&of);
		return EXIT_FAIL;
	}
	if (f) {
		fprintf(stderr, "cuptrace convert: %s -> %s failed: %s%s\n", a->in,
		        a->out ? a->out : a->otlp[CUPTRACE_SET_OTLP_URL], strerror(-(r ? r : f)),
		        a->out && strcmp(a->out, "-") ? "; nothing was written" : "");
		cuptrace_outfile_abort(&of);
		return EXIT_FAIL;
	}
	if (a->out && (e = cmd_out_end(&of, "convert", 1)))
		return e;
	return status;
}

int cmd_convert(int argc, char **argv)
{
	struct convert_args a = {0};
	int r = convert_parse(&a, argc, argv);
	if (r < 0)
		r = convert_check(&a, argc, argv);
	if (r < 0)
		r = convert_run(&a);
	free(a.dirs);
	return r;
}
