/* The benchmark's floor: a minimal CUPTI client, injected like cuptrace, that enables the same
 * activity kinds with the same settings and throws every buffer away. What cuptrace costs beyond
 * this is cuptrace's own overhead (README "Overhead"). The same API calls are switched off at
 * the source as in cuptrace's default (the runtime's own driver calls, trivial runtime calls);
 * CUPTRACE_RUNTIME=all and CUPTRACE_DRIVER=all keep them, as they do for cuptrace. */
#include <cupti.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collect/kinds.h"
#include "convert/convert.h"
#include "convert/runtime_filter.h"


static void CUPTIAPI req(uint8_t **b, size_t *sz, size_t *max)
{
	*sz = 4u << 20;
	*b = calloc(1, *sz);
	*max = 0;
}

static void CUPTIAPI done(CUcontext c, uint32_t s, uint8_t *b, size_t sz, size_t valid)
{
	free(b);
}

static uint64_t CUPTIAPI boottime(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void CUPTIAPI no_callback(void *ud, CUpti_CallbackDomain d, CUpti_CallbackId id,
                                 const void *data)
{
}

static void at_exit(void)
{
	cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

__attribute__((visibility("default"))) int InitializeInjection(void)
{
	/* Subscribed like cuptrace (which claims CUPTI's one subscriber slot), no callback on. */
	CUpti_SubscriberHandle sub;
	cuptiSubscribe(&sub, no_callback, NULL);
	cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
	cuptiActivityRegisterTimestampCallback(boottime);
	uint8_t one = 1;
	size_t sz = 1;
	cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &sz, &one);
	cuptiActivityRegisterCallbacks(req, done);
	for (size_t i = 0; i < CUPTRACE_NKINDS; i++)
		cuptiActivityEnable(cuptrace_kinds[i]);
	uint32_t ids[256];
	const char *drv = getenv("CUPTRACE_DRIVER"), *rt = getenv("CUPTRACE_RUNTIME");
	size_t n = drv && !strcmp(drv, "all") ? 0 : cuptrace_driver_noise_cbids(ids, 256);
	for (size_t i = 0; i < n; i++)
		cuptiActivityEnableDriverApi(ids[i], 0);
	n = rt && !strcmp(rt, "all") ? 0 : cuptrace_runtime_trivial_cbids(ids, 256);
	for (size_t i = 0; i < n; i++)
		cuptiActivityEnableRuntimeApi(ids[i], 0);
	atexit(at_exit);
	return 1;
}
