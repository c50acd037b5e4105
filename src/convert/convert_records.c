/* What cuptrace knows about CUPTI's records and API ids, apart from any converter state: record
 * sizes and string fields, API names, which API calls make GPU work, the runtime's own driver
 * calls, and display names of copy, memory and synchronization kinds. */
#define _GNU_SOURCE
#include "convert/conv_state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Driver calls the runtime makes on its own; see cuptrace_driver_noise_cbids(). */
static const char *const driver_noise[] = {
    "cuModuleGetLoadingMode",
    "cuDeviceGetAttribute",
    "cuDeviceTotalMem_v2",
    "cuDeviceGetUuid",
    "cuDeviceGetUuid_v2",
    "cuLibraryGetKernel",
    "cuKernelGetName",
    "cuKernelGetAttribute",
    "cuKernelGetFunction",
    "cuKernelGetLibrary",
    "cuLibraryLoadData",
    "cuLibraryGetModule",
    "cuLibraryUnload",
    "cuCtxGetCurrent",
    "cuDevicePrimaryCtxGetState",
    "cuGetProcAddress",
    "cuGetProcAddress_v2",
    "cuGetExportTable",
    "cuDriverGetVersion",
    "cuDevicePrimaryCtxRetain",
    "cuDevicePrimaryCtxRelease_v2",
    "cuCtxGetDevice",
    "cuDeviceGetProperties",
    "cuDeviceComputeCapability",
    "cuDeviceGetLuid",
    "cuCtxGetStreamPriorityRange",
    "cuDeviceGetDefaultMemPool",
    "cuDeviceGetMemPool",
    "cuFuncGetAttribute",
    "cuFuncGetName",
    "cuPointerGetAttribute",
    "cuPointerGetAttributes",
    "cuCtxGetFlags",
    "cuCtxGetId",
    "cuStreamGetCtx",
    "cuStreamGetId",
    "cuModuleGetFunction_internal",
    /* Made by frameworks themselves, by the thousand, and as trivial as the runtime calls in
     * runtime_filter.c: JAX sets the current context around every call (2,202 times for 300
     * steps of a jitted function), CuPy and PyTorch ask occupancy and error strings. */
    "cuCtxSetCurrent",
    "cuGetErrorString",
    "cuGetErrorName",
    "cuOccupancyMaxActiveClusters",
};

static int cbid_index(const char *const *names, unsigned len, const char *name)
{
	for (unsigned i = 0; i < len; i++)
		if (names[i] && !strcmp(names[i], name))
			return (int)i;
	return -1;
}

size_t cuptrace_driver_noise_cbids(uint32_t *out, size_t max)
{
	size_t n = 0;
	for (size_t i = 0; i < sizeof(driver_noise) / sizeof(driver_noise[0]) && n < max; i++) {
		int id = cbid_index(cuptrace_driver_cbid_names, cuptrace_driver_cbid_names_len,
		                    driver_noise[i]);
		if (id >= 0)
			out[n++] = (uint32_t)id;
	}
	return n;
}

int cuptrace_driver_cbid_is_noise(uint32_t cbid)
{
	if (cbid >= cuptrace_driver_cbid_names_len || !cuptrace_driver_cbid_names[cbid])
		return 0;
	for (size_t i = 0; i < sizeof(driver_noise) / sizeof(driver_noise[0]); i++)
		if (!strcmp(cuptrace_driver_cbid_names[cbid], driver_noise[i]))
			return 1;
	return 0;
}

/* GPU records an API call produces: 1 for launches, copies and memsets, -1 (unknown) for graph
 * launches, 0 otherwise. Derived from the names so new cbids are covered. */
static int8_t expect_from_name(const char *n)
{
	if (!n)
		return 0;
	/* A peer copy without peer access is staged: two records (one per GPU). */
	if (strstr(n, "GraphLaunch") || strstr(n, "MultiDevice") || strstr(n, "Peer"))
		return -1;
	if (strstr(n, "LaunchHostFunc"))
		return 0;
	if (strstr(n, "Launch") && !strstr(n, "GetAttribute") && !strstr(n, "Occupancy"))
		return 1;
	if (!strncmp(n, "cudaMemcpy", 10) || !strncmp(n, "cuMemcpy", 8))
		return strstr(n, "Batch") ? -1 : 1;
	if (!strncmp(n, "cudaMemset", 10) || !strncmp(n, "cuMemset", 8))
		return 1;
	return 0;
}

/* Driver calls recorded by default (--driver work; --driver user brings back the rest). On
 * PyTorch the driver records of context, getter and function calls that the framework and NCCL
 * make themselves (cuCtxPushCurrent, cuStreamGetCaptureInfo, cuFuncSetAttribute, ...) cost as
 * much as every runtime record (tools/bench/README.md, "Where CUPTI's time goes": 64 us a DDP
 * step, 303 us a transformer step) and do no GPU work. Kept: every call that a kernel, copy,
 * memset, graph, memory, memory pool, CUDA event, stream or synchronization record can name by
 * its correlation id, so that GPU work keeps its arrow to the call that made it, and the calls
 * that wait for the GPU, which the analyses read as blocking. A name matches when it starts
 * with an entry ("cuMemcpy" takes cuMemcpyHtoDAsync_v2 and cuMemcpyPeer); whatever
 * expect_from_name says makes GPU work is kept too, whatever its name. */
static const char *const driver_work[] = {
    /* GPU work: kernels, graphs, host functions, copies, memsets, stream memory operations */
    "cuLaunch",
    "cuGraphLaunch",
    "cuGraphUpload",
    "cuStreamAddCallback",
    "cuMemcpy",
    "cuMemset",
    "cuStreamWaitValue",
    "cuStreamWriteValue",
    "cuStreamBatchMemOp",
    "cuMemPrefetch",
    "cuSignalExternalSemaphores",
    "cuWaitExternalSemaphores",
    /* memory records (MEMORY2, MEMORY_POOL) name their allocation, free, mapping or pool call */
    "cuMemAlloc",
    "cuMemFree",
    "cuMemHostAlloc",
    "cuMemHostRegister",
    "cuMemHostUnregister",
    "cuMemCreate",
    "cuMemRelease",
    "cuMemMap",
    "cuMemUnmap",
    "cuMemSetAccess", /* NCCL's buffers: the memory record names it (2x H200 DDP capture) */
    "cuMemPoolCreate",
    "cuMemPoolDestroy",
    "cuMemPoolTrimTo",
    /* CUDA event records name their cuEventRecord; synchronizations, their wait or query */
    "cuEventRecord",
    "cuEventSynchronize",
    "cuEventQuery",
    "cuStreamWaitEvent",
    "cuStreamSynchronize",
    "cuStreamQuery",
    "cuCtxSynchronize",
    "cuCtxWaitEvent",
    "cuGreenCtxWaitEvent",
    /* stream records name the call that made the stream */
    "cuStreamCreate",
    /* module loads (lazy loading's overhead records; a load can take milliseconds) */
    "cuModuleLoad",
    "cuLibraryLoad",
};

int cuptrace_driver_cbid_is_work(uint32_t cbid)
{
	if (cbid >= cuptrace_driver_cbid_names_len || !cuptrace_driver_cbid_names[cbid])
		return 0;
	const char *n = cuptrace_driver_cbid_names[cbid];
	if (expect_from_name(n) != 0)
		return 1;
	for (size_t i = 0; i < sizeof(driver_work) / sizeof(driver_work[0]); i++)
		if (!strncmp(n, driver_work[i], strlen(driver_work[i])))
			return 1;
	return 0;
}

int8_t *conv_expect_table(const char *const *names, unsigned len)
{
	int8_t *t = calloc(len ? len : 1, 1);
	if (t)
		for (unsigned i = 0; i < len; i++)
			t[i] = expect_from_name(names[i]);
	return t;
}

size_t cuptrace_record_min_size(CUpti_ActivityKind kind)
{
	switch (kind) {
	case CUPTI_ACTIVITY_KIND_RUNTIME:
	case CUPTI_ACTIVITY_KIND_DRIVER:
	case CUPTI_ACTIVITY_KIND_INTERNAL_LAUNCH_API:
		return sizeof(CUpti_ActivityAPI);
	case CUPTI_ACTIVITY_KIND_KERNEL:
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
		return sizeof(CUpti_ActivityKernel10);
	case CUPTI_ACTIVITY_KIND_MEMCPY:
		return sizeof(CUpti_ActivityMemcpy6);
	case CUPTI_ACTIVITY_KIND_MEMCPY2:
		return sizeof(CUpti_ActivityMemcpyPtoP4);
	case CUPTI_ACTIVITY_KIND_MEMSET:
		return sizeof(CUpti_ActivityMemset4);
	case CUPTI_ACTIVITY_KIND_GRAPH_TRACE:
		return sizeof(CUpti_ActivityGraphTrace2);
	case CUPTI_ACTIVITY_KIND_DEVICE_GRAPH_TRACE:
		return sizeof(CUpti_ActivityDeviceGraphTrace);
	case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
		return sizeof(CUpti_ActivitySynchronization2);
	case CUPTI_ACTIVITY_KIND_DEVICE:
		return sizeof(CUpti_ActivityDevice5);
	case CUPTI_ACTIVITY_KIND_CONTEXT:
		return sizeof(CUpti_ActivityContext3);
	case CUPTI_ACTIVITY_KIND_NAME:
		return sizeof(CUpti_ActivityName);
	case CUPTI_ACTIVITY_KIND_MARKER:
		return sizeof(CUpti_ActivityMarker2);
	case CUPTI_ACTIVITY_KIND_MARKER_DATA:
		return sizeof(CUpti_ActivityMarkerData2);
	case CUPTI_ACTIVITY_KIND_MEMORY2:
		return sizeof(CUpti_ActivityMemory4);
	case CUPTI_ACTIVITY_KIND_MEMORY_POOL:
		return sizeof(CUpti_ActivityMemoryPool3);
	case CUPTI_ACTIVITY_KIND_OVERHEAD:
		return sizeof(CUpti_ActivityOverhead3);
	case CUPTI_ACTIVITY_KIND_STREAM:
		return sizeof(CUpti_ActivityStream);
	default:
		return 0;
	}
}

size_t cuptrace_record_strings(const CUpti_Activity *r, const char *const **f)
{
	switch (r->kind) {
	case CUPTI_ACTIVITY_KIND_KERNEL:
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
		f[0] = &((const CUpti_ActivityKernel10 *)r)->name;
		return 1;
	case CUPTI_ACTIVITY_KIND_MARKER:
		f[0] = &((const CUpti_ActivityMarker2 *)r)->name;
		f[1] = &((const CUpti_ActivityMarker2 *)r)->domain;
		return 2;
	case CUPTI_ACTIVITY_KIND_NAME:
		f[0] = &((const CUpti_ActivityName *)r)->name;
		return 1;
	case CUPTI_ACTIVITY_KIND_DEVICE:
		f[0] = &((const CUpti_ActivityDevice5 *)r)->name;
		return 1;
	case CUPTI_ACTIVITY_KIND_MEMORY2:
		f[0] = &((const CUpti_ActivityMemory4 *)r)->name;
		return 1;
	default:
		return 0;
	}
}

const char *cuptrace_api_name(CUpti_ActivityKind kind, uint32_t cbid, char *buf, size_t n)
{
	const char *const *names = kind == CUPTI_ACTIVITY_KIND_DRIVER ? cuptrace_driver_cbid_names
	                                                              : cuptrace_runtime_cbid_names;
	unsigned len = kind == CUPTI_ACTIVITY_KIND_DRIVER ? cuptrace_driver_cbid_names_len
	                                                  : cuptrace_runtime_cbid_names_len;
	if (kind == CUPTI_ACTIVITY_KIND_INTERNAL_LAUNCH_API)
		return "CUDA internal launch";
	const char *s = cbid < len ? names[cbid] : NULL;
	if (!s) {
		snprintf(buf, n, "%s API %u",
		         kind == CUPTI_ACTIVITY_KIND_DRIVER ? "driver" : "runtime", cbid);
		return buf;
	}
	/* Strip CUPTI's version suffix: cudaMalloc_v3020 -> cudaMalloc. */
	snprintf(buf, n, "%s", s);
	char *v = strrchr(buf, '_');
	if (v && v[1] == 'v' && v[2] >= '0' && v[2] <= '9') {
		char *p = v + 2;
		while (*p >= '0' && *p <= '9')
			p++;
		if (!*p)
			*v = 0;
	}
	return buf;
}

const char *conv_copy_kind_name(uint8_t k)
{
	static const char *const n[] = {"Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
	                                "AtoD",    "DtoA", "DtoD", "HtoH", "PtoP"};
	return k < sizeof(n) / sizeof(n[0]) ? n[k] : "Unknown";
}

const char *conv_mem_kind_name(uint8_t k)
{
	static const char *const n[] = {"Unknown", "Pageable", "Pinned",        "Device",
	                                "Array",   "Managed",  "Device Static", "Managed Static"};
	return k < sizeof(n) / sizeof(n[0]) ? n[k] : "Unknown";
}

const char *conv_sync_name(uint32_t t)
{
	switch (t) {
	case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE:
		return "Wait: event";
	case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT:
		return "Wait: stream waits for event";
	case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE:
		return "Wait: stream";
	case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE:
		return "Wait: device";
	default:
		return "Wait";
	}
}
