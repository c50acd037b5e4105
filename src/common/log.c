/* Diagnostics routed through one replaceable callback (see log.h). */
#include "log.h"

#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>
#include <string.h>

static void default_sink(enum cuptrace_log_level level, const char *msg)
{
	static const char *const prefix[] = {"error: ", "warning: ", "", ""};
	char line[1200];
	int n = snprintf(line, sizeof(line), "cuptrace: %s%s\n", prefix[level], msg);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(line))
		n = sizeof(line) - 1;
	/* One write() per line so lines from several threads do not interleave. */
	ssize_t r = write(STDERR_FILENO, line, (size_t)n);
	(void)r;
}

static _Atomic(cuptrace_log_fn) log_fn = default_sink;
static atomic_int log_level = CUPTRACE_LOG_WARN;

cuptrace_log_fn cuptrace_log_set(cuptrace_log_fn fn)
{
	return atomic_exchange(&log_fn, fn ? fn : default_sink);
}

void cuptrace_log_set_level(enum cuptrace_log_level level)
{
	atomic_store(&log_level, (int)level);
}

void cuptrace_log(enum cuptrace_log_level level, const char *fmt, ...)
{
	if ((int)level > atomic_load(&log_level))
		return;
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	atomic_load (&log_fn)(level, msg);
}
