/* GPU idle by cause, the definitions analyze and top share (idle_cause.h). */
#define _GNU_SOURCE /* strcasestr */
#include "stats/idle_cause.h"

#include <string.h>

#include "format/event.h"

const char *const cuptrace_idle_cause_names[CUPTRACE_IDLE_NCAUSES] = {
    "host_wait", "launch_latency", "other_stream", "host_sync", "other"};

static int has(const char *s, const char *sub)
{
	return s && strcasestr(s, sub) != NULL;
}

static int starts(const char *s, const char *p)
{
	return s && !strncmp(s, p, strlen(p));
}

int cuptrace_host_class(const char *cat, const char *name)
{
	if (cat && (!strcmp(cat, "python_function") || !strcmp(cat, CUPTRACE_META_CATEGORY)))
		return -1;
	if (!(has(cat, "runtime") || has(cat, "driver") || has(cat, "cuda_api")))
		return CUPTRACE_HOST_RANGE;
	if (has(name, "Synchronize"))
		return CUPTRACE_HOST_SYNC;
	if ((starts(name, "cudaMemcpy") || starts(name, "cudaMemset") || starts(name, "cuMemcpy") ||
	     starts(name, "cuMemsetD")) &&
	    !has(name, "Async"))
		return CUPTRACE_HOST_COPY_SYNC;
	if ((starts(name, "cudaMalloc") || starts(name, "cudaFree") || starts(name, "cuMemAlloc") ||
	     starts(name, "cuMemFree") || starts(name, "cudaHostAlloc") ||
	     starts(name, "cuMemHostAlloc")) &&
	    !has(name, "Async"))
		return CUPTRACE_HOST_ALLOC;
	return CUPTRACE_HOST_API;
}

void cuptrace_idle_split(int64_t g0, int64_t g1, int known, int64_t launch_ts,
                         int (*synced)(const void *ctx, int64_t a, int64_t b), const void *ctx,
                         int64_t other_end, int64_t by[CUPTRACE_IDLE_NCAUSES])
{
	if (!known) {
		by[CUPTRACE_IDLE_OTHER] += g1 - g0;
		return;
	}
	int64_t hend = launch_ts < g0 ? g0 : launch_ts > g1 ? g1 : launch_ts;
	if (hend > g0)
		by[synced(ctx, g0, hend) ? CUPTRACE_IDLE_HOST_SYNC : CUPTRACE_IDLE_HOST_WAIT] +=
		    hend - g0;
	if (g1 > hend)
		by[other_end >= hend ? CUPTRACE_IDLE_OTHER_STREAM : CUPTRACE_IDLE_LAUNCH] +=
		    g1 - hend;
}
