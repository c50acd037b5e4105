/* The one place where the commands read a trace file: every reader cuptrace has (a raw capture
 * through the converter, a Perfetto trace, a Chrome or torch.profiler JSON) replays into any
 * sink (read/read.h picks the reader from the file's content).
 *
 * The readers say why they fail through cuptrace_log (common/log.h). The command line routes
 * that log here (cmd_log_begin): while a file is read, its first error is held, and the
 * command's failure says it in one line with the file's name ("cuptrace stats: cannot read
 * X: why"), instead of the reader's line followed by the command's. Single-threaded use: the
 * CLI reads one file at a time on its main thread; errors logged outside a read print at once. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "common/log.h"
#include "read/read.h"

static const char *log_cmd = "";
static int reading;     /* a read is under way: hold its first error */
static char held[1024]; /* that error, "" if none */
static unsigned more;   /* errors after it in the same read */

static void print_held(void)
{
	if (!held[0])
		return;
	fprintf(stderr, "cuptrace %s: %s\n", log_cmd, held);
	held[0] = 0;
}

static void cli_log(enum cuptrace_log_level level, const char *msg)
{
	if (level == CUPTRACE_LOG_ERROR && reading) {
		if (held[0])
			more++;
		else
			snprintf(held, sizeof(held), "%s", msg);
		return;
	}
	fprintf(stderr, "cuptrace %s: %s%s\n", log_cmd,
	        level == CUPTRACE_LOG_WARN ? "warning: " : "", msg);
}

void cmd_log_begin(const char *cmd)
{
	log_cmd = cmd;
	cuptrace_log_set(cli_log);
	atexit(print_held); /* nothing held is lost */
}

int cmd_read(const char *path, struct cuptrace_sink *sink, int flags)
{
	print_held();
	more = 0;
	reading = 1;
	int r = cuptrace_read_trace(path, sink, flags);
	reading = 0;
	return r;
}

int cmd_replay(const char *path, struct cuptrace_sink *sink)
{
	return cmd_read(path, sink, 0);
}

int cmd_replay_cb(void *ctx, const char *path, struct cuptrace_sink *sink)
{
	(void)ctx;
	return cmd_replay(path, sink);
}

void cmd_read_failed(const char *cmd, const char *path, int r, const char *then)
{
	char why[1100];
	size_t n = strlen(path);
	const char *h = held;
	/* The readers name the file themselves: "cannot read PATH: why" or "PATH: why". */
	if (!strncmp(h, "cannot read ", 12) && !strncmp(h + 12, path, n) && h[12 + n] == ':')
		h += 12 + n + 1;
	else if (!strncmp(h, path, n) && h[n] == ':')
		h += n + 1;
	while (*h == ' ')
		h++;
	if (*h)
		snprintf(why, sizeof(why), "%s", h);
	else
		snprintf(why, sizeof(why), "%s", strerror(r < 0 ? -r : EIO));
	if (more)
		snprintf(why + strlen(why), sizeof(why) - strlen(why), " (and %u more errors)",
		         more);
	fprintf(stderr, "cuptrace %s: cannot read %s: %s%s\n", cmd, path, why, then ? then : "");
	held[0] = 0;
	more = 0;
}
