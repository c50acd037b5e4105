/* `cuptrace record`, once the command has ended: the traces its processes could not finish
 * (killed by SIGKILL, crashed without the flight recorder) are still in their partial files
 * (output/recfile.h). Each goes in place under its name, cut where the process died: the readers
 * read a cut trace up to the damage and say so. One that holds no event never replaces a file
 * that was there: a run that recorded nothing leaves the old trace as it was. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd.h"
#include "common/log.h"
#include "format/event.h"
#include "output/recfile.h"
#include "read/read.h"

/* Counts what a trace holds besides its tracks and metadata. */
struct count_sink {
	struct cuptrace_sink base;
	uint64_t events;
};

static int c_begin(struct cuptrace_sink *s, const struct cuptrace_trace_info *info)
{
	(void)s;
	(void)info;
	return 0;
}

static int c_track(struct cuptrace_sink *s, const struct cuptrace_track *t)
{
	(void)s;
	(void)t;
	return 0;
}

static int c_slice(struct cuptrace_sink *s, const struct cuptrace_slice *e)
{
	(void)e;
	((struct count_sink *)s)->events++;
	return 0;
}

static int c_instant(struct cuptrace_sink *s, const struct cuptrace_instant *e)
{
	(void)e;
	((struct count_sink *)s)->events++;
	return 0;
}

static int c_counter(struct cuptrace_sink *s, const struct cuptrace_counter *e)
{
	(void)e;
	((struct count_sink *)s)->events++;
	return 0;
}

static int c_meta(struct cuptrace_sink *s, const struct cuptrace_meta *m, size_t n)
{
	(void)s;
	(void)m;
	(void)n;
	return 0;
}

static int c_finish(struct cuptrace_sink *s)
{
	(void)s;
	return 0;
}

static void c_destroy(struct cuptrace_sink *s)
{
	(void)s;
}

static const struct cuptrace_sink_ops count_ops = {
    .name = "count",
    .begin = c_begin,
    .track = c_track,
    .slice = c_slice,
    .instant = c_instant,
    .counter = c_counter,
    .meta = c_meta,
    .finish = c_finish,
    .destroy = c_destroy,
};

/* Partial files larger than this are put in place without reading them. */
#define BIG (64ll << 20)

/* The reader's first warning or error (what the damage is), said again here under the trace's
 * own name: the partial name it read means nothing to the user. Only this thread reads. */
static char said[1024];

static void catch_log(enum cuptrace_log_level level, const char *msg)
{
	if (level <= CUPTRACE_LOG_WARN && !said[0])
		snprintf(said, sizeof(said), "%s", msg);
}

static void settle(const struct cuptrace_recfile_left *l, void *ctx)
{
	(void)ctx;
	if (l->alive) {
		fprintf(
		    stderr,
		    "cuptrace record: pid %d outlived the command and is still writing its trace "
		    "(%s): it goes in place as %s when that process finishes it\n",
		    l->pid, l->tmp, l->target);
		return;
	}
	struct stat st;
	int old = !stat(l->target, &st) && S_ISREG(st.st_mode) && st.st_size > 0;
	off_t size = !stat(l->tmp, &st) ? st.st_size : 0;
	struct count_sink cs = {.base = {.ops = &count_ops}};
	int r = 0;
	said[0] = 0;
	if (size > BIG) {
		/* Read whole, as every reader does, it would cost its size in memory; metadata
		 * alone is a few KiB, so a file this size holds events. */
		cs.events = 1;
		snprintf(said, sizeof(said), "cut where it stopped (%lld bytes; not read here)",
		         (long long)size);
	} else if (size > 0) {
		cuptrace_log_fn prev = cuptrace_log_set(catch_log);
		r = cuptrace_read_trace(l->tmp, &cs.base, 0);
		cuptrace_log_set(prev);
	}
	/* "TMP: what" -> "what" */
	const char *what = said;
	size_t tl = strlen(l->tmp);
	if (!strncmp(what, l->tmp, tl) && what[tl] == ':')
		what += tl + 1 + (what[tl + 1] == ' ');
	if (cs.events) {
		char n[64] = "";
		if (size <= BIG)
			snprintf(n, sizeof(n), " (%llu events readable)",
			         (unsigned long long)cs.events);
		if (rename(l->tmp, l->target)) {
			fprintf(
			    stderr,
			    "cuptrace record: pid %d did not finish its trace, and it cannot go in "
			    "place as %s (%s): it is %s\n",
			    l->pid, l->target, strerror(errno), l->tmp);
		} else {
			fprintf(stderr,
			        "cuptrace record: pid %d did not finish its trace (killed, or "
			        "crashed): %s holds it as far as it was written%s%s%s\n",
			        l->pid, l->target, n, what[0] ? ": " : "", what);
		}
	} else if (r && size > 0) {
		/* Not a trace the readers know: kept for whoever looks, the name untouched. */
		fprintf(
		    stderr,
		    "cuptrace record: pid %d did not finish its trace, and what it wrote cannot be "
		    "read (%s): left as %s; %s is as it was\n",
		    l->pid, what[0] ? what : strerror(-r), l->tmp, l->target);
	} else {
		unlink(l->tmp);
		if (old)
			fprintf(stderr,
			        "cuptrace record: pid %d ended before its trace recorded anything "
			        "(killed, or crashed): %s, from before, is kept as it was\n",
			        l->pid, l->target);
		else
			fprintf(stderr,
			        "cuptrace record: pid %d ended before its trace recorded anything "
			        "(killed, or crashed): no trace written to %s\n",
			        l->pid, l->target);
	}
	unlink(l->note);
}

int record_leftovers(const char *run_dir)
{
	if (!run_dir || !run_dir[0])
		return 0;
	return cuptrace_recfile_leftovers(run_dir, settle, NULL);
}
