/* The one place where stats, diff and merge read a trace file: every reader cuptrace has (a raw
 * capture through the converter, a Perfetto trace, a Chrome or torch.profiler JSON) replays
 * into any sink (read/read.h picks the reader from the file's content). */
#include "cmd.h"
#include "read/read.h"

int cmd_replay(const char *path, struct cuptrace_sink *sink)
{
	return cuptrace_read_trace(path, sink, 0);
}

int cmd_replay_cb(void *ctx, const char *path, struct cuptrace_sink *sink)
{
	(void)ctx;
	return cmd_replay(path, sink);
}
