/* cuptrace: record CUDA programs into Perfetto or Chrome traces, convert captures, summarize,
 * compare and merge runs.
 * main() dispatches to one file per subcommand, in the style of uftrace's cmds/. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"

#ifndef CUPTRACE_VERSION
#define CUPTRACE_VERSION "0.1.0"
#endif

static const struct {
	const char *name;
	int (*fn)(int, char **);
	const char *help;
} cmds[] = {
    {"record", cmd_record, "run a command and trace what it does with CUDA"},
    {"convert", cmd_convert,
     "convert a capture, a trace or a torch.profiler JSON to Perfetto or Chrome JSON"},
    {"stats", cmd_stats,
     "summarize a trace, capture or torch.profiler JSON (counts, top kernels, GPU busy)"},
    {"diff", cmd_diff, "compare two runs: what changed per kernel, API call, copy, range, op"},
    {"merge", cmd_merge, "put several runs side by side in one trace (--side-by-side)"},
    {"trigger", cmd_trigger,
     "open a capture window in running traced processes, or write their flight recorder"},
    {"analyze", cmd_analyze,
     "why a run is slow: steps, GPU idle by cause, GPU time per op, findings"},
    {"symbolize", cmd_symbolize,
     "fill in the native frames of a trace's call stacks (function, file, line) from binaries"},
    {"share", cmd_share,
     "a copy safe to attach to a public bug report: no host, user, paths; --redact-names"},
};

int cmd_setting(const char *cmd, enum cuptrace_setting_id id, const char *text,
                struct cuptrace_setting_value *v)
{
	char err[512];
	if (!cuptrace_setting_parse(cuptrace_setting_get(id), text, CUPTRACE_FROM_OPTION, v, err,
	                            sizeof(err)))
		return 0;
	fprintf(stderr, "cuptrace %s: %s\n", cmd, err);
	return -1;
}

int cmd_setting_env(const char *cmd, enum cuptrace_setting_id id)
{
	const struct cuptrace_setting *s = cuptrace_setting_get(id);
	const char *text = getenv(s->env);
	struct cuptrace_setting_value v;
	char err[512];
	if (!text || !*text ||
	    !cuptrace_setting_parse(s, text, CUPTRACE_FROM_ENV, &v, err, sizeof(err)))
		return 0;
	fprintf(stderr, "cuptrace %s: %s\n", cmd, err);
	return -1;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: cuptrace <command> [options] ...\n\n"
	           "Records what a CUDA program does (API calls, kernels, copies, memsets,\n"
	           "synchronization, NVTX) through CUPTI into a trace for ui.perfetto.dev.\n\n"
	           "commands:\n");
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		fprintf(f, "  %-8s  %s\n", cmds[i].name, cmds[i].help);
	fprintf(f, "\n'cuptrace <command> --help' shows a command's options.\n"
	           "example: cuptrace record -o run.pftrace -- python train.py\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
		printf("cuptrace %s\n", CUPTRACE_VERSION);
		return 0;
	}
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[1], cmds[i].name)) {
			/* record handles its program's signals itself, and writes no outfile. */
			if (strcmp(argv[1], "record"))
				cmd_out_signals();
			return cmds[i].fn(argc - 1, argv + 1);
		}
	fprintf(stderr, "cuptrace: unknown command '%s'\n\n", argv[1]);
	usage(stderr);
	return EXIT_USAGE;
}
