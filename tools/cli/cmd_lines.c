/* --group-by line's options for stats, diff and analyze: the user-code patterns and the
 * symbolizer that fills native frames on the way (cmd.h). */
#define _GNU_SOURCE /* open_memstream */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lines/lines.h"
#include "symbolize/symbolize.h"
#include "cmd.h"
#include "opt_table.h"

int cmd_lines_option(struct cmd_lines *l, int c, const char *arg)
{
	switch (c) {
	case CMD_LINES_OPT_SKIP:
		return cmd_symbol_dir_take(&l->skip, &l->nskip, arg) ? -1 : 1;
	case CMD_LINES_OPT_KEEP:
		return cmd_symbol_dir_take(&l->keep, &l->nkeep, arg) ? -1 : 1;
	case CMD_LINES_OPT_DIR:
		return cmd_symbol_dir_take(&l->dirs, &l->ndirs, arg) ? -1 : 1;
	default:
		return 0;
	}
}

struct cuptrace_lines_opts cmd_lines_opts(const struct cmd_lines *l)
{
	return (struct cuptrace_lines_opts){
	    .skip = l->skip, .nskip = l->nskip, .keep = l->keep, .nkeep = l->nkeep};
}

struct cuptrace_sink *cmd_lines_symbolize(struct cmd_lines *l, struct cuptrace_sink *inner)
{
	if (!inner)
		return NULL;
	if (!l->sym && !(l->sym = cuptrace_symbolizer_new(l->dirs, l->ndirs))) {
		cuptrace_sink_destroy(inner);
		return NULL;
	}
	return cuptrace_symbolize_sink_new(l->sym, inner);
}

void cmd_lines_free(struct cmd_lines *l)
{
	cuptrace_symbolizer_free(l->sym);
	free(l->skip);
	free(l->keep);
	free(l->dirs);
	memset(l, 0, sizeof(*l));
}

int cmd_lines_print_json(const struct cuptrace_lines *l, int (*print)(const void *ctx, FILE *f),
                         const void *ctx)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&buf, &len);
	int r = mem ? print(ctx, mem) : -1;
	if (mem && fclose(mem))
		r = r ? r : -1;
	if (!r)
		r = cuptrace_lines_json_append(buf, len, l, stdout);
	free(buf);
	return r;
}

int cmd_report_option(int cmd, struct cmd_report *r, int c, const char *arg)
{
	int taken = cmd_lines_option(&r->lines, c, arg);
	if (taken < 0) {
		fprintf(stderr, "cuptrace %s: out of memory\n", cli_commands[cmd].name);
		return EXIT_FAIL;
	}
	if (taken)
		return 0;
	switch (c) {
	case 'm':
		r->markdown = 1;
		return 0;
	case 'j':
		r->json = 1;
		return 0;
	case CMD_OPT_GROUP_BY:
		if (cmd == CLI_DIFF)
			return -1;
		if (strcmp(arg, "line")) {
			fprintf(stderr,
			        "cuptrace %s: bad value for --group-by: '%s' (takes line)\n",
			        cli_commands[cmd].name, arg);
			return EXIT_USAGE;
		}
		r->by_line = 1;
		return 0;
	}
	return -1;
}

int cmd_report_check(int cmd, const struct cmd_report *r)
{
	if (r->markdown && r->json) {
		cli_usage_error((enum cli_cmd)cmd, "--markdown and --json exclude each other");
		return EXIT_USAGE;
	}
	return 0;
}
