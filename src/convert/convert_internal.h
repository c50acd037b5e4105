/* Converter state shared by convert.c (core: tracks, API calls, GPU work, flows) and
 * convert_extra.c (NVTX, memory, overhead). Private to src/convert. */
#ifndef CUPTRACE_CONVERT_INTERNAL_H
#define CUPTRACE_CONVERT_INTERNAL_H

#include "common/util.h"
#include "convert/convert.h"

#define MAX_LANES  64
#define NAME_CACHE 64
#define MAX_GPUS   64

/* uuids: pid in the top bits so traces of several processes can be merged without clashes. */
enum uuid_type {
	U_PROCESS = 1,
	U_THREAD = 2,
	U_GPU = 3,
	U_LANE = 4,
	U_COUNTER = 5,
	U_NVTX = 6,
};

struct lane {
	uint64_t uuid;
	int64_t last_end;
};

struct stream {
	uint32_t dev, ctx, id;
	char name[96];
	int declared;
	size_t nlanes;
	struct lane lanes[MAX_LANES];
};

struct gpu {
	int known; /* a DEVICE record arrived */
	int declared;
	uint64_t uuid;
	char name[160];
	uint64_t mem_uuid; /* "Device memory" counter track, 0 until declared */
	int64_t mem_used;
};

/* Per correlation id: the API call (once seen), flows handed out to its GPU work, GPU work and
 * synchronization records that arrived before the API record. */
struct orphan_sync {
	int64_t ts, end;
	uint32_t type, stream, event;
};

struct corr_state {
	uint32_t corr;
	uint16_t nflows; /* flow ids handed out: (corr << 16 | k) */
	uint8_t api_seen;
	uint8_t api_emitted;
	int32_t pending;    /* index into conv->pending, -1 if none */
	uint64_t api_track; /* once seen */
	int64_t api_ts, api_end;
	uint64_t *orphans; /* flow ids of GPU work that came before the API record */
	uint32_t norphans, orphans_cap;
	struct orphan_sync *syncs;
	uint32_t nsyncs;
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
	uint64_t *flows;
	uint32_t nflows, flows_cap;
};

struct name_cache {
	const char *ptr;  /* the record's name pointer */
	uint32_t mangled; /* its text, interned */
	uint32_t demangled;
};

struct cuptrace_converter {
	struct cuptrace_sink *sink;
	int err;
	struct cuptrace_convert_opts opts;
	struct cuptrace_convert_counts counts;
	int32_t pid;
	int64_t start; /* BOOTTIME ns at relative 0 */
	uint64_t process_uuid;
	cuptrace_resolve_fn resolve;
	void *resolve_ctx;
	struct cuptrace_strtab strs;         /* names, interned */
	struct cuptrace_u64map thread_names; /* tid -> strtab id */
	struct cuptrace_u64map threads;      /* tid -> uuid (declared) */
	struct cuptrace_u64map demangled;    /* mangled strtab id -> demangled strtab id */
	struct gpu gpus[MAX_GPUS];
	struct cuptrace_u64map ctx_dev;      /* context id -> device id + 1 */
	struct cuptrace_u64map stream_idx;   /* ctx << 32 | stream -> index + 1 */
	struct cuptrace_u64map stream_names; /* ctx << 32 | stream -> strtab id (NVTX names) */
	struct stream *streams;
	size_t nstreams, streams_cap;
	uint64_t next_lane_idx;
	/* correlation */
	struct cuptrace_u64map corr_idx; /* corr -> slot + 1 in corr ring */
	struct corr_state *corr;         /* ring of states, oldest evicted */
	size_t corr_cap, corr_head;
	struct pending_api *pending;
	size_t pending_cap, npending;
	size_t *pending_free;
	size_t npending_free;
	uint64_t batch;
	uint8_t driver_noise[1024];             /* bitset over driver cbids */
	int8_t *runtime_expect, *driver_expect; /* per cbid: 0, 1, -1 */
	/* metadata collected from records */
	struct cuptrace_meta *meta;
	size_t nmeta, meta_cap;
	uint64_t dropped_cupti, dropped_cuptrace;
	/* NVTX and memory (convert_extra.c) */
	struct cuptrace_u64map nvtx_open; /* marker id -> index + 1 in nvtx */
	struct nvtx_range *nvtx;
	size_t nnvtx, nvtx_cap;
	struct cuptrace_u64map nvtx_data;     /* marker id -> color/payload record index */
	struct cuptrace_u64map nvtx_startend; /* ids of start/end ranges not yet ended */
	uint64_t nvtx_async_uuid;             /* "NVTX ranges" track group, 0 until declared */
	struct lane nvtx_lanes[MAX_LANES];
	size_t nnvtx_lanes;
	struct tstack *stacks;
	size_t nstacks;
	struct mdata *mdatas;
	size_t nmdatas;
	struct ovh_track {
		int64_t tid; /* 0: the process's own */
		struct lane lanes[MAX_LANES];
		size_t nlanes;
	} * ovh;
	size_t novh;
	int alloc_track_declared[MAX_GPUS];
	/* Device-memory counter changes wait here until no earlier one can still arrive (records
	 * of other threads come in other buffers): values must be summed in time order. */
	struct memev {
		int64_t ts;
		uint32_t dev;
		int64_t delta;
	} * memev;
	size_t nmemev, memev_cap;
	int64_t latest_ts; /* latest API end seen: the watermark's base */
	/* caches for the hot path */
	uint32_t *runtime_name_ids, *driver_name_ids; /* per cbid, 0 = not yet */
	uint32_t cat_runtime, cat_driver;
	struct name_cache names[NAME_CACHE];
	int32_t dims[6];
	int dims_valid;
	char dims_grid[48], dims_block[48];
	/* scratch */
	struct cuptrace_arg args[24];
};

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
};

/* A start/end pair worth drawing: both set, in order, and less than 10^15 ns (11 days) apart;
 * anything else is a record CUPTI could not time, or a corrupt one. */
static inline int conv_span_ok(uint64_t start, uint64_t end)
{
	return start && end >= start && end - start < 1000000000000000ull && start < (1ull << 62);
}

/* convert_records.c */
extern const char *const cuptrace_runtime_cbid_names[];
extern const unsigned cuptrace_runtime_cbid_names_len;
extern const char *const cuptrace_driver_cbid_names[];
extern const unsigned cuptrace_driver_cbid_names_len;
/* Per cbid: GPU records the call makes (1, -1 unknown, 0 none). Caller frees. */
int8_t *conv_expect_table(const char *const *names, unsigned len);
/* API name without CUPTI's _vNNNN suffix, into buf (or a static string). */
const char *conv_api_name(const CUpti_ActivityAPI *a, char *buf, size_t n);
const char *conv_copy_kind_name(uint8_t k);
const char *conv_mem_kind_name(uint8_t k);
const char *conv_sync_name(uint32_t type);

/* convert.c */
uint64_t conv_uuid(const struct cuptrace_converter *c, enum uuid_type t, uint64_t idx);
uint64_t conv_thread_track(struct cuptrace_converter *c, int64_t tid);
uint32_t conv_intern(struct cuptrace_converter *c, const char *s);
const char *conv_str(const struct cuptrace_converter *c, uint32_t id);
const char *conv_resolve(struct cuptrace_converter *c, const char *ptr);
int64_t conv_rel(struct cuptrace_converter *c, uint64_t ts);
int conv_emit_slice(struct cuptrace_converter *c, const struct cuptrace_slice *s);
void conv_meta_set(struct cuptrace_converter *c, const char *key, const char *s, int64_t i,
                   int is_int);
int conv_declare_gpu(struct cuptrace_converter *c, uint32_t dev);
uint64_t conv_lane_assign(struct cuptrace_converter *c, struct lane *lanes, size_t *nlanes,
                          int64_t *ts, int64_t *dur, const char *name, uint64_t parent,
                          int32_t rank);

/* convert_extra.c */
int conv_marker(struct cuptrace_converter *c, const CUpti_Activity *r);
int conv_marker_data(struct cuptrace_converter *c, const CUpti_Activity *r);
int conv_memory(struct cuptrace_converter *c, const CUpti_Activity *r);
int conv_memory_pool(struct cuptrace_converter *c, const CUpti_Activity *r);
int conv_overhead(struct cuptrace_converter *c, const CUpti_Activity *r);
int conv_extra_finish(struct cuptrace_converter *c);
/* Emits counter values older than the watermark (all of them if all). */
int conv_memory_flush(struct cuptrace_converter *c, int all);
void conv_extra_free(struct cuptrace_converter *c);

#endif
