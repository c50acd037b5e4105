/* The --otlp options that record and convert share. They are settings of the one table
 * (common/options.h; their rows in opt_table.c), parsed and named in errors as every other
 * option is; this adds what one value alone cannot say: the others need --otlp, and --otlp's
 * URL must have the form the sender takes. */
#ifndef CUPTRACE_TOOLS_OTLP_CLI_H
#define CUPTRACE_TOOLS_OTLP_CLI_H

#include "opt_table.h"

struct cuptrace_otlp_opts;

/* given: the settings given as options, by setting id (values already parsed by the table).
 * Says what is wrong ("cuptrace CMD: ...") and returns -1, else 0. */
int otlp_cli_check(enum cli_cmd cmd, const char *const *given);
/* The sink's options from the values given (strings borrowed from given). */
void otlp_cli_opts(const char *const *given, struct cuptrace_otlp_opts *o);

#endif
