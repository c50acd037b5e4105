/* libFuzzer targets for the readers of untrusted input. Built three times from this file (see
 * tools/scripts/fuzz.sh): FUZZ_CAPTURE feeds the bytes to the capture reader and the converter
 * behind it (as `cuptrace convert x.cupti` does); FUZZ_JSON to the JSON reader (cuptrace's and
 * torch.profiler's Chrome JSON, plain or gzip, as `cuptrace stats x.json` does); otherwise to
 * the Perfetto reader (as `cuptrace stats x.pftrace` does). All replay into the stats sink, so
 * what a reader lets through is also aggregated, through the --group-by line sink, so every call
 * stack a reader decodes is walked and its frames' strings read. A crash, hang, leak or sanitizer
 * report is a finding; error returns are fine. */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "lines/lines.h"
#include "stats/stats.h"
#include "format/formats.h"
#include "read/read.h"

static void quiet(enum cuptrace_log_level level, const char *msg)
{
	(void)level;
	(void)msg;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int init;
	if (!init) {
		cuptrace_log_set(quiet);
		init = 1;
	}
	struct cuptrace_stats st;
	memset(&st, 0, sizeof(st));
	struct cuptrace_lines ln;
	struct cuptrace_sink *sink = cuptrace_stats_sink_new(&st);
	if (!sink || !(sink = cuptrace_lines_sink_new(&ln, NULL, sink)))
		return 0;
	int r;
#ifdef FUZZ_CAPTURE
	/* The capture reader takes a path: a per-process file in /dev/shm (memory). */
	static char path[64];
	if (!path[0])
		snprintf(path, sizeof(path), "/dev/shm/cuptrace-fuzz-%d.cupti", (int)getpid());
	FILE *f = fopen(path, "wb");
	if (!f) {
		cuptrace_sink_destroy(sink);
		return 0;
	}
	if (size)
		fwrite(data, 1, size, f);
	fclose(f);
	r = cuptrace_read_trace(path, sink, CUPTRACE_READ_RUNTIME_ALL);
#elif defined(FUZZ_JSON)
	r = cuptrace_json_read_mem(data, size, "fuzz.json", sink, NULL);
#else
	r = cuptrace_perfetto_read_mem(data, size, sink, NULL);
#endif
	if (!r)
		sink->ops->finish(sink);
	cuptrace_sink_destroy(sink);
	cuptrace_stats_free(&st);
	cuptrace_lines_free(&ln);
	return 0;
}
