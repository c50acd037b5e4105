/* What the parts of the tracing session share (collect.c: life cycle; collect_buffers.c: CUPTI
 * buffers and the writer thread; collect_callbacks.c: the subscriber callback and NVTX start/end
 * ids; collect_output.c: the trace's output and metadata). Private to src/collect.
 *
 * Calls go one way: collect.c -> collect_buffers.c -> collect_callbacks.c, collect_output.c;
 * collect.c -> collect_callbacks.c, collect_output.c. Shared state is the one session below. */
#ifndef CUPTRACE_COLLECT_STATE_H
#define CUPTRACE_COLLECT_STATE_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cupti.h>

#include "collect/preload.h"
#include "collect/queue.h"
#include "common/util.h"
#include "convert/capture.h"
#include "convert/convert.h"
#include "format/formats.h"

enum { ST_IDLE, ST_RUNNING, ST_STOPPING, ST_DONE };

struct collect_session {
	pthread_mutex_t lock; /* serializes start/stop */
	atomic_int state;
	pid_t pid;
	char *path;
	int capture;
	size_t buffer_size;
	int flush_ms;
	int summary;
	int injected; /* started by the CUDA driver's injection, not by the C API */
	int driver_all;
	int runtime_mode; /* enum cuptrace_runtime_mode */
	unsigned
	    fault_every; /* CUPTRACE_FAULT_BUFFERS: refuse every n-th buffer request (drills) */
	atomic_uint buffer_requests;
	int64_t start_boot, start_real;
	int64_t t_finish_start;

	struct cuptrace_queue queue;
	pthread_t writer, flusher;
	int have_writer, have_flusher;
	int sigpipe[2];
	atomic_int stop_flusher;
	int dying_signal;

	/* Counters shared with CUPTI's threads. */
	atomic_ullong buffers, buffers_dropped, records_dropped, cupti_dropped;

	/* Owned by the writer thread. */
	struct cuptrace_sink *sink;
	struct cuptrace_sink *otlp; /* --otlp: inside sink (a tee with the file, or alone) */
	struct cuptrace_converter *conv;
	struct cuptrace_capture_writer *cap;
	struct cuptrace_u64map tids;
	const CUpti_Activity **recs;
	uint32_t *sizes;
	size_t rec_cap;
	uint64_t records, kind_counts[CUPTI_ACTIVITY_KIND_COUNT];
	uint64_t last_cupti_dropped, last_cuptrace_dropped;
	int write_err;
	uint64_t bytes_written;

	CUpti_SubscriberHandle subscriber;
	int atexit_done;
	int queue_ready;                          /* the queue outlives sessions (see start) */
	cuptrace_preload_register_fn preload_reg; /* libcuptrace_preload.so, when preloaded */
	struct sigaction old_int, old_term;
	int handlers_installed[2];
};

/* The one session of the process (collect.c defines it). Fields are owned as marked above; the
 * rest belong to whoever holds sess.lock (start, stop) or to the finishing thread. */
extern struct collect_session sess;

/* ---- collect_callbacks.c ---- */
/* CUPTI's subscriber callback: NVTX start ids, watched runtime calls, GPU metrics contexts. */
void CUPTIAPI collect_subscriber_callback(void *ud, CUpti_CallbackDomain d, CUpti_CallbackId id,
                                          const void *data);
/* Writer thread: hands the start/end range ids seen so far to the converter or capture. */
void collect_startend_drain(void);
/* A new session: forgets the ids of the last one. */
void collect_startend_reset(void);

/* ---- collect_buffers.c ---- */
void CUPTIAPI collect_buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records);
void CUPTIAPI collect_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                       size_t valid);
/* The writer thread (cuptrace_thread_start's fn); ends when the queue is closed and empty. */
void *collect_writer_main(void *arg);
/* The first write error, reported once (writer thread, or the finisher after the writer). */
void collect_note_write_err(int err);

/* ---- collect_output.c ---- */
/* The first line of a small /proc file into out ("?" if unreadable). */
void collect_read_comm(const char *path, char *out, size_t n);
/* Opens the capture, or the sink (file, OTLP or both) and the converter, for sess.path. 0 or a
 * negative errno. */
int collect_open_output(void);
/* Start failed after collect_open_output: frees the writers and removes what they wrote. */
void collect_discard_output(void);
/* The metadata known only at the end, into the capture or converter (after the writer ended). */
void collect_late_meta(void);
uint64_t collect_file_size(const char *path);

#endif
