/* Runtime and driver API records: which are left out, their names, the thread track they go
 * on. What the call is linked to (flows to its GPU work, syncs) is convert_corr.c's. */
#include "convert/conv_state.h"
#include "convert/runtime_filter.h"

#include <errno.h>
#include <stdlib.h>

/* API records left out of the trace, each counted: the runtime's own driver calls (device
 * queries, kernel lookups) unless driver_all, and trivial runtime calls (runtime_filter.h)
 * unless runtime_all. Filters of API records belong here: nothing is interned or declared for
 * a record dropped at this point. */
static int api_filtered(struct cuptrace_converter *c, const CUpti_ActivityAPI *a, int driver,
                        int8_t expect)
{
	if (driver && !c->opts.driver_all && expect == 0 && a->cbid < 8192 &&
	    (c->driver_noise[a->cbid / 8] & (1u << (a->cbid % 8)))) {
		c->counts.driver_filtered++;
		return 1;
	}
	if (!driver && !c->opts.runtime_all && a->kind == CUPTI_ACTIVITY_KIND_RUNTIME &&
	    !cuptrace_runtime_keep(a->cbid, (int32_t)a->returnValue, a->end - a->start)) {
		c->counts.runtime_filtered++;
		return 1;
	}
	return 0;
}

int conv_api_record(struct cuptrace_converter *c, const CUpti_ActivityAPI *a)
{
	int driver = a->kind == CUPTI_ACTIVITY_KIND_DRIVER;
	if (driver)
		c->counts.driver++;
	else
		c->counts.runtime++;
	int8_t expect = 0;
	if (a->kind == CUPTI_ACTIVITY_KIND_INTERNAL_LAUNCH_API)
		expect = 1;
	else if (driver && a->cbid < cuptrace_driver_cbid_names_len)
		expect = c->driver_expect[a->cbid];
	else if (!driver && a->cbid < cuptrace_runtime_cbid_names_len)
		expect = c->runtime_expect[a->cbid];
	if (api_filtered(c, a, driver, expect))
		return 0;
	if (!conv_span_ok(a->start, a->end))
		return 0;
	/* Names are per (domain, cbid): looked up and interned once. */
	uint32_t *cache = driver ? c->driver_name_ids : c->runtime_name_ids;
	uint32_t cache_len =
	    driver ? cuptrace_driver_cbid_names_len : cuptrace_runtime_cbid_names_len;
	uint32_t name_id = a->kind != CUPTI_ACTIVITY_KIND_INTERNAL_LAUNCH_API && a->cbid < cache_len
	                       ? cache[a->cbid]
	                       : 0;
	if (!name_id) {
		char buf[128];
		name_id = conv_intern(c, cuptrace_api_name(a->kind, a->cbid, buf, sizeof(buf)));
		if (a->kind != CUPTI_ACTIVITY_KIND_INTERNAL_LAUNCH_API && a->cbid < cache_len)
			cache[a->cbid] = name_id;
	}
	uint64_t track = conv_thread_track(c, (int64_t)a->threadId);
	struct api_call call = {
	    .corr = a->correlationId,
	    .expect = expect,
	    .track = track,
	    .ts = conv_rel(c, a->start),
	    .dur = (int64_t)(a->end - a->start),
	    .name_id = name_id,
	    .cat_id = driver ? c->cat_driver : c->cat_runtime,
	    .ret = (int32_t)a->returnValue,
	};
	if (call.ts + call.dur > c->latest_ts)
		c->latest_ts = call.ts + call.dur;
	return conv_corr_api(c, &call);
}

int conv_api_init(struct cuptrace_converter *c)
{
	c->runtime_name_ids = calloc(cuptrace_runtime_cbid_names_len + 1, sizeof(uint32_t));
	c->driver_name_ids = calloc(cuptrace_driver_cbid_names_len + 1, sizeof(uint32_t));
	c->runtime_expect =
	    conv_expect_table(cuptrace_runtime_cbid_names, cuptrace_runtime_cbid_names_len);
	c->driver_expect =
	    conv_expect_table(cuptrace_driver_cbid_names, cuptrace_driver_cbid_names_len);
	if (!c->runtime_expect || !c->driver_expect || !c->runtime_name_ids || !c->driver_name_ids)
		return -ENOMEM;
	c->cat_runtime = conv_intern(c, "cuda_runtime");
	c->cat_driver = conv_intern(c, "cuda_driver");
	uint32_t noise[64];
	size_t nn = cuptrace_driver_noise_cbids(noise, 64);
	for (size_t i = 0; i < nn; i++)
		if (noise[i] < 8192)
			c->driver_noise[noise[i] / 8] |= (uint8_t)(1u << (noise[i] % 8));
	return 0;
}

void conv_api_free(struct cuptrace_converter *c)
{
	free(c->runtime_expect);
	free(c->runtime_name_ids);
	free(c->driver_name_ids);
	free(c->driver_expect);
}
