/* cuptrace symbolize: any trace in, the same trace out with its native call-stack frames
 * symbolized (function, file, line) from the binaries and debug files on this machine. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "symbolize/symbolize.h"
#include "cmd.h"
#include "format/formats.h"
#include "output/outfile.h"
#include "read/read.h"

static void symbolize_usage(FILE *f)
{
	fprintf(f,
	        "usage: cuptrace symbolize INPUT -o OUTPUT [--symbol-dir DIR]...\n\n"
	        "Writes INPUT (any trace cuptrace reads; '-' is standard input) to OUTPUT\n"
	        "(format from its extension, as convert; '-' is standard output) with the\n"
	        "native frames of its call stacks symbolized. OUTPUT must not be INPUT.\n\n"
	        "  -o, --output PATH     output file (required)\n"
	        "  -f, --format FMT      perfetto | chrome (or json)\n"
	        "  -s, --symbol-dir DIR  where to look for binaries and debug files (repeatable;\n"
	        "                        also CUPTRACE_SYMBOL_PATH, a colon list): DIR/.build-id/\n"
	        "                        xx/rest[.debug], DIR/<module's name>, DIR/<debuglink>\n"
	        "  -h, --help            this help\n\n"
	        "exit status: 0 written; 1 failed (what was at OUTPUT stays); 2 bad usage\n");
}

int cmd_symbol_dir_take(const char ***dirs, size_t *n, const char *dir)
{
	const char **d = realloc(*dirs, (*n + 1) * sizeof(*d));
	if (!d)
		return -ENOMEM;
	d[(*n)++] = dir;
	*dirs = d;
	return 0;
}

int cmd_symbolize(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"output", required_argument, NULL, 'o'},
	    {"format", required_argument, NULL, 'f'},
	    {"symbol-dir", required_argument, NULL, 's'},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	const char *out = NULL, *format = NULL, **dirs = NULL;
	size_t ndirs = 0;
	int c, status = EXIT_FAIL;
	optind = 1;
	while ((c = getopt_long(argc, argv, "o:f:s:h", opts, NULL)) != -1) {
		switch (c) {
		case 'o':
			out = optarg;
			break;
		case 'f':
			format = optarg;
			break;
		case 's':
			if (cmd_symbol_dir_take(&dirs, &ndirs, optarg))
				goto done;
			break;
		case 'h':
			symbolize_usage(stdout);
			status = 0;
			goto done;
		default:
			symbolize_usage(stderr);
			status = EXIT_USAGE;
			goto done;
		}
	}
	if (optind != argc - 1 || !out) {
		fprintf(stderr, "cuptrace symbolize: need one INPUT and -o OUTPUT\n\n");
		symbolize_usage(stderr);
		status = EXIT_USAGE;
		goto done;
	}
	const char *in = argv[optind];
	if ((status = cmd_input("symbolize", in, NULL)))
		goto done;
	struct cuptrace_outfile of = {0};
	struct cuptrace_sink *sink =
	    cmd_sink_open(&of, "symbolize", out, format, NULL, 0, &in, 1, &status);
	if (!sink)
		goto done;
	status = EXIT_FAIL;
	struct cuptrace_symbolizer *sym = cuptrace_symbolizer_new(dirs, ndirs);
	if (!sym) {
		cuptrace_sink_destroy(sink);
		cuptrace_outfile_abort(&of);
		goto done;
	}
	sink = cuptrace_symbolize_sink_new(sym, sink);
	int r = sink ? cuptrace_read_trace(in, sink, 0) : -ENOMEM;
	int f = sink ? sink->ops->finish(sink) : 0;
	cuptrace_sink_destroy(sink);
	cuptrace_symbolizer_free(sym);
	if (r || f) {
		fprintf(stderr, "cuptrace symbolize: %s -> %s failed: %s\n", in, out,
		        strerror(-(r ? r : f)));
		cuptrace_outfile_abort(&of);
		goto done;
	}
	status = cmd_out_end(&of, "symbolize", 1);
done:
	free(dirs);
	return status;
}
