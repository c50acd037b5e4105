/* The --otlp options that record and convert share (their rows are in opt_table.c): one check,
 * one hand-over to the library. */
#ifndef CUPTRACE_TOOLS_OTLP_CLI_H
#define CUPTRACE_TOOLS_OTLP_CLI_H

struct cuptrace_otlp_opts;

enum {
	OPT_OTLP = 0x200,
	OPT_OTLP_SERVICE,
	OPT_OTLP_TRACE_PER,
	OPT_OTLP_BATCH,
	OPT_OTLP_INTERVAL,
	OPT_OTLP_WINDOW,
	OPT_OTLP_TIMEOUT,
	OPT_OTLP_END,
};

struct otlp_cli {
	const char *v[OPT_OTLP_END - OPT_OTLP]; /* by option, as given */
};

/* Keeps opt's argument if opt is one of ours: 1, else 0. */
int otlp_cli_take(struct otlp_cli *c, int opt, const char *arg);
/* Checks the values into o (may be NULL); says what is wrong ("cuptrace CMD: ...") and returns
 * -1, else 0. Options other than --otlp need --otlp. */
int otlp_cli_check(const struct otlp_cli *c, const char *cmd, struct cuptrace_otlp_opts *o);
/* Passes the options to the injected library (CUPTRACE_OTLP_*). */
void otlp_cli_setenv(const struct otlp_cli *c);

#endif
