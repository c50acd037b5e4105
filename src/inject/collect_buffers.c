/* CUPTI's buffers and the writer thread (see collect_state.h).
 *
 * Threads: CUPTI calls collect_buffer_requested on application threads and
 * collect_buffer_completed on its own worker thread; both only allocate or enqueue and return
 * at once. The writer thread owns the converter, the sink (or the capture writer) and
 * everything they allocate. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "inject/collect_state.h"
#include "inject/gpumetrics.h"
#include "inject/runtime_watch.h"
#include "inject/sync_watch.h"
#include "common/log.h"

/* ---- CUPTI buffer callbacks (application and CUPTI threads: no blocking, no CUPTI flush) ---- */

/* Names of threads seen asking for buffers. With per-thread buffers CUPTI asks on the
 * application thread itself, so a short-lived thread is named while it is alive; the writer
 * reads /proc later only for threads not found here. */
#define NAMED_MAX 1024
static struct {
	pthread_mutex_t lock;
	int64_t tid[NAMED_MAX];
	char name[NAMED_MAX][16];
	size_t n;
} named = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void remember_thread_name(void)
{
	int64_t tid = (int64_t)syscall(SYS_gettid);
	char nm[16] = "";
	if (prctl(PR_GET_NAME, nm, 0, 0, 0))
		return;
	pthread_mutex_lock(&named.lock);
	size_t i;
	for (i = 0; i < named.n && named.tid[i] != tid; i++)
		;
	if (i < NAMED_MAX) {
		named.tid[i] = tid;
		memcpy(named.name[i], nm, sizeof(nm));
		if (i == named.n)
			named.n++;
	}
	pthread_mutex_unlock(&named.lock);
}

static int lookup_thread_name(int64_t tid, char *out, size_t n)
{
	int found = 0;
	pthread_mutex_lock(&named.lock);
	for (size_t i = 0; i < named.n; i++)
		if (named.tid[i] == tid) {
			snprintf(out, n, "%s", named.name[i]);
			found = 1;
			break;
		}
	pthread_mutex_unlock(&named.lock);
	return found;
}

uint64_t collect_thread_cpu_ns(void)
{
	struct timespec t;
	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t))
		return 0;
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* The callbacks' own CPU: two clock reads per buffer (a buffer holds thousands of records). */
static void add_callback_cpu(struct collect_session *s, uint64_t since)
{
	atomic_fetch_add(&s->callbacks_cpu_ns, collect_thread_cpu_ns() - since);
}

/* A CUPTI buffer is alive from its request until it is freed; only counted while no window or
 * flight recorder keeps buffers (they free them elsewhere). */
static int live_counted(struct collect_session *s)
{
	return !s->win.active && !s->win.ring;
}

static void buffer_freed(struct collect_session *s, uint8_t *buf)
{
	if (buf && live_counted(s))
		atomic_fetch_sub(&s->buffers_live, 1);
	free(buf);
}

static void request_one(struct collect_session *s, uint8_t **buffer, size_t *size,
                        size_t *max_records)
{
	remember_thread_name();
	/* Fault injection for the drills: a refused buffer makes CUPTI drop records, which it
	 * must count (cuptiActivityGetNumDroppedRecords) and cuptrace must report. */
	if (s->fault_every &&
	    atomic_fetch_add(&s->buffer_requests, 1) % s->fault_every == s->fault_every - 1) {
		*buffer = NULL;
		*size = 0;
		*max_records = 0;
		return;
	}
	/* calloc of a large block is fresh mmap'd memory: already zero, so CUPTI need not clear
	 * it on the application thread (ZEROED_OUT_ACTIVITY_BUFFER is set). */
	*buffer = calloc(1, s->buffer_size);
	*size = *buffer ? s->buffer_size : 0;
	*max_records = 0;
	if (!*buffer)
		return;
	atomic_fetch_add(&s->buffers_requested, 1);
	if (live_counted(s)) {
		long long live = atomic_fetch_add(&s->buffers_live, 1) + 1;
		long long peak = atomic_load(&s->buffers_live_peak);
		while (live > peak &&
		       !atomic_compare_exchange_weak(&s->buffers_live_peak, &peak, live))
			;
	}
}

void CUPTIAPI collect_buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
	struct collect_session *s = collect_process_session; /* trampoline: CUPTI buffer callback */
	uint64_t t = collect_thread_cpu_ns();
	request_one(s, buffer, size, max_records);
	add_callback_cpu(s, t);
}

static void complete_one(struct collect_session *s, CUcontext ctx, uint32_t stream, uint8_t *buffer,
                         size_t valid)
{
	/* Drops are counted per buffer queue: this buffer's context and stream (NULL, 0: the
	 * global queue). Reading the count resets it, so nothing is counted twice. */
	size_t dropped = 0;
	if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped)
		atomic_fetch_add(&s->cupti_dropped, dropped);
	int st = atomic_load(&s->state);
	if (!valid || (st != ST_RUNNING && st != ST_STOPPING)) {
		buffer_freed(s, buffer); /* a finished session's, or empty */
		return;
	}
	atomic_fetch_add(&s->buffers, 1);
	struct cuptrace_qitem it = {buffer, valid};
	if (cuptrace_queue_push(&s->queue, it) == 0)
		return;
	/* The writer is behind: drop this buffer, but count what was in it. */
	uint64_t n = 0;
	CUpti_Activity *r = NULL;
	while (cuptiActivityGetNextRecord(buffer, valid, &r) == CUPTI_SUCCESS)
		n++;
	atomic_fetch_add(&s->buffers_dropped, 1);
	atomic_fetch_add(&s->records_dropped, n);
	buffer_freed(s, buffer);
}

void CUPTIAPI collect_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                       size_t valid)
{
	struct collect_session *s = collect_process_session; /* trampoline: CUPTI buffer callback */
	(void)size;
	uint64_t t = collect_thread_cpu_ns();
	complete_one(s, ctx, stream, buffer, valid);
	add_callback_cpu(s, t);
}

/* ---- writer thread ---- */

static void note_thread(struct collect_session *s, int64_t tid)
{
	int created;
	if (!tid || !cuptrace_u64map_put(&s->tids, (uint64_t)tid, &created) || !created)
		return;
	char path[64], name[64];
	/* /proc first: it has the current name; the remembered one if the thread is gone. */
	snprintf(path, sizeof(path), "/proc/%d/task/%lld/comm", (int)s->pid, (long long)tid);
	collect_read_comm(path, name, sizeof(name));
	if (!strcmp(name, "?"))
		lookup_thread_name(tid, name, sizeof(name));
	if (!strcmp(name, "?"))
		snprintf(name, sizeof(name), "thread %lld", (long long)tid);
	cuptrace_consumer_thread_name(&s->to, tid, name);
	collect_wwriter_thread(s, tid, name); /* for window files opened later */
}

static int64_t record_tid(const CUpti_Activity *r)
{
	switch (r->kind) {
	case CUPTI_ACTIVITY_KIND_RUNTIME:
	case CUPTI_ACTIVITY_KIND_DRIVER:
	case CUPTI_ACTIVITY_KIND_INTERNAL_LAUNCH_API:
		return ((const CUpti_ActivityAPI *)r)->threadId;
	case CUPTI_ACTIVITY_KIND_MARKER: {
		const CUpti_ActivityMarker2 *m = (const CUpti_ActivityMarker2 *)r;
		return m->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD ? m->objectId.pt.threadId : 0;
	}
	default:
		return 0;
	}
}

/* Records cuptrace made itself (not a CUPTI buffer's), n of them stride bytes apart from
 * first, each size bytes, of this kind: counted, and sent as one batch the way a CUPTI buffer's
 * would go, through the capture windows where there are windows. markers: they are marker
 * records whose threads are noted, as a buffer's are. The caller keeps the records. */
static void send_own_records(struct collect_session *s, CUpti_ActivityKind kind, const void *first,
                             size_t stride, uint32_t size, size_t n, int markers)
{
	const CUpti_Activity **ptrs = malloc(n * sizeof(*ptrs));
	uint32_t *sizes = malloc(n * sizeof(*sizes));
	if (ptrs && sizes) {
		for (size_t i = 0; i < n; i++) {
			ptrs[i] = (const CUpti_Activity *)((const char *)first + i * stride);
			sizes[i] = size;
			if (markers)
				note_thread(
				    s,
				    ((const CUpti_ActivityMarker2 *)ptrs[i])->objectId.pt.threadId);
		}
		s->kind_counts[kind] += n;
		s->records += n;
		if (s->win.active)
			collect_wwriter_records(s, ptrs, sizes, n);
		else
			collect_note_write_err(s,
			                       cuptrace_consumer_records(&s->to, ptrs, sizes, n));
	} else {
		atomic_fetch_add(&s->records_dropped, n);
	}
	free(ptrs);
	free(sizes);
}

/* cuptrace_range_push/pop's marker records (collect_ranges.c), as one batch of their own. */
static void handle_ranges(struct collect_session *s)
{
	struct collect_range_rec *e;
	size_t n = collect_ranges_drain(&e);
	if (!n)
		return;
	send_own_records(s, CUPTI_ACTIVITY_KIND_MARKER, &e[0].m, sizeof(e[0]), sizeof(e[0].m), n,
	                 1);
	collect_ranges_release(e, n);
}

/* Returns 1 when the buffer was taken (by the windows or the flight recorder), else the
 * caller frees it. */
static int handle_buffer(struct collect_session *s, uint8_t *buf, size_t valid)
{
	collect_startend_drain(s); /* before the markers that may use them */
	handle_ranges(s);
	/* Before the API and GPU records that name them. */
	collect_note_write_err(s, collect_stacks_drain(s));
	size_t n = 0;
	CUpti_Activity *r = NULL;
	while (cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS) {
		if (n == s->rec_cap) {
			/* Both arrays grow together; a failed second one leaves the first bigger
			 * than rec_cap says, which is harmless. */
			size_t cap = s->rec_cap, cap2 = s->rec_cap;
			if (CUPTRACE_GROW(s->recs, cap, n + 1) ||
			    CUPTRACE_GROW(s->sizes, cap2, n + 1)) {
				atomic_fetch_add(&s->records_dropped, 1);
				break;
			}
			s->rec_cap = cap < cap2 ? cap : cap2;
		}
		s->recs[n++] = r;
	}
	/* A record's size is the distance to the next one; the last one runs to validSize. */
	for (size_t i = 0; i < n; i++) {
		const uint8_t *end = i + 1 < n ? (const uint8_t *)s->recs[i + 1] : buf + valid;
		s->sizes[i] = (uint32_t)(end - (const uint8_t *)s->recs[i]);
		if ((unsigned)s->recs[i]->kind < CUPTI_ACTIVITY_KIND_COUNT)
			s->kind_counts[s->recs[i]->kind]++;
		if (!s->sync_cupti && (s->recs[i]->kind == CUPTI_ACTIVITY_KIND_RUNTIME ||
		                       s->recs[i]->kind == CUPTI_ACTIVITY_KIND_DRIVER))
			cuptrace_sync_watch_api_seen((const CUpti_ActivityAPI *)s->recs[i]);
		note_thread(s, record_tid(s->recs[i]));
	}
	s->records += n;
	if (s->win.active || s->win.ring) {
		collect_wwriter_buffer(s, buf, valid, s->recs, s->sizes, n);
		return 1;
	}
	collect_note_write_err(s, cuptrace_consumer_records(&s->to, s->recs, s->sizes, n));
	return 0;
}

/* Trivial runtime calls worth keeping (runtime_watch.h), as one batch of their own. */
static void handle_kept_calls(struct collect_session *s)
{
	CUpti_ActivityAPI *recs;
	size_t n = cuptrace_runtime_watch_drain(&recs);
	if (!n)
		return;
	const CUpti_Activity **ptrs = malloc(n * sizeof(*ptrs));
	uint32_t *sizes = malloc(n * sizeof(*sizes));
	if (ptrs && sizes) {
		for (size_t i = 0; i < n; i++) {
			ptrs[i] = (const CUpti_Activity *)&recs[i];
			sizes[i] = sizeof(recs[i]);
			note_thread(s, recs[i].threadId);
			if (!s->sync_cupti) /* a synchronization timed by callbacks may go now */
				cuptrace_sync_watch_api_seen(&recs[i]);
		}
		s->kind_counts[CUPTI_ACTIVITY_KIND_RUNTIME] += n;
		s->records += n;
		collect_note_write_err(s, cuptrace_consumer_records(&s->to, ptrs, sizes, n));
	} else {
		atomic_fetch_add(&s->records_dropped, n);
	}
	free(ptrs);
	free(sizes);
	free(recs);
}

/* Synchronizations from our callbacks (sync_watch.h) whose calls' records have gone (all: every
 * one, at the end), after them: as one batch, through the windows when there are any. */
static void handle_syncs(struct collect_session *s, int all)
{
	if (s->sync_cupti)
		return;
	CUpti_ActivitySynchronization2 *recs;
	size_t n = cuptrace_sync_watch_ready(&recs, all);
	if (!n)
		return;
	send_own_records(s, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, recs, sizeof(recs[0]),
	                 sizeof(recs[0]), n, 0);
	free(recs);
}

static void report_dropped(struct collect_session *s)
{
	uint64_t a = atomic_load(&s->cupti_dropped), b = atomic_load(&s->records_dropped);
	if (a == s->last_cupti_dropped && b == s->last_cuptrace_dropped)
		return;
	s->last_cupti_dropped = a;
	s->last_cuptrace_dropped = b;
	cuptrace_consumer_dropped(&s->to, a, b);
}

void *collect_writer_main(void *arg)
{
	/* Named cuptrace-*: `top` counts the tracer's own CPU by these names. */
	prctl(PR_SET_NAME, "cuptrace-writer", 0, 0, 0);
	struct collect_session *s = arg;
	uint64_t taken = 0;
	for (;;) {
		struct cuptrace_qitem it;
		/* Windows wait for the writer to take a flush's buffers: look often while any is
		 * waiting (collect_wwriter_poll), else once a flush period. */
		int wait = s->flush_ms > 0 ? s->flush_ms : 1000;
		if ((s->win.active || s->win.ring) && wait > 50)
			wait = 50;
		int r = cuptrace_queue_pop(&s->queue, &it, wait);
		if (r < 0)
			break;
		if (!s->sync_cupti)
			cuptrace_sync_watch_take(); /* before the buffer that may hold their calls
			                             */
		if (r == 1) {
			taken++;
			if (!handle_buffer(s, it.buf, it.valid))
				buffer_freed(s, it.buf);
			handle_syncs(s, 0);
			report_dropped(s);
		}
		handle_ranges(s); /* before the poll finishes a window they belong to */
		collect_wwriter_poll(s, taken);
		handle_kept_calls(s);
		collect_note_write_err(s, cuptrace_gm_drain(&s->to));
		/* Idle or not, hand buffered bytes to the file about once a flush period, so a
		 * SIGKILL loses at most that much. */
		collect_note_write_err(s, cuptrace_consumer_flush(&s->to));
	}
	handle_kept_calls(s);
	handle_ranges(s);
	if (!s->sync_cupti)
		cuptrace_sync_watch_take();
	handle_syncs(s, 1);
	report_dropped(s);
	collect_wwriter_end(s);
	s->writer_cpu_ns = collect_thread_cpu_ns();
	return NULL;
}
