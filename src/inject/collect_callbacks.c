/* CUPTI's subscriber callback (application threads), and the ids of NVTX start/end ranges it
 * collects for the writer thread (see collect_state.h). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <generated_nvtx_meta.h>

#include "inject/api_enable.h"
#include "inject/collect_state.h"
#include "inject/cupti_alarm.h"
#include "inject/gpumetrics.h"
#include "inject/runtime_watch.h"
#include "inject/sync_watch.h"

/* An NVTX start/end range's id, for the writer (s->startend, collect_state.h). */
static void nvtx_callback(struct collect_session *s, const CUpti_NvtxData *nd)
{
	if (!nd->functionReturnValue)
		return;
	uint64_t rid = *(const uint64_t *)nd->functionReturnValue; /* nvtxRangeId_t */
	if (!rid)
		return;
	pthread_mutex_lock(&s->startend.lock);
	if (CUPTRACE_GROW(s->startend.ids, s->startend.cap, s->startend.n + 1) == 0) {
		s->startend.ids[s->startend.n++] = rid;
		s->startend.total++;
	}
	pthread_mutex_unlock(&s->startend.lock);
}

/* ---- what opens and closes capture windows (where nvtx_watch.c's handlers are not in
 * NVTX's table: NVTX_INJECTION64_PATH names another library) ---- */

static const char *attr_name(const nvtxEventAttributes_t *a)
{
	return a && a->messageType == NVTX_MESSAGE_TYPE_ASCII ? a->message.ascii : NULL;
}

static void window_nvtx(struct collect_session *s, CUpti_CallbackId id, const CUpti_NvtxData *nd)
{
	const void *p = nd->functionParams;
	switch (id) {
	case CUPTI_CBID_NVTX_nvtxRangePushA:
		collect_nvtx_pushed(s, p ? ((const nvtxRangePushA_params *)p)->message : NULL);
		break;
	case CUPTI_CBID_NVTX_nvtxRangePushW:
		collect_nvtx_pushed(s, NULL);
		break;
	case CUPTI_CBID_NVTX_nvtxRangePushEx:
		collect_nvtx_pushed(
		    s, p ? attr_name(((const nvtxRangePushEx_params *)p)->eventAttrib) : NULL);
		break;
	case CUPTI_CBID_NVTX_nvtxDomainRangePushEx:
		collect_nvtx_pushed(
		    s, p ? attr_name(((const nvtxDomainRangePushEx_params *)p)->core.eventAttrib)
		         : NULL);
		break;
	case CUPTI_CBID_NVTX_nvtxRangePop:
	case CUPTI_CBID_NVTX_nvtxDomainRangePop:
		collect_nvtx_popped(s);
		break;
	case CUPTI_CBID_NVTX_nvtxRangeStartA:
	case CUPTI_CBID_NVTX_nvtxRangeStartEx:
	case CUPTI_CBID_NVTX_nvtxDomainRangeStartEx: {
		const char *name =
		    !p ? NULL
		    : id == CUPTI_CBID_NVTX_nvtxRangeStartA
		        ? ((const nvtxRangeStartA_params *)p)->message
		    : id == CUPTI_CBID_NVTX_nvtxRangeStartEx
		        ? attr_name(((const nvtxRangeStartEx_params *)p)->eventAttrib)
		        : attr_name(((const nvtxDomainRangeStartEx_params *)p)->core.eventAttrib);
		uint64_t rid =
		    nd->functionReturnValue ? *(const uint64_t *)nd->functionReturnValue : 0;
		collect_nvtx_started(s, name, rid);
		break;
	}
	case CUPTI_CBID_NVTX_nvtxRangeEnd:
		if (p)
			collect_nvtx_ended(s, ((const nvtxRangeEnd_params *)p)->id);
		break;
	case CUPTI_CBID_NVTX_nvtxDomainRangeEnd:
		if (p)
			collect_nvtx_ended(s, ((const nvtxDomainRangeEnd_params *)p)->core.id);
		break;
	default:
		break;
	}
}

static int watch_ranges, watch_profiler;

void collect_callbacks_windows(struct collect_session *s, CUpti_SubscriberHandle sub)
{
	/* nvtx_watch.c follows the ranges where NVTX hands them to this library. */
	watch_ranges =
	    ((s->win.active && s->win.spec.mode == CUPTRACE_WMODE_RANGE) || s->win.step_range[0]) &&
	    !collect_nvtx_ours();
	watch_profiler = s->win.active && s->win.spec.mode == CUPTRACE_WMODE_PROFILER_API;
	if (watch_ranges) {
		static const CUpti_CallbackId ids[] = {
		    CUPTI_CBID_NVTX_nvtxRangePushA,        CUPTI_CBID_NVTX_nvtxRangePushW,
		    CUPTI_CBID_NVTX_nvtxRangePushEx,       CUPTI_CBID_NVTX_nvtxDomainRangePushEx,
		    CUPTI_CBID_NVTX_nvtxRangePop,          CUPTI_CBID_NVTX_nvtxDomainRangePop,
		    CUPTI_CBID_NVTX_nvtxRangeEnd,          CUPTI_CBID_NVTX_nvtxDomainRangeEnd,
		    CUPTI_CBID_NVTX_nvtxRangeStartA,       CUPTI_CBID_NVTX_nvtxRangeStartEx,
		    CUPTI_CBID_NVTX_nvtxDomainRangeStartEx};
		for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
			cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_NVTX, ids[i]);
	}
	if (watch_profiler)
		cuptrace_enable_profiler_callbacks(sub);
}

/* cudaProfilerStart opens on its way out (what follows it is in), cudaProfilerStop closes on
 * its way in (it is not). The runtime's call reaches the driver's too: the second is a no-op. */
static int profiler_call(struct collect_session *s, CUpti_CallbackDomain d, CUpti_CallbackId id,
                         const void *data)
{
	int start, stop;
	if (d == CUPTI_CB_DOMAIN_RUNTIME_API) {
		start = id == CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000;
		stop = id == CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000;
	} else {
		start = id == CUPTI_DRIVER_TRACE_CBID_cuProfilerStart;
		stop = id == CUPTI_DRIVER_TRACE_CBID_cuProfilerStop;
	}
	if (!start && !stop)
		return 0;
	const CUpti_CallbackData *cd = data;
	if (start && cd->callbackSite == CUPTI_API_EXIT)
		collect_window_profiler(s, 1);
	else if (stop && cd->callbackSite == CUPTI_API_ENTER)
		collect_window_profiler(s, 0);
	return 1;
}

/* The first device a context was created on; a context on another one asks for MEMCPY2
 * (kinds.h). Application threads, so the first device is a compare-and-swap. */
static atomic_int first_device = -1;

static void note_context_device(struct collect_session *s, const void *data)
{
	const CUpti_ResourceData *rd = data;
	uint32_t dev = 0;
	if (atomic_load(&s->multi_gpu) || !rd->context ||
	    cuptiGetDeviceId(rd->context, &dev) != CUPTI_SUCCESS)
		return;
	int expected = -1;
	if (atomic_compare_exchange_strong(&first_device, &expected, (int)dev) ||
	    expected == (int)dev)
		return;
	/* The flush thread switches MEMCPY2 on (within a flush period): not here, inside the
	 * driver's context creation, where enabling a kind could wait on the lock the driver
	 * holds. A peer copy before then is still recorded, as a MEMCPY record of kind PtoP. */
	atomic_store(&s->multi_gpu, 1);
}

/* Node by node, CUPTI 13.0 records nothing of a graph launched from the GPU: no launch, no
 * kernel (examples/device_graph on an H200: 20 of 100 kernels, the launchers'). Such a graph
 * must be instantiated with the device-launch flag, which every runtime instantiation passes
 * down to the driver: watching the driver's instantiate calls (rare) tells the summary and
 * the trace's metadata that work is missing. Per graph (GRAPH_TRACE) those launches are
 * recorded, and nothing is watched. */
static const CUpti_CallbackId instantiate_ids[] = {
    CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithFlags,
    CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithParams,
    CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithParams_ptsz};

void collect_callbacks_graphs(struct collect_session *s, CUpti_SubscriberHandle sub)
{
	if (s->graph_trace)
		return;
	for (size_t i = 0; i < sizeof(instantiate_ids) / sizeof(instantiate_ids[0]); i++)
		cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, instantiate_ids[i]);
}

/* The parameters of cuGraphInstantiateWithFlags and cuGraphInstantiateWithParams(_ptsz), laid
 * out as generated_cuda_meta.h's structs (that header needs cuda.h's internal _v1 types). */
struct instantiate_flags_params {
	CUgraphExec *exec;
	CUgraph graph;
	unsigned long long flags;
};
struct instantiate_params_params {
	CUgraphExec *exec;
	CUgraph graph;
	const CUDA_GRAPH_INSTANTIATE_PARAMS *params;
};

/* Returns 1 if the call was one of instantiate_ids. Application threads. */
static int instantiate_call(struct collect_session *s, CUpti_CallbackId id,
                            const CUpti_CallbackData *cd)
{
	unsigned long long flags;
	switch (id) {
	case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithFlags:
		flags = ((const struct instantiate_flags_params *)cd->functionParams)->flags;
		break;
	case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithParams:
	case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithParams_ptsz: {
		const CUDA_GRAPH_INSTANTIATE_PARAMS *ip =
		    ((const struct instantiate_params_params *)cd->functionParams)->params;
		flags = ip ? ip->flags : 0;
		break;
	}
	default:
		return 0;
	}
	/* On the way out, and only if it worked: the graph exists. */
	if (cd->callbackSite == CUPTI_API_EXIT && cd->functionReturnValue &&
	    *(const CUresult *)cd->functionReturnValue == CUDA_SUCCESS &&
	    (flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH))
		atomic_fetch_add(&s->device_launch_graphs, 1);
	return 1;
}

/* The one subscriber callback CUPTI allows (collect.c's trampoline calls this): NVTX start
 * calls, the trivial runtime calls watched while their records are off (runtime_watch.h), the
 * synchronizing calls (sync_watch.h), the calls that open capture windows. Application
 * threads. Returns 1 for a call the capture windows watch (cudaProfilerStart/Stop, an NVTX range
 * followed through CUPTI): a window may have asked for CUPTI. */
int collect_callbacks_dispatch(struct collect_session *s, CUpti_CallbackDomain d,
                               CUpti_CallbackId id, const void *data)
{
	if (!data)
		return 0;
	if (watch_profiler &&
	    (d == CUPTI_CB_DOMAIN_RUNTIME_API || d == CUPTI_CB_DOMAIN_DRIVER_API) &&
	    profiler_call(s, d, id, data))
		return 1;
	if (d == CUPTI_CB_DOMAIN_DRIVER_API && instantiate_call(s, id, data))
		return 0;
	/* Not returning: a synchronizing call may have its stack taken too. */
	if (!s->sync_cupti && (d == CUPTI_CB_DOMAIN_RUNTIME_API || d == CUPTI_CB_DOMAIN_DRIVER_API))
		cuptrace_sync_watch_callback(d, id, data);
	if ((d == CUPTI_CB_DOMAIN_RUNTIME_API || d == CUPTI_CB_DOMAIN_DRIVER_API) &&
	    collect_stacks_callback(d, id, data))
		return 0; /* a launch-type call: never one of the watched trivial calls */
	int windows = 0;
	if (d == CUPTI_CB_DOMAIN_RUNTIME_API) {
		cuptrace_runtime_watch_callback(id, data);
	} else if (d == CUPTI_CB_DOMAIN_NVTX) {
		if ((windows = watch_ranges && !collect_nvtx_watching()))
			window_nvtx(s, id, data);
		if (id == CUPTI_CBID_NVTX_nvtxRangeStartA ||
		    id == CUPTI_CBID_NVTX_nvtxRangeStartW ||
		    id == CUPTI_CBID_NVTX_nvtxRangeStartEx ||
		    id == CUPTI_CBID_NVTX_nvtxDomainRangeStartEx)
			nvtx_callback(s, data);
	} else if (d == CUPTI_CB_DOMAIN_RESOURCE) {
		if (id == CUPTI_CBID_RESOURCE_CONTEXT_CREATED) {
			cuptrace_cupti_alarm_note_context();
			note_context_device(s, data);
		}
		cuptrace_gm_on_callback(d, id, data);
	}
	return windows;
}

void collect_startend_drain(struct collect_session *s)
{
	pthread_mutex_lock(&s->startend.lock);
	size_t n = s->startend.n;
	uint64_t *ids = n ? malloc(n * sizeof(uint64_t)) : NULL;
	if (ids)
		memcpy(ids, s->startend.ids, n * sizeof(uint64_t));
	s->startend.n = 0;
	pthread_mutex_unlock(&s->startend.lock);
	if (!ids)
		return;
	cuptrace_consumer_nvtx_startend(&s->to, ids, n);
	free(ids);
}

void collect_startend_reset(struct collect_session *s)
{
	pthread_mutex_lock(&s->startend.lock);
	s->startend.n = 0;
	pthread_mutex_unlock(&s->startend.lock);
}
