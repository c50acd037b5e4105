/* The benchmark's floor: a minimal CUPTI client, injected like cuptrace, that enables the same
 * activity kinds with the same settings and throws every buffer away. What cuptrace costs beyond
 * this is cuptrace's own overhead (README "Overhead"). */
#include <cupti.h>
#include <stdlib.h>
#include <time.h>

static const CUpti_ActivityKind kinds[] = {
    CUPTI_ACTIVITY_KIND_DEVICE,
    CUPTI_ACTIVITY_KIND_CONTEXT,
    CUPTI_ACTIVITY_KIND_RUNTIME,
    CUPTI_ACTIVITY_KIND_DRIVER,
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
    CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMCPY2,
    CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
    CUPTI_ACTIVITY_KIND_STREAM,
    CUPTI_ACTIVITY_KIND_NAME,
    CUPTI_ACTIVITY_KIND_MARKER,
    CUPTI_ACTIVITY_KIND_MARKER_DATA,
    CUPTI_ACTIVITY_KIND_MEMORY2,
    CUPTI_ACTIVITY_KIND_MEMORY_POOL,
    CUPTI_ACTIVITY_KIND_OVERHEAD,
    CUPTI_ACTIVITY_KIND_CUDA_EVENT,
};

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
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		cuptiActivityEnable(kinds[i]);
	atexit(at_exit);
	return 1;
}
