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

int cmd_symbolize(int argc, char **argv)
{
	const char *out = NULL, *format = NULL, **dirs = NULL;
	size_t ndirs = 0;
	int c, status = EXIT_FAIL;
	while ((c = cli_next(CLI_SYMBOLIZE, argc, argv)) != CLI_END) {
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
		}
	}
	if (cli_status() >= 0) {
		status = cli_status();
		goto done;
	}
	if (optind != argc - 1 || !out) {
		if (optind != argc - 1)
			cli_usage_error(CLI_SYMBOLIZE, "takes one INPUT (got %d)", argc - optind);
		else
			cli_usage_error(CLI_SYMBOLIZE, "needs -o OUTPUT");
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
	int r = sink ? cmd_read(in, sink, 0) : -ENOMEM;
	int f = sink ? sink->ops->finish(sink) : 0;
	cuptrace_sink_destroy(sink);
	cuptrace_symbolizer_free(sym);
	if (r && sink) {
		cmd_read_failed("symbolize", in, r,
		                strcmp(out, "-") ? "; nothing was written" : NULL);
		cuptrace_outfile_abort(&of);
		goto done;
	}
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
