/* Diagnostics. Deep code never prints: it calls cuptrace_log(), which goes to a replaceable
 * callback (stderr with a "cuptrace: " prefix by default). The injected library never writes to
 * stdout. Thread-safe: the callback is read atomically and must itself be thread-safe. */
#ifndef CUPTRACE_COMMON_LOG_H
#define CUPTRACE_COMMON_LOG_H

#include <stdarg.h>

enum cuptrace_log_level {
	CUPTRACE_LOG_ERROR = 0,
	CUPTRACE_LOG_WARN,
	CUPTRACE_LOG_INFO,
	CUPTRACE_LOG_DEBUG
};

typedef void (*cuptrace_log_fn)(enum cuptrace_log_level level, const char *msg);

/* Replaces the sink; NULL restores the default (stderr). Returns the previous one. */
cuptrace_log_fn cuptrace_log_set(cuptrace_log_fn fn);
/* Messages above this level are dropped (default WARN; CUPTRACE_LOG=debug|info|warn|error). */
void cuptrace_log_set_level(enum cuptrace_log_level level);
void cuptrace_log(enum cuptrace_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define cuptrace_err(...)   cuptrace_log(CUPTRACE_LOG_ERROR, __VA_ARGS__)
#define cuptrace_warn(...)  cuptrace_log(CUPTRACE_LOG_WARN, __VA_ARGS__)
#define cuptrace_info(...)  cuptrace_log(CUPTRACE_LOG_INFO, __VA_ARGS__)
#define cuptrace_debug(...) cuptrace_log(CUPTRACE_LOG_DEBUG, __VA_ARGS__)

#endif
