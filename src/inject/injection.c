/* Entry points the outside world calls: the CUDA driver (InitializeInjection, through
 * CUDA_INJECTION64_PATH), the NVTX loader (InitializeInjectionNvtx2, through
 * NVTX_INJECTION64_PATH) and programs linking the library (the cuptrace.h C API). These are the
 * only symbols libcuptrace.so exports. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>

#include "inject/collect.h"
#include "inject/gpumetrics.h"
#include "common/options.h"
#include "common/log.h"
#include "cuptrace.h"

#define EXPORT __attribute__((visibility("default")))

/* Called by the driver inside cuInit, on the thread that triggered it. Returning 1 is what the
 * driver expects on success; a failure is reported once and the program runs on untraced. */
EXPORT int InitializeInjection(void)
{
	int r = cuptrace_collect_start(NULL, 1);
	return r == 0 || r == -EALREADY;
}

/* NVTX loads its tool from NVTX_INJECTION64_PATH; `cuptrace record` points that at this library
 * so NVTX ranges reach CUPTI (which implements the NVTX side) and, for capture windows, the
 * range watcher (nvtx_watch.c). */
EXPORT int InitializeInjectionNvtx2(const void *get_export_table)
{
	return cuptrace_nvtx_inject(get_export_table);
}

/* In a session with capture windows (record --on-demand, --capture-range, ...), start and stop
 * open and close windows through the same machinery as `cuptrace trigger`; the session itself
 * ends with the program. */
EXPORT int cuptrace_start(const char *path)
{
	int r = cuptrace_collect_start(path, 0);
	if (r == -EALREADY) {
		int w = cuptrace_collect_window(1);
		if (w != -EINVAL)
			return w;
	} else if (r == 0 && cuptrace_collect_on_demand()) {
		cuptrace_collect_window(1);
	}
	return r;
}

EXPORT int cuptrace_flush(void)
{
	return cuptrace_collect_flush();
}

EXPORT int cuptrace_stop(void)
{
	int w = cuptrace_collect_window(0);
	if (w != -EINVAL)
		return w;
	return cuptrace_collect_stop();
}

EXPORT int cuptrace_step(void)
{
	cuptrace_collect_step();
	return 0;
}

EXPORT int cuptrace_stacks(int on)
{
	return cuptrace_collect_stacks(on);
}

EXPORT int cuptrace_end(void)
{
	return cuptrace_collect_end();
}

EXPORT int cuptrace_range_push(const char *name)
{
	return name ? cuptrace_collect_range(name) : -EINVAL;
}

EXPORT int cuptrace_range_pop(void)
{
	return cuptrace_collect_range(NULL);
}

/* The settings table (common/options.c) as `record` and the library use it: a caller (the
 * Python package) checks a value before it sets it. */
EXPORT int cuptrace_setting_check(const char *var, const char *value, char *why, size_t n)
{
	char msg[512] = "";
	int r;
	const struct cuptrace_setting *st = var ? cuptrace_setting_by_env(var) : NULL;
	if (!var || !value) {
		snprintf(msg, sizeof(msg), "a variable and a value are needed");
		r = -EINVAL;
	} else if (st) {
		struct cuptrace_setting_value v;
		r = cuptrace_setting_parse(st, value, CUPTRACE_FROM_ENV, &v, msg, sizeof(msg));
	} else {
		snprintf(msg, sizeof(msg), "%s is not a setting of this library", var);
		r = -ENOENT;
	}
	if (why && n)
		snprintf(why, n, "%s", r ? msg : "");
	return r;
}

/* Not part of the C API: `cuptrace record --list-gpu-metrics` loads the library and calls this
 * to print the GPUs' PM sampling metrics (the command itself never loads CUPTI). */
EXPORT int cuptrace_list_gpu_metrics(void)
{
	return cuptrace_gm_list(stdout) ? 1 : 0;
}
