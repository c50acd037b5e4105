/* The list of trivial runtime calls (see runtime_filter.h) and the rule that keeps a few. */
#include "convert/runtime_filter.h"

#include "convert/convert.h"

#include <pthread.h>
#include <string.h>

/* Chosen from real runs (README "Runtime calls left out" has the counts): each of these was
 * made thousands of times by PyTorch, CuPy or JAX and neither launches nor waits for work. */
const char *const cuptrace_runtime_trivial_names[] = {
    "cudaGetDevice",
    "cudaSetDevice",
    "cudaGetLastError",
    "cudaPeekAtLastError",
    "cudaGetDeviceCount",
    "cudaDeviceGetAttribute",
    "cudaGetDeviceProperties",
    "cudaStreamIsCapturing",
    "cudaStreamGetCaptureInfo",
    "cudaThreadExchangeStreamCaptureMode",
    "cudaPointerGetAttributes",
    "cudaDriverGetVersion",
    "cudaRuntimeGetVersion",
    "cudaFuncGetAttributes",
    "cudaGetFuncBySymbol",
    "cudaGetDriverEntryPoint",
    "cudaGetDriverEntryPointByVersion",
    "cudaDeviceGetStreamPriorityRange",
    "cudaGetErrorString",
    "cudaOccupancyMaxActiveClusters",
    "cudaOccupancyMaxActiveBlocksPerMultiprocessor",
    "cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags",
    NULL,
};

extern const char *const cuptrace_runtime_cbid_names[];
extern const unsigned cuptrace_runtime_cbid_names_len;

#define MAX_CBID 4096
static uint8_t trivial_bits[MAX_CBID / 8], setdev_bits[MAX_CBID / 8];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void build(void)
{
	unsigned len =
	    cuptrace_runtime_cbid_names_len < MAX_CBID ? cuptrace_runtime_cbid_names_len : MAX_CBID;
	for (unsigned id = 0; id < len; id++) {
		if (!cuptrace_runtime_cbid_names[id])
			continue;
		/* "cudaStreamIsCapturing_ptsz_v10000" -> "cudaStreamIsCapturing". */
		char buf[128];
		const char *n =
		    cuptrace_api_name(CUPTI_ACTIVITY_KIND_RUNTIME, id, buf, sizeof(buf));
		size_t bl = strlen(n);
		if (bl > 5 && (!strcmp(n + bl - 5, "_ptsz") || !strcmp(n + bl - 5, "_ptds")))
			bl -= 5;
		for (size_t k = 0; cuptrace_runtime_trivial_names[k]; k++) {
			const char *t = cuptrace_runtime_trivial_names[k];
			if (strlen(t) == bl && !strncmp(n, t, bl)) {
				trivial_bits[id / 8] |= (uint8_t)(1u << (id % 8));
				if (!strcmp(t, "cudaSetDevice"))
					setdev_bits[id / 8] |= (uint8_t)(1u << (id % 8));
			}
		}
	}
}

static int bit(const uint8_t *bits, uint32_t cbid)
{
	pthread_once(&once, build);
	return cbid < MAX_CBID && (bits[cbid / 8] & (1u << (cbid % 8)));
}

int cuptrace_runtime_cbid_is_trivial(uint32_t cbid)
{
	return bit(trivial_bits, cbid);
}

int cuptrace_runtime_cbid_is_set_device(uint32_t cbid)
{
	return bit(setdev_bits, cbid);
}

size_t cuptrace_runtime_trivial_cbids(uint32_t *out, size_t max)
{
	size_t n = 0;
	for (uint32_t id = 0; id < MAX_CBID && n < max; id++)
		if (cuptrace_runtime_cbid_is_trivial(id))
			out[n++] = id;
	return n;
}

int cuptrace_runtime_keep(uint32_t cbid, int32_t ret, uint64_t dur_ns)
{
	return !cuptrace_runtime_cbid_is_trivial(cbid) || ret != 0 ||
	       dur_ns >= CUPTRACE_RUNTIME_SLOW_NS || cuptrace_runtime_cbid_is_set_device(cbid);
}
