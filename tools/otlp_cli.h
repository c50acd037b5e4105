/* The --otlp options that record and convert share: one table, one check, one help text. */
#ifndef CUPTRACE_TOOLS_OTLP_CLI_H
#define CUPTRACE_TOOLS_OTLP_CLI_H

#include <getopt.h>

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

/* Entries for a getopt_long table. */
#define OTLP_CLI_OPTIONS                                                                           \
	{"otlp", required_argument, NULL, OPT_OTLP},                                               \
	    {"service", required_argument, NULL, OPT_OTLP_SERVICE},                                \
	    {"otlp-trace-per", required_argument, NULL, OPT_OTLP_TRACE_PER},                       \
	    {"otlp-batch", required_argument, NULL, OPT_OTLP_BATCH},                               \
	    {"otlp-interval", required_argument, NULL, OPT_OTLP_INTERVAL},                         \
	    {"otlp-window", required_argument, NULL, OPT_OTLP_WINDOW},                             \
	{                                                                                          \
		"otlp-timeout", required_argument, NULL, OPT_OTLP_TIMEOUT                          \
	}

/* The options' help lines. */
#define OTLP_CLI_HELP                                                                              \
	"      --otlp URL        also send the trace as OpenTelemetry spans (OTLP/HTTP,\n"         \
	"                        POST URL/v1/traces) to a collector, Jaeger or Tempo\n"            \
	"      --service NAME    service.name of the spans (default: the program's name)\n"        \
	"      --otlp-trace-per NAME  one trace per occurrence of the NVTX range (or any\n"        \
	"                        slice) NAME instead of one per run\n"                             \
	"      --otlp-batch N    spans per request (default 512)\n"                                \
	"      --otlp-interval MS  send a partial batch after this long (default 1000)\n"          \
	"      --otlp-window MS  how long a span waits for the ranges around it (trace time,\n"    \
	"                        default 10000)\n"                                                 \
	"      --otlp-timeout MS  at the end, stop sending after this long (default 5000)\n"

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
