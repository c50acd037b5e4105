/* See api_enable.h. */
#include "inject/api_enable.h"

#include <cupti.h>

#include "common/options.h"
#include "convert/convert.h"
#include "convert/runtime_filter.h"

extern const char *const cuptrace_runtime_cbid_names[];
extern const unsigned cuptrace_runtime_cbid_names_len;
extern const char *const cuptrace_driver_cbid_names[];
extern const unsigned cuptrace_driver_cbid_names_len;

/* Is driver call id recorded under driver_mode? */
static int driver_kept(uint32_t id, int driver_mode)
{
	if (driver_mode == CUPTRACE_DRIVER_ALL)
		return 1;
	if (cuptrace_driver_cbid_is_noise(id))
		return 0;
	return driver_mode == CUPTRACE_DRIVER_USER || cuptrace_driver_cbid_is_work(id);
}

int cuptrace_enable_api(int driver_mode, int runtime_all, int by_cbid)
{
	CUptiResult r, first = CUPTI_SUCCESS;
	if (by_cbid) {
		for (uint32_t id = 1; id < cuptrace_runtime_cbid_names_len; id++)
			if (cuptrace_runtime_cbid_names[id] &&
			    (runtime_all || !cuptrace_runtime_cbid_is_trivial(id)) &&
			    (r = cuptiActivityEnableRuntimeApi(id, 1)) != CUPTI_SUCCESS && !first)
				first = r;
		for (uint32_t id = 1; id < cuptrace_driver_cbid_names_len; id++)
			if (cuptrace_driver_cbid_names[id] && driver_kept(id, driver_mode) &&
			    (r = cuptiActivityEnableDriverApi(id, 1)) != CUPTI_SUCCESS && !first)
				first = r;
		return -(int)first;
	}
	if ((r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME)) != CUPTI_SUCCESS)
		first = r;
	if ((r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER)) != CUPTI_SUCCESS && !first)
		first = r;
	/* Per-call settings after the kinds: enabling a kind again resets them. Once per start
	 * or window: a few hundred calls into CUPTI, none at run time. */
	for (uint32_t id = 1; id < cuptrace_driver_cbid_names_len; id++)
		if (cuptrace_driver_cbid_names[id] && !driver_kept(id, driver_mode))
			cuptiActivityEnableDriverApi(id, 0);
	uint32_t ids[256];
	size_t n = runtime_all ? 0 : cuptrace_runtime_trivial_cbids(ids, 256);
	for (size_t i = 0; i < n; i++)
		cuptiActivityEnableRuntimeApi(ids[i], 0);
	return -(int)first;
}

void cuptrace_disable_api(int by_cbid)
{
	cuptiActivityDisable(CUPTI_ACTIVITY_KIND_RUNTIME);
	cuptiActivityDisable(CUPTI_ACTIVITY_KIND_DRIVER);
	if (!by_cbid)
		return;
	/* The kinds were never on: each call was, and stays so until switched off by itself. */
	for (uint32_t id = 1; id < cuptrace_runtime_cbid_names_len; id++)
		if (cuptrace_runtime_cbid_names[id])
			cuptiActivityEnableRuntimeApi(id, 0);
	for (uint32_t id = 1; id < cuptrace_driver_cbid_names_len; id++)
		if (cuptrace_driver_cbid_names[id])
			cuptiActivityEnableDriverApi(id, 0);
}

void cuptrace_enable_profiler_callbacks(void *sub)
{
	CUpti_SubscriberHandle h = sub;
	cuptiEnableCallback(1, h, CUPTI_CB_DOMAIN_RUNTIME_API,
	                    CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000);
	cuptiEnableCallback(1, h, CUPTI_CB_DOMAIN_RUNTIME_API,
	                    CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000);
	cuptiEnableCallback(1, h, CUPTI_CB_DOMAIN_DRIVER_API,
	                    CUPTI_DRIVER_TRACE_CBID_cuProfilerStart);
	cuptiEnableCallback(1, h, CUPTI_CB_DOMAIN_DRIVER_API,
	                    CUPTI_DRIVER_TRACE_CBID_cuProfilerStop);
}
