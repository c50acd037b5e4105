/* cuptrace: record CUDA programs into Perfetto or Chrome traces, convert captures, summarize,
 * compare and merge runs.
 * main() dispatches to one file per subcommand, in the style of uftrace's cmds/; the commands
 * and their options are the tables of opt_table.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "opt_table.h"

#ifndef CUPTRACE_VERSION
#define CUPTRACE_VERSION "0.1.0"
#endif

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
	for (size_t i = 0; i < CLI_NCMDS; i++)
		fprintf(f, "  %-9s  %s\n", cli_commands[i].name, cli_commands[i].summary);
	fprintf(f,
	        "\n'cuptrace <command> --help' (or 'cuptrace help <command>') shows a command's\n"
	        "options and exit codes.\n"
	        "example: cuptrace record -o run.pftrace -- python train.py\n\n"
	        "exit codes: each command's help gives them; 2 is bad usage everywhere.\n");
}

static int find(const char *name)
{
	for (int i = 0; i < CLI_NCMDS; i++)
		if (!strcmp(name, cli_commands[i].name))
			return i;
	return -1;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
	    (!strcmp(argv[1], "help") && argc == 2)) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "help")) {
		/* help CMD is CMD --help; --options lists every long option (tests/cli_docs_test.sh
		 * checks README names each). */
		if (argc == 3 && !strcmp(argv[2], "--options")) {
			cli_list_options(stdout);
			return 0;
		}
		int i = argc == 3 ? find(argv[2]) : -1;
		if (i < 0) {
			if (argc == 3)
				fprintf(
				    stderr,
				    "cuptrace help: unknown command '%s'; see cuptrace --help\n",
				    argv[2]);
			else
				fprintf(stderr,
				        "cuptrace help: takes one command (got %d); see cuptrace "
				        "--help\n",
				        argc - 2);
			return EXIT_USAGE;
		}
		cli_help((enum cli_cmd)i, stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
		printf("cuptrace %s\n", CUPTRACE_VERSION);
		return 0;
	}
	int i = find(argv[1]);
	if (i < 0) {
		fprintf(stderr, "cuptrace: unknown command '%s'; see cuptrace --help\n", argv[1]);
		return EXIT_USAGE;
	}
	/* record handles its program's signals itself, and writes no outfile. */
	if (i != CLI_RECORD)
		cmd_out_signals();
	cmd_log_begin(cli_commands[i].name);
	return cli_commands[i].fn(argc - 1, argv + 1);
}
