/* cuptrace_range_push/cuptrace_range_pop (include/cuptrace.h): named ranges without NVTX.
 *
 * Each range is what an NVTX push/pop range of that name would be, in both of the places NVTX
 * ranges matter:
 *  - the trace: a START and an END marker record (CUpti_ActivityMarker2, as CUPTI makes for
 *    nvtxRangePushA/nvtxRangePop: the calling thread's OS tid, the default domain, CUPTI's
 *    clock), handed to the writer like a CUPTI buffer's records (collect_buffers.c), so the
 *    converter, the capture writer and the capture windows' filter treat them exactly as
 *    CUPTI's own: a slice on the thread's track, nested with the thread's other ranges;
 *  - the capture windows: the push and the pop go through nvtx_watch.c's collect_nvtx_pushed/
 *    collect_nvtx_popped, which count the thread's depth together with its NVTX ranges and
 *    open and close windows of --capture-range range:NAME and end steps of --step-range.
 * Records are made only while a session runs (outside one, push and pop only keep the stack
 * straight); a pop makes an END only where its push made a START. With the flight recorder
 * (--ring) no records are made: its dumps re-read CUPTI's own buffers, which these are not
 * part of; the ranges still count as steps there (--step-range).
 *
 * Threads: push and pop run on application threads; the stack is per thread. Made records wait
 * in `pending` (under its lock) until the writer thread drains them, with their name copies;
 * the writer owns what it drained and frees it (collect_ranges_release) after handing it on
 * (consumers borrow records and their strings for the call only: convert/consumer.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "inject/collect_state.h"
#include "common/util.h"

/* The ids of these ranges' markers: above CUPTI's (which count up from 1 per process) and
 * below those of the windows' own markers (collect_wwriter.c's mark_window, 0x7f000000 on). */
#define RANGE_ID_BASE 0x40000000u
#define RANGE_ID_SPAN 0x3f000000u
/* Records waiting for the writer at most: a writer that stopped taking them (or a program
 * pushing in a tight loop faster than it writes) must not grow this without bound. */
#define PENDING_MAX (1u << 20)
/* Depth of the per-thread stack that remembers marker ids; deeper ranges still nest and pop
 * correctly (the depth is counted) but make no records. */
#define STACK_MAX 256

static struct {
	pthread_mutex_t lock;
	struct collect_range_rec *recs;
	size_t n, cap;
} pending = {.lock = PTHREAD_MUTEX_INITIALIZER};

static _Atomic uint32_t next_id;
/* Counts sessions (collect_ranges_reset): a range pushed in one session and popped in the
 * next gets no END, as its START went with the first. */
static _Atomic unsigned session_gen;

static __thread int depth;
static __thread uint32_t ids[STACK_MAX];  /* the START's marker id, 0: none was made */
static __thread unsigned gens[STACK_MAX]; /* session_gen when the START was made */

/* Queues one marker record; name NULL for an END. 0, or -ENOMEM / -ENOSPC (not queued). */
static int queue_marker(struct collect_session *s, uint32_t id, int end, const char *name,
                        uint64_t ts)
{
	struct collect_range_rec e;
	memset(&e, 0, sizeof(e));
	e.m.kind = CUPTI_ACTIVITY_KIND_MARKER;
	e.m.flags = end ? CUPTI_ACTIVITY_FLAG_MARKER_END : CUPTI_ACTIVITY_FLAG_MARKER_START;
	e.m.timestamp = ts;
	e.m.id = id;
	e.m.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
	e.m.objectId.pt.processId = (uint32_t)s->pid;
	e.m.objectId.pt.threadId = (uint32_t)syscall(SYS_gettid);
	if (name && !(e.name = strdup(name)))
		return -ENOMEM;
	e.m.name = e.name;
	pthread_mutex_lock(&pending.lock);
	int r = pending.n >= PENDING_MAX ? -ENOSPC
	                                 : CUPTRACE_GROW(pending.recs, pending.cap, pending.n + 1);
	if (!r)
		pending.recs[pending.n++] = e;
	pthread_mutex_unlock(&pending.lock);
	if (r) {
		free(e.name);
		atomic_fetch_add(&s->records_dropped, 1);
	}
	return r;
}

/* Whether a range pushed now is recorded (see the top of the file). Not in a forked child:
 * the session, and the writer that would take the records, are the parent's. */
static int recording(struct collect_session *s)
{
	return atomic_load(&s->state) == ST_RUNNING && !s->win.ring && getpid() == s->pid;
}

int collect_range_push(struct collect_session *s, const char *name)
{
	if (!name)
		return -EINVAL;
	/* The time first: a window this range opens opens after its START, as with NVTX. */
	uint64_t ts = (uint64_t)cuptrace_now_ns(CLOCK_BOOTTIME);
	uint32_t id = 0;
	if (recording(s) && depth >= 0 && depth < STACK_MAX) {
		id = RANGE_ID_BASE + atomic_fetch_add(&next_id, 1) % RANGE_ID_SPAN;
		if (queue_marker(s, id, 0, name, ts))
			id = 0; /* no START: no END either */
	}
	if (depth >= 0 && depth < STACK_MAX) {
		ids[depth] = id;
		gens[depth] = atomic_load(&session_gen);
	}
	depth++;
	collect_nvtx_pushed(s, name);
	return 0;
}

int collect_range_pop(struct collect_session *s)
{
	if (depth <= 0)
		return -EINVAL;
	uint64_t ts = (uint64_t)cuptrace_now_ns(CLOCK_BOOTTIME);
	depth--;
	uint32_t id = depth < STACK_MAX ? ids[depth] : 0;
	/* A START made in an earlier session went with it: no END now. */
	if (id && gens[depth] == atomic_load(&session_gen) && recording(s))
		queue_marker(s, id, 1, NULL, ts);
	collect_nvtx_popped(s);
	return 0;
}

size_t collect_ranges_drain(struct collect_range_rec **out)
{
	pthread_mutex_lock(&pending.lock);
	size_t n = pending.n;
	*out = pending.recs;
	pending.recs = NULL;
	pending.n = pending.cap = 0;
	pthread_mutex_unlock(&pending.lock);
	return n;
}

void collect_ranges_release(struct collect_range_rec *recs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(recs[i].name);
	free(recs);
}

void collect_ranges_reset(void)
{
	atomic_fetch_add(&session_gen, 1);
	struct collect_range_rec *recs;
	size_t n = collect_ranges_drain(&recs);
	collect_ranges_release(recs, n);
}
