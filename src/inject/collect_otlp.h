/* --otlp in the injected library: the OTLP sink (format/otlp.h) from the CUPTRACE_OTLP_*
 * variables that `cuptrace record` sets (include/cuptrace.h lists them). */
#ifndef CUPTRACE_INJECT_COLLECT_OTLP_H
#define CUPTRACE_INJECT_COLLECT_OTLP_H

#include <stddef.h>

#include "format/event.h"

/* Is CUPTRACE_OTLP_URL set? (Every CUPTRACE_OTLP_* variable is a row of the settings table,
 * common/options.c.) */
int cuptrace_collect_otlp_wanted(void);
/* The OTLP sink, live (the clock moves the span window) and dropping rather than waiting when
 * the collector is slow; NULL when it cannot start (one message said why). A bad value in one of
 * the other variables is warned about and ignored. */
struct cuptrace_sink *cuptrace_collect_otlp_open(void);
/* The summary line of an OTLP sink that has finished, on stderr. */
void cuptrace_collect_otlp_summary(struct cuptrace_sink *otlp);

#endif
