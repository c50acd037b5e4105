/* Converter state and the functions the convert_*.c files share. Private to src/convert.
 *
 * The files form layers; a file calls only the ones below it, never one beside or above it
 * (tests/layers_test.sh checks this on the object files):
 *
 *   convert.c          public entry points: life cycle, and the switch over record kinds
 *   convert_api.c      runtime and driver API records (which are dropped, names)
 *   convert_gpu.c      kernels, copies, memsets (streams, lanes, names), synchronization
 *   convert_nvtx.c     NVTX marks and ranges
 *   convert_memory.c   allocations, memory pools, the device-memory counter
 *   convert_meta.c     DEVICE, NAME, CONTEXT and OVERHEAD records; the trace's metadata
 *   convert_gpumetrics.c  GPU hardware metrics: counter tracks from PM samples
 *   convert_corr.c     correlation: links GPU work and syncs to their API call (flows, held
 *                      back API calls); called by convert_api.c and convert_gpu.c
 *   convert_core.c     strings, uuids, time, thread and GPU tracks, lanes, slices, metadata
 *   convert_stacks.c   call stacks: kept, and given to the slices of their correlation id
 *   convert_records.c  static knowledge of CUPTI's records and API ids
 *
 * Threading: a converter and everything below belongs to one thread (see convert.h). Each
 * field of struct cuptrace_converter is written by the file its section names; a field read by
 * another file says so. */
#ifndef CUPTRACE_CONVERT_CONV_STATE_H
#define CUPTRACE_CONVERT_CONV_STATE_H

#include "common/util.h"
#include "convert/convert.h"

#define MAX_LANES  64
#define NAME_CACHE 64
#define MAX_GPUS   64

/* Records reach cuptrace within about two flush periods of each other: a record that started
 * this long before the newest end seen can no longer be overtaken by an earlier one. The
 * watermark of the device-memory counter (convert_memory.c) and of GPU work (convert_gpu.c). */
#define CONV_WATERMARK_NS 3000000000ll

struct conv_gm;      /* convert_gpumetrics.c */
struct conv_stack;   /* convert_stacks.c */
struct conv_corrstk; /* convert_stacks.c */
struct conv_span;    /* convert_view.c */

/* ---- types of convert_core.c ---- */

/* uuids: pid in the top bits so traces of several processes can be merged without clashes. */
enum uuid_type {
	U_PROCESS = 1,
	U_THREAD = 2,
	U_GPU = 3,
	U_LANE = 4,
	U_COUNTER = 5,
	U_NVTX = 6,
};

/* One track of a set that shares a name: slices that would overlap go on the next one. */
struct lane {
	uint64_t uuid;
	int64_t last_end;
};

struct gpu {
	int known; /* a DEVICE record arrived (convert_meta.c) */
	int declared;
	uint64_t uuid;
	char name[160];
	uint64_t mem_uuid; /* "Device memory" counter track, 0 until declared (convert_memory.c) */
	int64_t mem_used;  /* convert_memory.c */
};

/* ---- types of convert_corr.c ---- */

/* A synchronization record, kept until the API call that waited arrives. */
struct orphan_sync {
	int64_t ts, end;
	uint32_t type, stream, event;
};

/* GPU work that came before its API record: its flow id, and its end (conv_rel's time), which
 * decides whether the call can have launched it. */
struct orphan {
	uint64_t flow;
	int64_t end;
};

/* Per correlation id: the API call (once seen), flows handed out to its GPU work, GPU work and
 * synchronization records that arrived before the API record. */
struct corr_state {
	uint32_t corr;
	uint16_t nflows; /* flow ids handed out: (corr << 16 | k) */
	uint8_t api_seen;
	uint8_t api_emitted;
	int32_t pending;    /* index into conv->pending, -1 if none */
	uint64_t api_track; /* once seen */
	int64_t api_ts, api_end;
	struct orphan *orphans; /* GPU work that came before the API record */
	uint32_t norphans, orphans_cap;
	struct orphan_sync *syncs;
	uint32_t nsyncs, syncs_cap;
};

/* An API call held back until its GPU work arrives (see convert.h). */
struct pending_api {
	int used;
	uint32_t corr;
	int expect;           /* GPU records expected: 1, or -1 for "unknown" (graph launches) */
	uint64_t batch_added; /* batch in which the last flow was added */
	uint64_t track;
	int64_t ts, dur;
	uint32_t name_id, cat_id;
	int32_t ret;
	/* Flows to its GPU work: most calls make one GPU record, so the first is kept in flow1
	 * and an array (flows, owned) is made only for a second; conv_corr_flows gives the list. */
	uint64_t flow1;
	uint64_t *flows;
	uint32_t nflows, flows_cap;
	uint32_t gpos; /* graph launches: place in conv->gpend + 1 */
};

/* An API call ready to be drawn, as convert_api.c hands it to convert_corr.c. */
struct api_call {
	uint32_t corr; /* 0: none, drawn at once */
	int expect;    /* GPU records the call makes: 1, -1 unknown (graph launches), 0 none */
	uint64_t track;
	int64_t ts, dur;
	uint32_t name_id, cat_id;
	int32_t ret;
};

/* ---- types of convert_gpu.c ---- */

struct stream {
	uint32_t dev, ctx, id;
	char name[96];
	int declared;
	size_t nlanes;
	struct lane lanes[MAX_LANES];
};

struct name_cache {
	const char *ptr;  /* the record's name pointer */
	uint32_t mangled; /* its text, interned */
	uint32_t demangled;
};

/* convert_gpu.c only: */
struct gwork;    /* one GPU activity, from its arrival until it is drawn */
struct gpu_slot; /* a copy of its CUPTI record, and the API call held back for it */

/* ---- types of convert_nvtx.c ---- */

struct tstack {
	int64_t tid;
	uint32_t *ids; /* open NVTX range ids, innermost last */
	size_t n, cap;
};

struct mdata {
	uint32_t color;
	int has_color;
	uint32_t category;
	int payload_kind; /* -1 none */
	union {
		double d;
		uint64_t u;
		int64_t i;
	} payload;
};

struct nvtx_range {
	int used;
	int end_seen; /* only the END arrived so far; ts is the END's */
	uint32_t id;
	int64_t ts;
	int64_t tid;
	uint32_t name_id, domain_id;
	uint32_t color;
	int has_color;
	/* A PyTorch op's suffixes (convert/opname.h), shown as arguments. sizes and inputs are
	 * malloc'd (owned by the range, freed when it is emitted): with op ids in them they are
	 * unique per op, so interning them would grow the string table without bound. */
	int has_seq, has_op_id;
	int64_t seq, op_id;
	char *sizes, *inputs;
};

/* ---- types of convert_memory.c and convert_meta.c ---- */

/* A change of a GPU's device memory in use, waiting for the watermark. */
struct memev {
	int64_t ts;
	uint32_t dev;
	int64_t delta;
};

/* CUPTI overhead lanes of one thread (0: the process's own, which holds every thread's unless
 * opts.overhead_per_thread). */
struct ovh_track {
	int64_t tid;
	struct lane lanes[MAX_LANES];
	size_t nlanes;
};

struct cuptrace_converter {
	/* convert.c: set once by cuptrace_converter_new and the setters */
	struct cuptrace_sink *sink;
	int err; /* the first error; every file sets it and stops emitting once it is set */
	struct cuptrace_convert_opts opts;
	struct cuptrace_convert_counts counts; /* every file counts what it handles */
	int32_t pid;
	int64_t start; /* BOOTTIME ns at relative 0 */
	cuptrace_resolve_fn resolve;
	void *resolve_ctx;
	uint64_t batch; /* batches so far (convert_corr.c reads it) */
	uint64_t dropped_cupti, dropped_cuptrace;

	/* convert_core.c */
	uint64_t process_uuid;
	struct cuptrace_strtab strs;         /* names, interned */
	struct cuptrace_u64map threads;      /* tid -> uuid (declared) */
	struct cuptrace_u64map thread_names; /* tid -> strtab id */
	/* ctx << 32 | stream -> strtab id: NVTX names of streams, written by convert_meta.c from
	 * NAME records, read by convert_gpu.c when the stream's track is declared */
	struct cuptrace_u64map stream_names;
	struct gpu gpus[MAX_GPUS]; /* its fields say which other files write them */
	/* Bit d: the process used CUDA device d (a context on it, GPU work, an allocation), as
	 * opposed to only seeing it (DEVICE records come for every visible GPU). Set through
	 * conv_gpu_used by convert_meta.c, convert_gpu.c and convert_memory.c; written as the
	 * "gpus_used" metadata by conv_meta_finish. */
	uint64_t gpus_used;
	uint64_t next_lane_idx;
	struct cuptrace_meta *meta; /* trace metadata, handed to the sink at the end */
	size_t nmeta, meta_cap;
	/* convert_view.c: where ui.perfetto.dev opens, from the slices emitted (relative ns): the
	 * latest end, the earliest kernel or CUDA graph start (INT64_MAX: none yet), and the
	 * copies and memsets that started before that kernel as they came (lead, nlead; lead_full:
	 * too many to keep, the lead-in is not looked for). */
	int64_t view_end, view_work;
	struct conv_span *lead;
	size_t nlead, lead_cap;
	int lead_full;
	/* Scratch for one event's args: any file, for one event at a time. */
	struct cuptrace_arg args[24];

	/* convert_corr.c */
	struct corr_state *corr; /* states by id mod corr_cap (convert_corr.c) */
	size_t corr_cap;
	uint64_t *corr_held;          /* a bit per slot that ever held orphans or syncs: what finish
	                               * and free visit */
	struct corr_state corr_stray; /* for an id too late for its slot */
	struct pending_api *pending;
	size_t pending_cap, npending;
	size_t *pending_free; /* released entries, reused first (last released first) */
	size_t npending_free;
	size_t pending_fresh; /* entries [0, pending_fresh) have been used: the rest never were */
	/* The held-back graph launches (expect < 0: only they have batch_end work), by index into
	 * pending, in no order; gcand is batch_end's scratch. */
	uint32_t *gpend, *gcand;
	size_t ngpend, gpend_cap, gcand_cap;
	uint64_t *oflows; /* conv_corr_api's scratch: the flows of a call's orphans */
	size_t oflows_cap;

	/* convert_api.c */
	uint8_t driver_noise[1024];                   /* bitset over driver cbids */
	int8_t *runtime_expect, *driver_expect;       /* per cbid: 0, 1, -1 */
	uint32_t *runtime_name_ids, *driver_name_ids; /* per cbid, 0 = not yet */
	uint32_t cat_runtime, cat_driver;
	int64_t latest_ts; /* latest API end seen: the watermark base (memory and GPU work) */

	/* convert_gpu.c */
	struct cuptrace_u64map stream_idx; /* ctx << 32 | stream -> index + 1 */
	struct stream *streams;
	size_t nstreams, streams_cap;
	struct cuptrace_u64map demangled; /* mangled strtab id -> demangled strtab id */
	struct name_cache names[NAME_CACHE];
	int32_t dims[6];
	int dims_valid;
	char dims_grid[48], dims_block[48];
	struct gwork *work; /* this batch's, between conv_gpu_batch_begin and _end; kept */
	size_t nwork, work_cap;
	/* The reorder window: GPU work not yet drawn, win[win_head .. win_head + nwin) in drawing
	 * order (start time; convert_gpu.c). A batch is merged in through spare, which then
	 * changes places with win; spare is also the scratch of the batch's sorts. */
	struct gwork *win, *spare;
	size_t win_head, nwin, win_cap, spare_cap;
	uint32_t *stream_at; /* per stream: a counting sort's bucket start (convert_gpu.c) */
	size_t stream_at_cap;
	struct gpu_slot *slots; /* the records of work and window */
	uint32_t *slots_free;   /* free slots */
	size_t slots_cap, nslots_free;
	uint64_t gpu_seq;   /* GPU records taken so far */
	int64_t gpu_latest; /* latest GPU end seen: with latest_ts, the window's watermark base */

	/* convert_nvtx.c */
	struct cuptrace_u64map nvtx_open; /* marker id -> index + 1 in nvtx */
	struct nvtx_range *nvtx;
	size_t nnvtx, nvtx_cap;
	struct cuptrace_u64map nvtx_data;     /* marker id -> color/payload record index */
	struct cuptrace_u64map nvtx_startend; /* ids of start/end ranges not yet ended */
	struct lane nvtx_lanes[MAX_LANES];
	size_t nnvtx_lanes;
	struct tstack *stacks;
	size_t nstacks, stacks_cap;
	struct mdata *mdatas;
	size_t nmdatas, mdatas_cap;

	/* convert_memory.c */
	int alloc_track_declared[MAX_GPUS];
	/* Device-memory counter changes wait here until no earlier one can still arrive (records
	 * of other threads come in other buffers): values must be summed in time order. */
	struct memev *memev;
	size_t nmemev, memev_cap;

	/* convert_gpumetrics.c: per GPU, its metrics and sample stream (NULL: none) */
	struct conv_gm *gm[MAX_GPUS];
	uint32_t gm_configs;

	/* convert_stacks.c */
	struct conv_stack *stk; /* every stack received, in arrival order */
	size_t nstk, stk_cap;
	struct cuptrace_u64map stk_idx;    /* stack id -> index + 1 in stk */
	struct conv_corrstk *corrstk;      /* NULL until the first STACK_CORR */
	struct cuptrace_frame *stk_frames; /* scratch for one decoded stack */
	size_t stk_frames_cap;

	/* convert_meta.c */
	struct cuptrace_u64map ctx_dev; /* context id -> device id + 1 (recorded, not yet read) */
	struct ovh_track *ovh;
	size_t novh, ovh_cap;
};

/* A start/end pair worth drawing: both set, in order, and less than 10^15 ns (11 days) apart;
 * anything else is a record CUPTI could not time, or a corrupt one. */
static inline int conv_span_ok(uint64_t start, uint64_t end)
{
	return start && end >= start && end - start < 1000000000000000ull && start < (1ull << 62);
}

/* ---- convert_records.c: no converter state ---- */

extern const char *const cuptrace_runtime_cbid_names[];
extern const unsigned cuptrace_runtime_cbid_names_len;
extern const char *const cuptrace_driver_cbid_names[];
extern const unsigned cuptrace_driver_cbid_names_len;
/* Per cbid: GPU records the call makes (1, -1 unknown, 0 none). Caller frees. */
int8_t *conv_expect_table(const char *const *names, unsigned len);
const char *conv_copy_kind_name(uint8_t k);
const char *conv_mem_kind_name(uint8_t k);
const char *conv_sync_name(uint32_t type);

/* ---- convert_stacks.c: called by convert.c and convert_core.c, calls none ---- */

/* A STACK or STACK_CORR record (convert/stackrec.h). */
int conv_stacks_record(struct cuptrace_converter *c, const CUpti_Activity *r);
/* The stack id of the call with this correlation id (0: none), sent to the sink first if this
 * is its first use. */
uint64_t conv_stacks_for(struct cuptrace_converter *c, uint64_t corr);
void conv_stacks_free(struct cuptrace_converter *c);
/* Sends the stack with this id to the sink if not yet sent: 1 if the sink has it. */
int conv_stacks_emit(struct cuptrace_converter *c, uint64_t stack);

/* ---- convert_samples.c: called by convert.c, calls convert_core.c and convert_stacks.c ---- */

/* A SAMPLES record (convert/stackrec.h): host stack samples. */
int conv_samples_record(struct cuptrace_converter *c, const CUpti_Activity *rec);

/* ---- convert_core.c: used by every family, calls none ---- */

void conv_core_init(struct cuptrace_converter *c);
/* Copies info's metadata, begins the sink and declares the process. */
int conv_core_begin(struct cuptrace_converter *c, const struct cuptrace_trace_info *info);
void conv_core_free(struct cuptrace_converter *c);
uint64_t conv_uuid(const struct cuptrace_converter *c, enum uuid_type t, uint64_t idx);
uint32_t conv_intern(struct cuptrace_converter *c, const char *s);
const char *conv_str(const struct cuptrace_converter *c, uint32_t id);
const char *conv_resolve(struct cuptrace_converter *c, const char *ptr);
int64_t conv_rel(struct cuptrace_converter *c, uint64_t ts);
int conv_emit_slice(struct cuptrace_converter *c, const struct cuptrace_slice *s);
void conv_meta_set(struct cuptrace_converter *c, const char *key, const char *s, int64_t i,
                   int is_int);
int conv_thread_name(struct cuptrace_converter *c, int64_t tid, const char *name);
uint64_t conv_thread_track(struct cuptrace_converter *c, int64_t tid);
int conv_declare_gpu(struct cuptrace_converter *c, uint32_t dev);
/* The process used device dev (see gpus_used). */
void conv_gpu_used(struct cuptrace_converter *c, uint32_t dev);
uint64_t conv_lane_assign(struct cuptrace_converter *c, struct lane *lanes, size_t *nlanes,
                          int64_t *ts, int64_t *dur, const char *name, uint64_t parent,
                          int32_t rank);

/* ---- convert_corr.c: called by convert_api.c and convert_gpu.c ---- */

int conv_corr_init(struct cuptrace_converter *c);
void conv_corr_free(struct cuptrace_converter *c);
/* Draws the call, or holds it back until its GPU work arrives; draws syncs that waited for it. */
int conv_corr_api(struct cuptrace_converter *c, const struct api_call *a);
/* The flow into one GPU activity of correlation id corr (0: none), added to its API call. A
 * call held back that now has all its GPU work moves to *done (done->used set), for the caller
 * to write with conv_corr_write_taken when it draws that work, so the two lie side by side in
 * the trace (which compresses better: they share the ids). */
uint64_t conv_corr_flow_in(struct cuptrace_converter *c, uint32_t corr, int64_t gpu_end,
                           struct pending_api *done);
/* Writes a call conv_corr_flow_in handed out (if p->used) and frees what it holds. */
int conv_corr_write_taken(struct cuptrace_converter *c, struct pending_api *p);
/* Draws a synchronization as a child of its API call, or keeps it until the call arrives. */
int conv_corr_sync(struct cuptrace_converter *c, uint32_t corr, const struct orphan_sync *o);
/* After each batch: draws graph launches that the batch brought nothing more. */
int conv_corr_batch_end(struct cuptrace_converter *c);
/* Draws every call still held back and counts GPU work never linked. */
int conv_corr_finish(struct cuptrace_converter *c);

/* ---- the families, called by convert.c only ---- */

/* convert_api.c */
int conv_api_init(struct cuptrace_converter *c);
void conv_api_free(struct cuptrace_converter *c);
int conv_api_record(struct cuptrace_converter *c, const CUpti_ActivityAPI *a);

/* convert_gpu.c: a batch's kernels, copies and memsets are collected, then held in a reorder
 * window and drawn in start order once the watermark passes them (or the window is full). */
void conv_gpu_init(struct cuptrace_converter *c);
void conv_gpu_free(struct cuptrace_converter *c);
int conv_gpu_batch_begin(struct cuptrace_converter *c, size_t n);
int conv_gpu_work(struct cuptrace_converter *c, const CUpti_Activity *r);
int conv_gpu_batch_end(struct cuptrace_converter *c);
/* Draws all GPU work still in the window. */
int conv_gpu_finish(struct cuptrace_converter *c);
int conv_gpu_sync(struct cuptrace_converter *c, const CUpti_ActivitySynchronization2 *y);

/* convert_nvtx.c */
void conv_nvtx_init(struct cuptrace_converter *c);
void conv_nvtx_free(struct cuptrace_converter *c);
int conv_marker(struct cuptrace_converter *c, const CUpti_Activity *r);
int conv_marker_data(struct cuptrace_converter *c, const CUpti_Activity *r);
int conv_nvtx_startend(struct cuptrace_converter *c, const uint64_t *ids, size_t n);

/* convert_memory.c */
void conv_memory_free(struct cuptrace_converter *c);
int conv_memory(struct cuptrace_converter *c, const CUpti_Activity *r);
int conv_memory_pool(struct cuptrace_converter *c, const CUpti_Activity *r);
/* Emits counter values older than the watermark (all of them if all). */
int conv_memory_flush(struct cuptrace_converter *c, int all);

/* convert_gpumetrics.c */
int conv_gpumetrics_config(struct cuptrace_converter *c, const struct cuptrace_gm_config *cfg);
int conv_gpumetrics_samples(struct cuptrace_converter *c, uint32_t device, size_t nmetrics,
                            const uint64_t *times, const double *values, size_t n);
/* Every GPU's tracks drop to 0 after its last sample; sample and gap counts as metadata. */
int conv_gpumetrics_finish(struct cuptrace_converter *c);
void conv_gpumetrics_free(struct cuptrace_converter *c);

/* convert_meta.c */
/* convert_view.c: conv_view_note sees every slice emitted (conv_emit_slice); conv_view_start
 * says, at the end, where the first view should start (0: the whole trace). */
void conv_view_init(struct cuptrace_converter *c);
void conv_view_note(struct cuptrace_converter *c, const struct cuptrace_slice *s);
int64_t conv_view_start(struct cuptrace_converter *c);
void conv_view_free(struct cuptrace_converter *c);
void conv_meta_init(struct cuptrace_converter *c);
void conv_meta_free(struct cuptrace_converter *c);
void conv_device(struct cuptrace_converter *c, const CUpti_ActivityDevice5 *d);
void conv_name(struct cuptrace_converter *c, const CUpti_ActivityName *n);
void conv_context(struct cuptrace_converter *c, const CUpti_ActivityContext3 *x);
int conv_overhead(struct cuptrace_converter *c, const CUpti_Activity *r);
/* The counts and dropped records as metadata, then all metadata to the sink. */
int conv_meta_finish(struct cuptrace_converter *c);

#endif
