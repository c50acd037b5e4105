/* Records about the run rather than the program's work: DEVICE, NAME and CONTEXT records (they
 * decide how tracks are named), CUPTI's own overhead, and the trace's metadata at the end. */
#include "convert/conv_state.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- what names tracks: handled before the rest of their batch ---- */

void conv_device(struct cuptrace_converter *c, const CUpti_ActivityDevice5 *d)
{
	struct gpu *g = &c->gpus[d->id % MAX_GPUS];
	const char *n = conv_resolve(c, d->name);
	g->known = 1;
	snprintf(g->name, sizeof(g->name), "%s", n ? n : "GPU");
	char key[32], val[256];
	snprintf(key, sizeof(key), "gpu%u", d->id);
	snprintf(val, sizeof(val), "%s, compute capability %u.%u, %u SMs, %.1f GiB", g->name,
	         d->computeCapabilityMajor, d->computeCapabilityMinor, d->numMultiprocessors,
	         (double)d->globalMemorySize / (1024.0 * 1024 * 1024));
	conv_meta_set(c, key, val, 0, 0);
	/* The UUID identifies the GPU across processes and machines (nvidia-smi -L prints it). */
	const unsigned char *u = (const unsigned char *)d->uuid.bytes;
	snprintf(key, sizeof(key), "gpu%u_uuid", d->id);
	snprintf(val, sizeof(val),
	         "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
	         u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
	         u[14], u[15]);
	conv_meta_set(c, key, val, 0, 0);
}

void conv_name(struct cuptrace_converter *c, const CUpti_ActivityName *n)
{
	const char *s = conv_resolve(c, n->name);
	if (!s)
		return;
	if (n->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD) {
		conv_thread_name(c, n->objectId.pt.threadId, s);
	} else if (n->objectKind == CUPTI_ACTIVITY_OBJECT_STREAM) {
		uint64_t *slot = cuptrace_u64map_put(
		    &c->stream_names,
		    ((uint64_t)n->objectId.dcs.contextId << 32) | n->objectId.dcs.streamId, NULL);
		if (slot)
			*slot = conv_intern(c, s);
	} else if (n->objectKind == CUPTI_ACTIVITY_OBJECT_DEVICE) {
		/* nvtxNameCudaDevice: "GPU 0: main-gpu (NVIDIA H200)"; a group already declared
		 * keeps its name (tracks are named once). */
		struct gpu *g = &c->gpus[n->objectId.dcs.deviceId % MAX_GPUS];
		if (!g->declared) {
			char model[160];
			snprintf(model, sizeof(model), "%s", g->name);
			if (g->known)
				snprintf(g->name, sizeof(g->name), "%.80s (%.70s)", s, model);
			else
				snprintf(g->name, sizeof(g->name), "%s", s);
			g->known = 1;
		}
	}
}

void conv_context(struct cuptrace_converter *c, const CUpti_ActivityContext3 *x)
{
	uint64_t *slot = cuptrace_u64map_put(&c->ctx_dev, x->contextId, NULL);
	if (slot)
		*slot = (uint64_t)x->deviceId + 1;
	conv_gpu_used(c, x->deviceId);
}

/* ---- CUPTI's own overhead ---- */

static const char *overhead_name(uint32_t k)
{
	switch (k) {
	case CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER:
		return "overhead: JIT compile";
	case CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH:
		return "overhead: CUPTI buffer flush";
	case CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION:
		return "overhead: CUPTI instrumentation";
	case CUPTI_ACTIVITY_OVERHEAD_CUPTI_RESOURCE:
		return "overhead: CUPTI resources";
	case CUPTI_ACTIVITY_OVERHEAD_RUNTIME_TRIGGERED_MODULE_LOADING:
		return "overhead: module loading";
	case CUPTI_ACTIVITY_OVERHEAD_LAZY_FUNCTION_LOADING:
		return "overhead: lazy function loading";
	case CUPTI_ACTIVITY_OVERHEAD_COMMAND_BUFFER_FULL:
		return "overhead: command buffer full";
	case CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST:
		return "overhead: activity buffer request";
	case CUPTI_ACTIVITY_OVERHEAD_UVM_ACTIVITY_INIT:
		return "overhead: UVM activity init";
	default:
		return "overhead";
	}
}

/* CUPTI's overhead: by default all of a process's on one track "CUPTI overhead", each slice's
 * thread in its arg "tid". Measured on tests/data (ddp2, torch_train, multi_stream): 11 to 138
 * records per process over 2 to 6 threads, 0.2% to 7% of the run, nearly all at start-up
 * (module loading: 391 ms of rank 0's 412 ms), and at most 2 at once: one track per thread
 * gave each process up to six mostly empty rows. --overhead-tracks thread puts them next to
 * the thread they happened on again: a track "CUPTI overhead: <thread> (<tid>)" per thread,
 * or "CUPTI overhead" where CUPTI names no thread. Each track has its own lanes, so overlapping
 * records never split a thread's API slices. */
static struct ovh_track *overhead_track(struct cuptrace_converter *c, int64_t tid)
{
	for (size_t i = 0; i < c->novh; i++)
		if (c->ovh[i].tid == tid)
			return &c->ovh[i];
	if (CUPTRACE_GROW(c->ovh, c->ovh_cap, c->novh + 1))
		return NULL;
	memset(&c->ovh[c->novh], 0, sizeof(c->ovh[0]));
	c->ovh[c->novh].tid = tid;
	return &c->ovh[c->novh++];
}

int conv_overhead(struct cuptrace_converter *c, const CUpti_Activity *r)
{
	const CUpti_ActivityOverhead3 *o = (const CUpti_ActivityOverhead3 *)r;
	if (!conv_span_ok(o->start, o->end))
		return 0;
	int64_t tid =
	    o->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD ? (int64_t)o->objectId.pt.threadId : 0;
	int per_thread = c->opts.overhead_per_thread;
	struct ovh_track *t = overhead_track(c, per_thread ? tid : 0);
	if (!t)
		return c->err = -ENOMEM;
	char name[96];
	if (tid && per_thread) {
		uint64_t *nm = cuptrace_u64map_get(&c->thread_names, (uint64_t)tid);
		snprintf(name, sizeof(name), "CUPTI overhead: %s (%" PRId64 ")",
		         nm ? conv_str(c, (uint32_t)*nm) : "thread", tid);
	} else {
		snprintf(name, sizeof(name), "CUPTI overhead");
	}
	int64_t ts = conv_rel(c, o->start), dur = (int64_t)(o->end - o->start);
	uint64_t track =
	    conv_lane_assign(c, t->lanes, &t->nlanes, &ts, &dur, name, c->process_uuid, 60);
	struct cuptrace_arg arg = {.key = "tid", .type = CUPTRACE_ARG_INT, .v.i = tid};
	struct cuptrace_slice s = {
	    .track_uuid = track,
	    .ts = ts,
	    .dur = dur,
	    .name = overhead_name(o->overheadKind),
	    .category = "cupti_overhead",
	    .correlation_id = o->correlationId,
	    .args = &arg,
	    .nargs = tid && !per_thread,
	};
	return conv_emit_slice(c, &s);
}

/* ---- the end ---- */

int conv_meta_finish(struct cuptrace_converter *c)
{
	const struct cuptrace_convert_counts *k = &c->counts;
	const struct {
		const char *key;
		uint64_t v;
	} m[] = {
	    {"records", k->records},
	    {"runtime_calls", k->runtime},
	    {"driver_calls", k->driver - k->driver_filtered},
	    {"driver_calls_filtered", k->driver_filtered},
	    {"kernels", k->kernels},
	    {"memcpys", k->memcpys},
	    {"memsets", k->memsets},
	    {"syncs", k->syncs},
	    {"nvtx_markers", k->markers},
	    {"nvtx_start_end_ranges", k->nvtx_startend},
	    {"module_static_allocations", k->static_memory},
	    {"flows", k->flows},
	    {"gpu_activities_without_api_record", k->unlinked_gpu},
	    {"gpu_records_without_timestamps", k->no_timestamp},
	    {"dropped_records_cupti", c->dropped_cupti},
	    {"dropped_records_cuptrace", c->dropped_cuptrace},
	};
	for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++)
		conv_meta_set(c, m[i].key, NULL, (int64_t)m[i].v, 1);
	/* The GPUs this process used, by CUDA index ("1", "0,2"): gpuN, gpuN_uuid and
	 * gpuN_pci_bus_id name every GPU it could see, and a rank of a job sees them all. Empty
	 * when it used none (a process that only loaded CUDA). */
	char used[64 * 3 + 1] = "";
	size_t ul = 0;
	for (unsigned d = 0; d < 64; d++)
		if (c->gpus_used >> d & 1)
			ul += (size_t)snprintf(used + ul, sizeof(used) - ul, "%s%u", ul ? "," : "",
			                       d);
	conv_meta_set(c, "gpus_used", used, 0, 0);
	/* Only in traces with CUDA graphs: the others keep their metadata as before. */
	if (k->graph_launches)
		conv_meta_set(c, "graph_launches", NULL, (int64_t)k->graph_launches, 1);
	if (k->device_graph_launches)
		conv_meta_set(c, "device_graph_launches", NULL, (int64_t)k->device_graph_launches,
		              1);
	if (k->graph_nodes)
		conv_meta_set(c, "gpu_activities_in_graphs", NULL, (int64_t)k->graph_nodes, 1);
	/* Only in traces with stacks, likewise. */
	if (k->stacks || k->stacks_bad) {
		conv_meta_set(c, "call_stacks", NULL, (int64_t)k->stacks, 1);
		conv_meta_set(c, "call_stack_records_bad", NULL, (int64_t)k->stacks_bad, 1);
	}
	/* Where ui.perfetto.dev opens (src/format/TIMELINE.md). */
	int64_t view = conv_view_start(c);
	if (view > 0)
		conv_meta_set(c, CUPTRACE_META_VIEW_START, NULL, view, 1);
	if (!c->err && c->sink->ops->meta) {
		int r = c->sink->ops->meta(c->sink, c->meta, c->nmeta);
		if (r)
			c->err = r;
	}
	return c->err;
}

void conv_meta_init(struct cuptrace_converter *c)
{
	cuptrace_u64map_init(&c->ctx_dev);
}

void conv_meta_free(struct cuptrace_converter *c)
{
	free(c->ovh);
	cuptrace_u64map_free(&c->ctx_dev);
}
