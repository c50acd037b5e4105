/* The benchmark's floor: a minimal CUPTI client, injected like cuptrace, that enables the same
 * activity kinds with the same settings and throws every buffer away. What cuptrace costs beyond
 * this is cuptrace's own overhead (README "Overhead"). */
#include <cupti.h>
#include <stdlib.h>
#include <time.h>

#include "collect/kinds.h"


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

static void at_exit(void)
{
	cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

__attribute__((visibility("default"))) int InitializeInjection(void)
{
	cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
	cuptiActivityRegisterTimestampCallback(boottime);
	uint8_t one = 1;
	size_t n = 1;
	cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &n, &one);
	cuptiActivityRegisterCallbacks(req, done);
	for (size_t i = 0; i < CUPTRACE_NKINDS; i++)
		cuptiActivityEnable(cuptrace_kinds[i]);
	atexit(at_exit);
	return 1;
}
