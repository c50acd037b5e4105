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
#include "opt_table.h"
#include "format/formats.h"
#include "output/outfile.h"
#include "read/read.h"

int cmd_symbol_dir_take(const char ***dirs, size_t *n, const char *dir)
{
	const char **d = realloc(*dirs, (*n + 1) * sizeof(*d));
	if (!d)
		return -ENOMEM;
	d[(*n)++] = dir;
	*dirs = d;
	return 0;
}

/* What the command line asked for. dirs is owned (freed by cmd_symbolize); the strings are
 * argv's. */
struct symbolize_args {
	const char *in, *out, *format, **dirs;
	size_t ndirs;
};

/* The options into a: -1 to go on, else the exit code (0 after --help). */
static int symbolize_parse(struct symbolize_args *a, int argc, char **argv)
{
	int c;
	while ((c = cli_next(CLI_SYMBOLIZE, argc, argv)) != CLI_END) {
		switch (c) {
		case 'o':
			a->out = optarg;
			break;
		case 'f':
			a->format = optarg;
			break;
		case 's':
			if (cmd_symbol_dir_take(&a->dirs, &a->ndirs, optarg)) {
				fprintf(stderr, "cuptrace symbolize: out of memory\n");
				return EXIT_FAIL;
			}
			break;
		}
	}
	return cli_status();
}

/* One INPUT and -o OUTPUT, the input readable: -1, else the exit code after one line. */
static int symbolize_check(struct symbolize_args *a, int argc, char **argv)
{
	if (optind != argc - 1) {
		cli_usage_error(CLI_SYMBOLIZE, "takes one INPUT (got %d)", argc - optind);
		return EXIT_USAGE;
	}
	if (!a->out) {
		cli_usage_error(CLI_SYMBOLIZE, "needs -o OUTPUT");
		return EXIT_USAGE;
	}
	a->in = argv[optind];
	int status = cmd_input("symbolize", a->in, NULL);
	return status ? status : -1;
}

/* Reads the input through the symbolizing sink into the output (written whole or not at all):
 * 0 or EXIT_FAIL. */
static int symbolize_run(const struct symbolize_args *a)
{
	int status = EXIT_FAIL;
	struct cuptrace_outfile of = {0};
	struct cuptrace_sink *sink =
	    cmd_sink_open(&of, "symbolize", a->out, a->format, NULL, 0, &a->in, 1, &status);
	if (!sink)
		return status;
	struct cuptrace_symbolizer *sym = cuptrace_symbolizer_new(a->dirs, a->ndirs);
	if (!sym) {
		cuptrace_sink_destroy(sink);
		cuptrace_outfile_abort(&of);
		return EXIT_FAIL;
	}
	sink = cuptrace_symbolize_sink_new(sym, sink);
	int r = sink ? cmd_read(a->in, sink, 0) : -ENOMEM;
	int f = sink ? sink->ops->finish(sink) : 0;
	cuptrace_sink_destroy(sink);
	cuptrace_symbolizer_free(sym);
	if (r && sink) {
		cmd_read_failed("symbolize", a->in, r,
		                strcmp(a->out, "-") ? "; nothing was written" : NULL);
		cuptrace_outfile_abort(&of);
		return EXIT_FAIL;
	}
	if (r || f) {
		fprintf(stderr, "cuptrace symbolize: %s -> %s failed: %s\n", a->in, a->out,
		        strerror(-(r ? r : f)));
		cuptrace_outfile_abort(&of);
		return EXIT_FAIL;
	}
	return cmd_out_end(&of, "symbolize", 1);
}

int cmd_symbolize(int argc, char **argv)
{
	struct symbolize_args a = {0};
	int r = symbolize_parse(&a, argc, argv);
	if (r < 0)
		r = symbolize_check(&a, argc, argv);
	if (r < 0)
		r = symbolize_run(&a);
	free(a.dirs);
	return r;
}
