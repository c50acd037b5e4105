/* What the parts of the tracing session share (collect.c: life cycle; collect_buffers.c: CUPTI
 * buffers and the writer thread; collect_callbacks.c: the subscriber callback and NVTX start/end
 * ids; collect_output.c: the trace's output and metadata; collect_consumers.c: the record
 * consumers the stream goes to). Private to src/inject.
 *
 * Calls go one way: collect.c -> collect_buffers.c -> collect_callbacks.c, collect_output.c;
 * collect.c -> collect_callbacks.c, collect_output.c. Shared state is the one session below,
 * handed to each function as struct collect_session *s (only trampolines read the process's
 * pointer to it, collect_process_session). */
#ifndef CUPTRACE_INJECT_STATE_H
#define CUPTRACE_INJECT_STATE_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cupti.h>

#include "preload/preload.h"
#include "control/control.h"
#include "inject/kinds.h"
#include "inject/queue.h"
#include "window/ring.h"
#include "window/wfilter.h"
#include "window/window.h"
#include "common/util.h"
#include "convert/consumer.h"
#include "convert/convert.h"
#include "format/formats.h"

enum { ST_IDLE, ST_RUNNING, ST_STOPPING, ST_DONE };

/* One file the session writes: the trace, or a capture window's own (a name with %n). Its
 * consumer is the converter over sink, or the capture writer (convert/consumer.h). Owned by the
 * thread that writes it (collect_output.c opens and closes it). */
struct collect_output {
	char *path;
	struct cuptrace_sink *sink;
	struct cuptrace_sink *otlp; /* --otlp: inside sink (a tee with the file, or alone) */
	/* The file they write: a partial file until the trace is complete (output/recfile.h);
	 * NULL with -o none and before the output is opened. */
	struct cuptrace_recfile *rf;
	struct cuptrace_consumer cons; /* ops NULL: not open */
	/* The converter inside cons, borrowed for its counts (the summary); NULL for a capture. */
	const struct cuptrace_converter *conv;
};

/* The consumers a session's stream goes to (pointers to consumers owned elsewhere: a closed
 * one, ops NULL, is passed over). */
#define COLLECT_MAX_CONSUMERS 4
struct collect_consumers {
	struct cuptrace_consumer *c[COLLECT_MAX_CONSUMERS];
	size_t n;
};
/* Adds one; -ENOSPC when the list is full. */
int collect_consumers_add(struct collect_consumers *l, struct cuptrace_consumer *c);
/* The list as one consumer: each operation to every member in order, the first error returned;
 * it has no finish or destroy (the members have their owners). */
struct cuptrace_consumer collect_consumers_as_one(struct collect_consumers *l);

/* ---- capture windows (collect_window.c decides; collect_wwriter.c writes) ---- */

/* One window of the run, from its opening to the moment every record of it was written. */
struct collect_wlog {
	uint64_t number;
	int64_t open, close; /* BOOTTIME ns; close INT64_MAX while open */
	char why_open[160], why_close[160];
	/* A range that opened it, drawn in its file as it was (CUPTI records no START for a
	 * range whose push turned recording on). */
	char range[128];
	int64_t range_tid, range_begin, range_end;
	uint64_t range_key;
	/* Set by the flush thread once CUPTI handed over everything up to the drain: the
	 * writer finishes the window when it has taken that many buffers. */
	int final_requested;
	uint64_t final_after;
	int final; /* written (collect_wwriter.c) */
	char file[512];
	uint64_t kernels, records; /* records: GPU work (kernels, copies, memsets) */
	/* A window that `cuptrace top` watches (control request "watch DIR"): its records go
	 * into a capture of its own in this directory, not into the trace ("": not watched). */
	char watch[256];
};

/* A flight recorder dump asked for: [from, to] of the ring into a file. */
struct collect_dump {
	int64_t from, to;
	int64_t not_before; /* the GPU work of a slow step gets time to finish */
	char why[96];
	int requested; /* flushed: taken by the writer after final_after buffers */
	uint64_t final_after;
	int done;
	char file[512];
};

#define COLLECT_MAX_DUMPS 32

struct collect_windows {
	pthread_mutex_t lock;   /* all below; app threads, flusher, control and writer threads */
	pthread_cond_t changed; /* a window or dump was written */
	int active;             /* windows decide what is recorded (not the whole run) */
	int ring;               /* flight recorder */
	int per_file;           /* the output name has %n: a file per window */
	int kinds_on;           /* CUPTI's activity kinds are on */
	int gpu_kinds_on;
	struct cuptrace_wspec spec;
	struct cuptrace_wtracker tracker;
	struct cuptrace_slowsteps slow;
	int slow_on;
	char step_range[128];
	int64_t drain_ns; /* GPU kinds stay on this long after a close */
	struct collect_wlog *log;
	size_t nlog, caplog;
	struct collect_dump dumps[COLLECT_MAX_DUMPS];
	size_t ndumps;
	int wake[2];                      /* wakes the flush thread */
	struct cuptrace_control *control; /* the trigger socket */
	int64_t ring_ns;
	size_t ring_max;
	int closing; /* the session ends: handlers stop waiting */
	/* The window a watching `cuptrace top` keeps open (0: none): the control thread sets it
	 * under lock; the flush thread reads it without (collect_window_flush_ms). */
	atomic_ullong watch;

	/* A window opened while CUPTI waits to be attached (s->cupti_deferred): the window code
	 * does not attach CUPTI itself (collect.c owns CUPTI: attaching registers the callbacks
	 * whose events open windows). It sets this and leaves the kinds off; whoever owns the
	 * thread that made the decision attaches (collect.c: the CUPTI callback, the C API, the
	 * flush thread, which also serves the trigger socket and the NVTX handlers when they wake
	 * it) and calls collect_window_cupti_ready. Set under lock, read without it. */
	atomic_int cupti_wanted;
	atomic_int crashing;           /* a fault signal is being handled */
	struct sigaction crash_old[4]; /* the handlers ours replaced (SIGSEGV, SIGBUS, ...) */
	int crash_installed[4];
	atomic_int crash_done;
};

/* One window's own file (a name with %n): an output, and so a consumer, of its own. */
struct collect_wout {
	uint64_t number;
	struct collect_output out;
	int err;
};

#define COLLECT_WW_MAX_OUTS 8

/* The writer thread's side of capture windows and the flight recorder (collect_wwriter.c):
 * owned by the writer thread, emptied when it ends. */
struct collect_wwriter {
	struct cuptrace_wfilter filt;
	int filt_ready;
	size_t synced; /* log entries whose opening the filter knows */
	/* Records that describe the run, copied for every file opened later. */
	CUpti_Activity **sticky;
	uint32_t *sticky_sizes;
	size_t nsticky, capsticky, capsticky_sizes;
	struct {
		int64_t tid;
		char name[64];
	} * names;
	size_t nnames, capnames;
	struct cuptrace_ring ring;
	int ring_ready;
	struct collect_wout outs[COLLECT_WW_MAX_OUTS];
	size_t nouts;
	int64_t *verd;
	size_t capverd;
	const CUpti_Activity **grp;
	uint32_t *grp_sizes;
	size_t capgrp, capgrp_sizes;
	int64_t last_dump_to; /* one file for every dump: a later dump starts after this */
	uint64_t dumps_written;
	/* The watched window's capture (out.cons.ops NULL: none open). */
	struct collect_wout watch;
};

struct collect_session {
	pthread_mutex_t lock; /* serializes start/stop */
	atomic_int state;
	pid_t pid;
	char *path;
	int capture;
	size_t buffer_size;
	int flush_ms;
	int summary;
	int injected;     /* started by the CUDA driver's injection, not by the C API */
	int driver_mode;  /* CUPTRACE_DRIVER_* (common/options.h) */
	int runtime_mode; /* enum cuptrace_runtime_mode */
	/* Synchronizations from CUPTI's SYNCHRONIZATION kind (--sync-records cupti, or the
	 * flight recorder, whose ring holds CUPTI's buffers only), else from our callbacks
	 * (sync_watch.h). Set at the start. */
	int sync_cupti;
	/* API records switched on call by call (CUPTRACE_API_ENABLE=cbid, inject/kinds.h): only
	 * for a whole run the driver started. With capture windows, or started by the C API
	 * after CUDA, CUPTI 13.0 left kernels without their calls that way (tests/gpu_window_test,
	 * gpu_record_test's c_api cases), so those enable the kinds. Set at the start. */
	int api_by_cbid;
	unsigned
	    fault_every; /* CUPTRACE_FAULT_BUFFERS: refuse every n-th buffer request (drills) */
	atomic_uint buffer_requests;
	int64_t start_boot, start_real;
	int64_t t_finish_start;

	struct cuptrace_queue queue;
	pthread_t writer, flusher;
	int have_writer;
	atomic_int have_flusher; /* read by NVTX handlers waiting for it (collect_window.c) */
	int sigpipe[2];
	atomic_int stop_flusher;
	int dying_signal;

	/* Counters shared with CUPTI's threads. */
	atomic_ullong buffers, buffers_dropped, records_dropped, cupti_dropped;
	/* The tracer's own cost (collect_buffers.c): CPU in the buffer callbacks (any thread),
	 * buffers handed to CUPTI, and how many were alive at once (handed out, not yet freed;
	 * counted while no capture window or flight recorder keeps buffers). */
	atomic_ullong callbacks_cpu_ns, buffers_requested;
	atomic_llong buffers_live, buffers_live_peak;
	/* Each written by its thread before it ends, read after the join. */
	uint64_t writer_cpu_ns, flusher_cpu_ns;

	/* Owned by the writer thread. */
	struct collect_output out; /* the trace (not opened for a file per window) */
	int path_claimed;          /* the name was claimed by making out.path's (empty) file */
	/* Where the stream goes: every consumer in the list, through `to` (collect_consumers.c).
	 * Whole run: the trace's. Windows: the trace's, or none with a file per window (the
	 * windows' files are consumers of their own, collect_wwriter.c). */
	struct collect_consumers consumers;
	struct cuptrace_consumer to;
	struct cuptrace_u64map tids;
	const CUpti_Activity **recs;
	uint32_t *sizes;
	size_t rec_cap;
	uint64_t records, kind_counts[CUPTI_ACTIVITY_KIND_COUNT];
	uint64_t last_cupti_dropped, last_cuptrace_dropped;
	int write_err;
	uint64_t bytes_written;

	CUpti_SubscriberHandle subscriber;
	/* Capture windows that need no CUPTI callback to open (on demand, time, optimizer steps):
	 * CUPTI is not touched until the first window wants it (win.cupti_wanted, collect.c's
	 * cupti_attach_late; --cupti-early: only subscribed meanwhile), so waiting for a window
	 * costs what an untraced run costs. cupti_attached: it has been (under attach_lock after
	 * the start; read by the flush thread, the NVTX handlers and at the end). */
	int cupti_deferred;
	_Atomic int cupti_attached;
	/* Whole CUDA graph launches recorded (GRAPH_TRACE): --cuda-graphs graph where CUPTI can
	 * take it (collect.c's graph_trace_usable), set once at the start. */
	int graph_trace;
	/* Contexts on two devices seen (or counted at a late start): MEMCPY2 wanted (kinds.h). */
	_Atomic int multi_gpu;
	_Atomic int two_gpu_kinds_on; /* MEMCPY2 is on now (set where it is enabled, cleared off) */
	/* Graphs instantiated for launch from the GPU, counted node by node (application threads;
	 * collect_callbacks.c): CUPTI records none of their work then. */
	atomic_ullong device_launch_graphs;
	/* Serializes a late attach of CUPTI (collect.c's cupti_attach_late) between the threads
	 * that may do it: the CUPTI callback's, the C API's and the flush thread. Taken before
	 * win.lock, never while holding it. */
	pthread_mutex_t attach_lock;
	int atexit_done;
	int queue_ready;                          /* the queue outlives sessions (see start) */
	cuptrace_preload_register_fn preload_reg; /* libcuptrace_preload.so, when preloaded */
	struct sigaction old_int, old_term;
	int handlers_installed[2];
	struct collect_windows win; /* capture windows, under win.lock */
	struct collect_wwriter ww;  /* owned by the writer thread */
	/* Ids of NVTX start/end ranges (nvtxRangeStart*, nvtxDomainRangeStartEx). CUPTI's marker
	 * records look the same for push/pop and start/end ranges; the ids returned by the start
	 * calls tell them apart, so start/end ranges go on tracks of their own. Filled on
	 * application threads (collect_callbacks.c), drained by the writer; under its lock. */
	struct {
		pthread_mutex_t lock;
		uint64_t *ids;
		size_t n, cap;
		uint64_t total;
	} startend;
};

/* The one session of the process (collect_state.c defines it). Every function of src/inject is
 * handed the session it works on; only the trampolines read this pointer: the functions that
 * CUPTI, NVTX, the kernel (signals), atexit, libcuptrace_preload.so and the C API call, which
 * get no session of their own (each marked "trampoline"). Fields are owned as marked above;
 * the rest belong to whoever holds s->lock (start, stop) or to the finishing thread. */
extern struct collect_session *const collect_process_session;

/* Whether activity kind k goes on with the others (at the start, when a window opens): all but
 * GRAPH_TRACE unless s->graph_trace, SYNCHRONIZATION unless s->sync_cupti, and MEMCPY2 before a
 * second device has a context (kinds.h; the flush thread switches it on then). Notes MEMCPY2 on
 * when it does. */
static inline int collect_kind_wanted(struct collect_session *s, CUpti_ActivityKind k)
{
	if (k == CUPTI_ACTIVITY_KIND_GRAPH_TRACE)
		return s->graph_trace;
	if (k == CUPTI_ACTIVITY_KIND_SYNCHRONIZATION)
		return s->sync_cupti;
	if (!cuptrace_kind_needs_two_gpus(k))
		return 1;
	if (!atomic_load(&s->multi_gpu))
		return 0;
	atomic_store(&s->two_gpu_kinds_on, 1);
	return 1;
}

/* ---- collect_callbacks.c ---- */
/* What CUPTI's subscriber callback does (collect.c's trampoline calls it): NVTX start ids,
 * watched runtime calls, GPU metrics contexts, the calls that open windows. 1 for one of
 * those last (a window may want CUPTI attached now), else 0. */
int collect_callbacks_dispatch(struct collect_session *s, CUpti_CallbackDomain d,
                               CUpti_CallbackId id, const void *data);
/* Turns on the callbacks the capture windows watch (NVTX ranges, cudaProfilerStart/Stop). */
void collect_callbacks_windows(struct collect_session *s, CUpti_SubscriberHandle sub);
/* Node by node: watch for graphs instantiated for launch from the GPU (collect_callbacks.c). */
void collect_callbacks_graphs(struct collect_session *s, CUpti_SubscriberHandle sub);
/* Writer thread: hands the start/end range ids seen so far to the converter or capture. */
void collect_startend_drain(struct collect_session *s);
/* A new session: forgets the ids of the last one. */
void collect_startend_reset(struct collect_session *s);

/* ---- nvtx_watch.c (application threads) ---- */
/* An NVTX range was pushed (name NULL: not matchable) or popped on this thread; one was started
 * with this id (0: none) or ended: the window code learns of the ranges it follows. */
void collect_nvtx_pushed(struct collect_session *s, const char *name);
void collect_nvtx_popped(struct collect_session *s);
void collect_nvtx_started(struct collect_session *s, const char *name, uint64_t id);
void collect_nvtx_ended(struct collect_session *s, uint64_t id);
/* 1 once nvtx_watch.c's handlers are in NVTX's table (CUPTI's NVTX callbacks are not needed). */
int collect_nvtx_watching(void);
/* 1 if they are or will be: NVTX_INJECTION64_PATH names this library. */
int collect_nvtx_ours(void);
/* CUPTI is being attached (collect.c, before cupti_attached is set): CUPTI is given NVTX now
 * (until then it is not, so an unsubscribed CUPTI costs nothing). */
void collect_nvtx_cupti_attach(void);
/* Tests: a fake in place of libcupti's InitializeInjectionNvtx2. */
void collect_nvtx_set_cupti_init(int (*fn)(const void *(*get)(uint32_t)));

/* ---- collect_ranges.c (cuptrace_range_push/pop) ---- */
/* A range's marker record waiting for the writer, with the copy of its name it owns. */
struct collect_range_rec {
	CUpti_ActivityMarker2 m;
	char *name; /* m.name; NULL for an END */
};
/* Application threads: a named range begins / the thread's innermost one ends, as an NVTX
 * push/pop range would (a START/END marker pair while a session runs; the capture windows'
 * range and step rules through collect_nvtx_pushed/popped). 0; -EINVAL: name NULL, or a pop
 * with no range open on this thread. */
int collect_range_push(struct collect_session *s, const char *name);
int collect_range_pop(struct collect_session *s);
/* Writer thread: the records made since the last drain, in the order they were made; the
 * caller owns them and frees them with collect_ranges_release. */
size_t collect_ranges_drain(struct collect_range_rec **out);
void collect_ranges_release(struct collect_range_rec *recs, size_t n);
/* A session begins or ended: what is pending goes, and ranges open now get no END. */
void collect_ranges_reset(void);

/* ---- collect_stacks.c ---- */
/* Reads CUPTRACE_STACKS and turns on the callbacks of launch-type calls (at setup). */
void collect_stacks_setup(CUpti_SubscriberHandle sub);
/* From the subscriber callback: 1 if the call was one of ours (taken or passed over). */
int collect_stacks_callback(CUpti_CallbackDomain d, CUpti_CallbackId id, const void *data);
/* Writer thread: the new stacks and (correlation id, stack id) pairs to the capture or
 * converter, before the buffer whose records they describe. 0 or the first error. */
int collect_stacks_drain(struct collect_session *s);
/* Stops the host stack sampler (what it queued waits for the last drain). */
void collect_stacks_stop(void);
/* The counts as metadata (distinct stacks, launches that got none for want of room). */
void collect_stacks_meta(void (*put)(void *ctx, const char *k, const char *v), void *ctx);

/* ---- collect_buffers.c ---- */
void CUPTIAPI collect_buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records);
void CUPTIAPI collect_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                       size_t valid);
/* The writer thread (cuptrace_thread_start's fn); ends when the queue is closed and empty. */
void *collect_writer_main(void *arg);
/* The calling thread's CPU time in ns (0 if the clock cannot be read). */
uint64_t collect_thread_cpu_ns(void);

/* ---- collect_window.c (called by collect.c, collect_callbacks.c and the C API) ---- */
/* Reads the window settings; 1 if windows (or the flight recorder) are in use. Start, under
 * s->lock, before CUPTI is set up. */
int collect_window_setup(struct collect_session *s);
/* Whether setup_cupti should leave the activity kinds off (windows decide when they go on). */
int collect_window_defers(struct collect_session *s);
/* 1 when no window needs CUPTI's activity to open (on demand, time, steps, NVTX ranges where
 * nvtx_ours says nvtx_watch.c follows them, cudaProfilerStart/Stop with callbacks alone; no
 * ring, no GPU metrics): CUPTI's activity is left untouched until the first window opens. */
int collect_window_defers_cupti(struct collect_session *s, int nvtx_ours);
/* 1 when windows open on cudaProfilerStart/Stop (CUPTI's callbacks on those calls watch). */
int collect_window_watches_profiler(struct collect_session *s);
/* 1 while some activity kind is on (whole-run sessions: always). */
int collect_window_recording(struct collect_session *s);
/* After the session runs: the first decisions (a window open from the start), the control
 * socket, the crash handlers. */
void collect_window_begin(struct collect_session *s);
/* Flush thread: every wake-up. Returns the poll timeout (ms) it needs next. */
int collect_window_tick(struct collect_session *s, int flush_ms);
/* How often the flush thread hands CUPTI's buffers over: --flush-ms, or 200 ms while `top`
 * watches (0: only when a buffer is full). Lock-free. */
int collect_window_flush_ms(struct collect_session *s);
/* The fd the flush thread polls besides the signal pipe (-1: none). */
int collect_window_wake_fd(struct collect_session *s);
/* The finish (any thread): closes an open window, drains, asks for the last dump. Before the
 * writer is stopped. */
void collect_window_end(struct collect_session *s);
/* After the writer ended: stops the control socket, restores signal handlers, frees. */
void collect_window_free(struct collect_session *s);
/* Events from application threads (CUPTI callbacks, cuptrace_step, the C API). */
void collect_window_range_begin(struct collect_session *s, const char *name, uint64_t key,
                                int64_t tid);
void collect_window_range_end(struct collect_session *s, uint64_t key);
void collect_window_profiler(struct collect_session *s, int start);
void collect_window_step(struct collect_session *s);
/* Whether an NVTX range of this name ends a step (--step-range); whether the range window
 * follows ranges of this name (lock-free: the settings do not change while a session runs). */
int collect_window_is_step_range(struct collect_session *s, const char *name);
int collect_window_range_wanted(struct collect_session *s, const char *name);
/* From the environment alone (NVTX may start before the session): whether NVTX ranges open
 * windows or end steps (--capture-range range:..., --step-range). */
int collect_window_nvtx_wanted(void);
/* C API start/stop inside a windowed session: open / close a window. */
int collect_window_api(struct collect_session *s, int open);
/* A window wants CUPTI attached (s->win.cupti_wanted): lock-free, for the callers that act on
 * it after an event (collect.c). */
int collect_window_cupti_wanted(struct collect_session *s);
/* collect.c, after it attached CUPTI for a window (ok: 1, or 0 if that failed): the kinds go on
 * if a window is open now; whoever waits in collect_window_cupti_wait goes on. Any thread, not
 * holding s->win.lock. */
void collect_window_cupti_ready(struct collect_session *s, int ok);
/* The NVTX handlers (nvtx_watch.c), which cannot attach CUPTI themselves: waits until the flush
 * thread has (at most 5 s), so that the window is recording before the thread's next launch. */
void collect_window_cupti_wait(struct collect_session *s);
void collect_window_summary(struct collect_session *s);

/* ---- collect_wwriter.c (writer thread) ---- */
/* One CUPTI buffer through the windows: written, held, kept in the ring or dropped. Takes
 * ownership of buf. */
void collect_wwriter_buffer(struct collect_session *s, uint8_t *buf, size_t valid,
                            const CUpti_Activity **recs, const uint32_t *sizes, size_t n);
/* Records made by cuptrace (not in a CUPTI buffer: synchronizations, sync_watch.h; ranges,
 * collect_ranges.c) through the
 * capture windows' filter, as a buffer's are (not the flight recorder's ring). The caller keeps
 * the records (held ones are copied). */
void collect_wwriter_records(struct collect_session *s, const CUpti_Activity *const *recs,
                             const uint32_t *sizes, size_t n);
/* Writer thread, after every pop (taken: buffers popped so far): finishes windows and does
 * dumps whose records have all arrived. */
void collect_wwriter_poll(struct collect_session *s, uint64_t taken);
/* Writer thread, when it ends: what is left (held records, the final dump). */
void collect_wwriter_end(struct collect_session *s);
/* A thread's name, for the files opened later. */
void collect_wwriter_thread(struct collect_session *s, int64_t tid, const char *name);

/* ---- collect_output.c ---- */
/* What the tracer cost the traced process, for the summary and the trace's metadata. */
struct collect_cost {
	double writer_ms, compress_ms, flush_ms, callbacks_ms;
	double process_ms;             /* every thread of the process, the tracer's included */
	int by_zlib;                   /* chunks were compressed by zlib: no libdeflate */
	uint64_t requested, live_peak; /* CUPTI buffers; live_peak 0: not counted */
	size_t buffer_size;
	uint64_t queue_peak;
	size_t queue_cap;
};
/* After the writer and flush threads have ended. */
void collect_cost(struct collect_session *s, struct collect_cost *c);
/* The first line of a small /proc file into out ("?" if unreadable). */
void collect_read_comm(const char *path, char *out, size_t n);
/* Opens o's consumer for o->path: the capture writer, or the sink (file, OTLP or both) and the
 * converter over it; the file is written under a partial name beside it (output/recfile.h).
 * 0 or a negative errno (nothing left open or made). */
int collect_open_output(struct collect_session *s, struct collect_output *o);
/* Opens o's consumer as a capture written straight to o->path (no partial name: a watching
 * `top` tails it as it grows; never over a file there: -EEXIST). 0 or a negative errno. */
int collect_open_watch_output(struct collect_session *s, struct collect_output *o);
/* After the writers closed the file: keep puts it in place under o->path (an older file stays
 * where write_err says the trace was cut by a failed write: said once); else it is removed and
 * o->path is as it was. Returns where the trace is now (o->path, or its partial name when it
 * could not go in place), or NULL (removed, or no file opened). */
const char *collect_settle_output(struct collect_output *o, int keep, int write_err);
/* Start failed after collect_open_output: frees the writers and removes what they wrote. */
void collect_discard_output(struct collect_output *o);
/* Frees the consumer and the sink (after they finished, or to give up on them). */
void collect_release_output(struct collect_output *o);
/* The end of o's stream: the metadata known only at the end, the consumer finished, then the
 * sink. *t_converted (may be NULL): when the consumer was done, for a sink (0: no sink).
 * Returns the first error. */
int collect_finish_output(struct collect_session *s, struct collect_output *o,
                          int64_t *t_converted);
uint64_t collect_file_size(const char *path);
/* The first write error, reported once (writer thread, or the finisher after the writer),
 * naming the trace's file, or o's. */
void collect_note_write_err(struct collect_session *s, int err);
void collect_note_output_err(struct collect_session *s, const struct collect_output *o, int err);

#endif
