/* The one place where stats, diff and merge read a trace file: every reader cuptrace has (a raw
 * capture through the converter, a Perfetto trace through its reader) replays into any sink. */
#include "cmd.h"
#include "convert/convert.h"

int cmd_replay(const char *path, struct cuptrace_sink *sink)
{
	return cuptrace_replay_file(path, sink, 0);
}

int cmd_replay_cb(void *ctx, const char *path, struct cuptrace_sink *sink)
{
	(void)ctx;
	return cmd_replay(path, sink);
}
