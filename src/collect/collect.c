/* The tracing session inside the traced process (see collect.h).
 *
 * Threads: CUPTI calls buffer_requested on application threads and buffer_completed on its own
 * worker thread; both only allocate or enqueue and return at once. One writer thread owns the
 * converter, the sink (or the capture writer) and everything they allocate. One flush thread
 * asks CUPTI for completed records every CUPTRACE_FLUSH_MS and turns SIGINT/SIGTERM into an
 * orderly finish. Finalization runs exactly once, in the process that started the session
 * (a forked child inherits the atexit handler but must not touch CUPTI: it would hang). */
#define _GNU_SOURCE
#include "collect/collect.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stddef.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <cupti.h>

#include "collect/api_enable.h"
#include "collect/gpumetrics.h"
#include "collect/collect_otlp.h"
#include "collect/preload.h"
#include "collect/queue.h"
#include "collect/runtime_watch.h"
#include "common/log.h"
#include "common/privacy.h"
#include "common/util.h"
#include "convert/capture.h"
#include "convert/convert.h"
#include "format/formats.h"
#include "format/otlp.h"

#ifndef CUPTRACE_VERSION
#define CUPTRACE_VERSION "0.1.0"
#endif

#include "collect/kinds.h"

enum { ST_IDLE, ST_RUNNING, ST_STOPPING, ST_DONE };

static struct session {
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
} sess = {.lock = PTHREAD_MUTEX_INITIALIZER, .sigpipe = {-1, -1}};

/* Ids of NVTX start/end ranges (nvtxRangeStart*, nvtxDomainRangeStartEx). CUPTI's marker
 * records look the same for push/pop and start/end ranges; the ids returned by the start calls
 * tell them apart, so start/end ranges go on tracks of their own. Filled on application
 * threads, drained by the writer. */
static struct {
	pthread_mutex_t lock;
	uint64_t *ids;
	size_t n, cap;
	uint64_t total;
} startend = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void nvtx_callback(const CUpti_NvtxData *nd)
{
	if (!nd->functionReturnValue)
		return;
	uint64_t rid = *(const uint64_t *)nd->functionReturnValue; /* nvtxRangeId_t */
	if (!rid)
		return;
	pthread_mutex_lock(&startend.lock);
	if (startend.n == startend.cap) {
		size_t cap = startend.cap ? startend.cap * 2 : 256;
		uint64_t *n = realloc(startend.ids, cap * sizeof(uint64_t));
		if (n) {
			startend.ids = n;
			startend.cap = cap;
		}
	}
	if (startend.n < startend.cap) {
		startend.ids[startend.n++] = rid;
		startend.total++;
	}
	pthread_mutex_unlock(&startend.lock);
}

/* The one subscriber callback CUPTI allows: NVTX start calls, and the trivial runtime calls
 * watched while their records are off (runtime_watch.h). Application threads. */
static void CUPTIAPI subscriber_callback(void *ud, CUpti_CallbackDomain d, CUpti_CallbackId id,
                                         const void *data)
{
	if (!data)
		return;
	if (d == CUPTI_CB_DOMAIN_RUNTIME_API)
		cuptrace_runtime_watch_callback(id, data);
	else if (d == CUPTI_CB_DOMAIN_NVTX)
		nvtx_callback(data);
	else if (d == CUPTI_CB_DOMAIN_RESOURCE)
		cuptrace_gm_on_callback(d, id, data);
}

/* Writer thread: hands the start/end range ids seen so far to the converter or capture. */
static void drain_startend(void)
{
	pthread_mutex_lock(&startend.lock);
	size_t n = startend.n;
	uint64_t *ids = n ? malloc(n * sizeof(uint64_t)) : NULL;
	if (ids)
		memcpy(ids, startend.ids, n * sizeof(uint64_t));
	startend.n = 0;
	pthread_mutex_unlock(&startend.lock);
	if (!ids)
		return;
	if (sess.cap)
		cuptrace_capture_nvtx_startend(sess.cap, ids, n);
	else if (sess.conv)
		cuptrace_converter_nvtx_startend(sess.conv, ids, n);
	free(ids);
}

static uint64_t CUPTIAPI boottime_now(void)
{
	/* Perfetto's default trace clock; unlike CUPTI's default (REALTIME), NTP cannot step it. */
	return (uint64_t)cuptrace_now_ns(CLOCK_BOOTTIME);
}

static const char *cupti_err(CUptiResult r)
{
	const char *s = NULL;
	if (cuptiGetResultString(r, &s) != CUPTI_SUCCESS || !s)
		s = "unknown CUPTI error";
	return s;
}

static size_t env_size(const char *name, size_t def, size_t min, size_t max)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return def;
	char *end;
	unsigned long long x = strtoull(v, &end, 10);
	if (*end || x < min || x > max) {
		cuptrace_warn("ignoring %s=%s (expected a number from %zu to %zu)", name, v, min,
		              max);
		return def;
	}
	return (size_t)x;
}

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

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
	remember_thread_name();
	/* Fault injection for the drills: a refused buffer makes CUPTI drop records, which it
	 * must count (cuptiActivityGetNumDroppedRecords) and cuptrace must report. */
	if (sess.fault_every &&
	    atomic_fetch_add(&sess.buffer_requests, 1) % sess.fault_every == sess.fault_every - 1) {
		*buffer = NULL;
		*size = 0;
		*max_records = 0;
		return;
	}
	/* calloc of a large block is fresh mmap'd memory: already zero, so CUPTI need not clear
	 * it on the application thread (ZEROED_OUT_ACTIVITY_BUFFER is set). */
	*buffer = calloc(1, sess.buffer_size);
	*size = *buffer ? sess.buffer_size : 0;
	*max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                      size_t valid)
{
	/* Drops are counted per buffer queue: this buffer's context and stream (NULL, 0: the
	 * global queue). Reading the count resets it, so nothing is counted twice. */
	size_t dropped = 0;
	if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped)
		atomic_fetch_add(&sess.cupti_dropped, dropped);
	int st = atomic_load(&sess.state);
	if (!valid || (st != ST_RUNNING && st != ST_STOPPING)) {
		free(buffer); /* a finished session's, or empty */
		return;
	}
	atomic_fetch_add(&sess.buffers, 1);
	struct cuptrace_qitem it = {buffer, valid};
	if (cuptrace_queue_push(&sess.queue, it) == 0)
		return;
	/* The writer is behind: drop this buffer, but count what was in it. */
	uint64_t n = 0;
	CUpti_Activity *r = NULL;
	while (cuptiActivityGetNextRecord(buffer, valid, &r) == CUPTI_SUCCESS)
		n++;
	atomic_fetch_add(&sess.buffers_dropped, 1);
	atomic_fetch_add(&sess.records_dropped, n);
	free(buffer);
}

/* ---- writer thread ---- */

static void read_comm(const char *path, char *out, size_t n)
{
	snprintf(out, n, "?");
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t k = read(fd, out, n - 1);
	close(fd);
	if (k <= 0) {
		snprintf(out, n, "?");
		return;
	}
	out[k] = 0;
	char *nl = strchr(out, '\n');
	if (nl)
		*nl = 0;
}

static void note_thread(int64_t tid)
{
	int created;
	if (!tid || !cuptrace_u64map_put(&sess.tids, (uint64_t)tid, &created) || !created)
		return;
	char path[64], name[64];
	/* /proc first: it has the current name; the remembered one if the thread is gone. */
	snprintf(path, sizeof(path), "/proc/%d/task/%lld/comm", (int)sess.pid, (long long)tid);
	read_comm(path, name, sizeof(name));
	if (!strcmp(name, "?"))
		lookup_thread_name(tid, name, sizeof(name));
	if (!strcmp(name, "?"))
		snprintf(name, sizeof(name), "thread %lld", (long long)tid);
	if (sess.cap)
		cuptrace_capture_thread(sess.cap, tid, name);
	else if (sess.conv)
		cuptrace_converter_thread_name(sess.conv, tid, name);
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

/* The first write error is the one reported, once, whenever it shows (a full disk shows at a
 * periodic write or only at the end); what was written before it still loads. Writer thread,
 * or the finishing thread once the writer has ended. */
static void note_write_err(int err)
{
	if (!err || sess.write_err)
		return;
	sess.write_err = err;
	cuptrace_err("writing %s failed: %s; the trace stops there (what was written before "
	             "loads)",
	             sess.path, strerror(-err));
}

static void handle_buffer(uint8_t *buf, size_t valid)
{
	drain_startend(); /* before the markers that may use them */
	size_t n = 0;
	CUpti_Activity *r = NULL;
	while (cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS) {
		if (n == sess.rec_cap) {
			size_t cap = sess.rec_cap ? sess.rec_cap * 2 : 65536;
			const CUpti_Activity **nr = realloc(sess.recs, cap * sizeof(*nr));
			uint32_t *ns = nr ? realloc(sess.sizes, cap * sizeof(*ns)) : NULL;
			if (nr)
				sess.recs = nr;
			if (!nr || !ns) {
				atomic_fetch_add(&sess.records_dropped, 1);
				break;
			}
			sess.sizes = ns;
			sess.rec_cap = cap;
		}
		sess.recs[n++] = r;
	}
	/* A record's size is the distance to the next one; the last one runs to validSize. */
	for (size_t i = 0; i < n; i++) {
		const uint8_t *end = i + 1 < n ? (const uint8_t *)sess.recs[i + 1] : buf + valid;
		sess.sizes[i] = (uint32_t)(end - (const uint8_t *)sess.recs[i]);
		if ((unsigned)sess.recs[i]->kind < CUPTI_ACTIVITY_KIND_COUNT)
			sess.kind_counts[sess.recs[i]->kind]++;
		note_thread(record_tid(sess.recs[i]));
	}
	sess.records += n;
	int err = 0;
	if (sess.cap)
		err = cuptrace_capture_records(sess.cap, sess.recs, sess.sizes, n);
	else if (sess.conv)
		err = cuptrace_converter_add(sess.conv, sess.recs, n);
	note_write_err(err);
}

/* Trivial runtime calls worth keeping (runtime_watch.h), as one batch of their own. */
static void handle_kept_calls(void)
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
			note_thread(recs[i].threadId);
		}
		sess.kind_counts[CUPTI_ACTIVITY_KIND_RUNTIME] += n;
		sess.records += n;
		int err = sess.cap    ? cuptrace_capture_records(sess.cap, ptrs, sizes, n)
		          : sess.conv ? cuptrace_converter_add(sess.conv, ptrs, n)
		                      : 0;
		note_write_err(err);
	} else {
		atomic_fetch_add(&sess.records_dropped, n);
	}
	free(ptrs);
	free(sizes);
	free(recs);
}

static void report_dropped(void)
{
	uint64_t a = atomic_load(&sess.cupti_dropped), b = atomic_load(&sess.records_dropped);
	if (a == sess.last_cupti_dropped && b == sess.last_cuptrace_dropped)
		return;
	sess.last_cupti_dropped = a;
	sess.last_cuptrace_dropped = b;
	if (sess.cap)
		cuptrace_capture_dropped(sess.cap, a, b);
	else if (sess.conv)
		cuptrace_converter_dropped(sess.conv, a, b);
}

static void *writer_main(void *arg)
{
	for (;;) {
		struct cuptrace_qitem it;
		int r =
		    cuptrace_queue_pop(&sess.queue, &it, sess.flush_ms > 0 ? sess.flush_ms : 1000);
		if (r < 0)
			break;
		if (r == 1) {
			handle_buffer(it.buf, it.valid);
			free(it.buf);
			report_dropped();
		}
		handle_kept_calls();
		note_write_err(cuptrace_gm_drain(sess.conv, sess.cap));
		/* Idle or not, hand buffered bytes to the file about once a flush period, so a
		 * SIGKILL loses at most that much. */
		if (sess.cap)
			note_write_err(cuptrace_capture_flush(sess.cap));
		else if (sess.sink && sess.sink->ops->tick)
			note_write_err(sess.sink->ops->tick(sess.sink));
	}
	handle_kept_calls();
	report_dropped();
	return NULL;
}

/* ---- flush thread: periodic CUPTI flush, and SIGINT/SIGTERM turned into a clean finish ---- */

static void finish_session(void);

static void on_signal(int sig)
{
	/* Async-signal-safe only: put the default action back (a second signal kills at once),
	 * and wake the flush thread, which finishes the trace and re-raises the signal. */
	struct sigaction dfl = {.sa_handler = SIG_DFL};
	sigaction(sig, &dfl, NULL);
	unsigned char b = (unsigned char)sig;
	ssize_t w = write(sess.sigpipe[1], &b, 1);
	(void)w;
}

static void *flusher_main(void *arg)
{
	while (!atomic_load(&sess.stop_flusher)) {
		struct pollfd p = {.fd = sess.sigpipe[0], .events = POLLIN};
		int r = poll(&p, 1, sess.flush_ms > 0 ? sess.flush_ms : 1000);
		if (atomic_load(&sess.stop_flusher))
			break;
		if (r > 0 && (p.revents & POLLIN)) {
			unsigned char sig = 0;
			if (read(sess.sigpipe[0], &sig, 1) == 1 && sig) {
				sess.dying_signal = sig;
				finish_session();
				/* The handler already restored SIG_DFL: die as the program would.
				 */
				kill(getpid(), sig);
				return NULL;
			}
		}
		if (sess.flush_ms > 0)
			cuptiActivityFlushAll(0);
	}
	return NULL;
}

static void install_signal_handlers(void)
{
	const char *v = getenv("CUPTRACE_SIGNALS");
	if (v && !strcmp(v, "0"))
		return;
	if (pipe2(sess.sigpipe, O_CLOEXEC | O_NONBLOCK)) {
		sess.sigpipe[0] = sess.sigpipe[1] = -1;
		return;
	}
	static const int sigs[2] = {SIGINT, SIGTERM};
	struct sigaction *olds[2] = {&sess.old_int, &sess.old_term};
	for (int i = 0; i < 2; i++) {
		/* Only where the program left the default: a program with its own handler (Python's
		 * KeyboardInterrupt) exits through atexit, where the trace is finished anyway. */
		if (sigaction(sigs[i], NULL, olds[i]) || olds[i]->sa_handler != SIG_DFL)
			continue;
		struct sigaction sa = {.sa_handler = on_signal, .sa_flags = SA_RESTART};
		sigemptyset(&sa.sa_mask);
		if (!sigaction(sigs[i], &sa, NULL))
			sess.handlers_installed[i] = 1;
	}
}

static void remove_signal_handlers(void)
{
	static const int sigs[2] = {SIGINT, SIGTERM};
	for (int i = 0; i < 2; i++) {
		if (!sess.handlers_installed[i])
			continue;
		struct sigaction cur;
		/* Put the default back only if our handler is still the one installed. */
		if (!sigaction(sigs[i], NULL, &cur) && cur.sa_handler == on_signal) {
			struct sigaction dfl = {.sa_handler = SIG_DFL};
			sigaction(sigs[i], &dfl, NULL);
		}
		sess.handlers_installed[i] = 0;
	}
}

/* ---- metadata ---- */

static char *read_cmdline(void)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)getpid());
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return strdup("?");
	char buf[8192];
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return strdup("?");
	for (ssize_t i = 0; i < n - 1; i++)
		if (!buf[i])
			buf[i] = ' ';
	buf[n] = 0;
	return strdup(buf);
}

struct kv {
	char key[40];
	char val[512];
};

static size_t collect_meta(struct kv *m, size_t max)
{
	size_t n = 0;
#define ADD(k, ...)                                                                                \
	do {                                                                                       \
		if (n < max) {                                                                     \
			snprintf(m[n].key, sizeof(m[n].key), "%s", k);                             \
			snprintf(m[n].val, sizeof(m[n].val), __VA_ARGS__);                         \
			n++;                                                                       \
		}                                                                                  \
	} while (0)
	char host[256] = "?";
	gethostname(host, sizeof(host) - 1);
	ADD("pid", "%d", (int)sess.pid);
	/* Where the launcher says: the process's place in the job (merging ranks needs it). */
	struct cuptrace_rank rk = cuptrace_launcher_rank();
	if (rk.rank >= 0) {
		ADD("rank", "%d", rk.rank);
		if (rk.local_rank >= 0)
			ADD("local_rank", "%d", rk.local_rank);
		if (rk.world_size >= 0)
			ADD("world_size", "%d", rk.world_size);
		ADD("launcher", "%s", rk.launcher);
	}
	char comm[64];
	read_comm("/proc/self/comm", comm, sizeof(comm));
	ADD("process_name", "%s", comm);
	ADD("hostname", "%s", host);
	char *cmd = read_cmdline();
	ADD("cmdline", "%s", cmd ? cmd : "?");
	free(cmd);
	ADD("start_realtime_ns", "%lld", (long long)sess.start_real);
	ADD("start_boottime_ns", "%lld", (long long)sess.start_boot);
	/* Which boot of which machine BOOTTIME counts from: traces with the same boot id share
	 * one BOOTTIME, so `merge --ranks` lines them up exactly. */
	char boot_id[64];
	read_comm("/proc/sys/kernel/random/boot_id", boot_id, sizeof(boot_id));
	if (strcmp(boot_id, "?"))
		ADD("boot_id", "%s", boot_id);
	time_t secs = (time_t)(sess.start_real / 1000000000);
	struct tm tm;
	char iso[64];
	gmtime_r(&secs, &tm);
	strftime(iso, sizeof(iso), "%Y-%m-%dT%H:%M:%SZ", &tm);
	ADD("start_time", "%s", iso);
	ADD("cuptrace_version", "%s", CUPTRACE_VERSION);
	uint32_t cv = 0;
	if (cuptiGetVersion(&cv) == CUPTI_SUCCESS)
		ADD("cupti_version", "%u", cv);
	ADD("cupti_api_version_built", "%u", (unsigned)CUPTI_API_VERSION);
	/* The driver is loaded (it is the one injecting us); ask it without linking libcuda. */
	int (*drv)(int *) =
	    (int (*)(int *))cuptrace_loaded_sym("libcuda.so.1", "cuDriverGetVersion");
	int dv = 0;
	if (drv && drv(&dv) == 0)
		ADD("cuda_driver_api_version", "%d.%d", dv / 1000, (dv % 1000) / 10);
	char drvline[256];
	read_comm("/proc/driver/nvidia/version", drvline, sizeof(drvline));
	char *k = strstr(drvline, "Kernel Module");
	if (k) {
		char ver[64] = "";
		if (sscanf(k, "Kernel Module for %*s %63s", ver) == 1 ||
		    sscanf(k, "Kernel Module %63s", ver) == 1)
			ADD("driver_version", "%s", ver);
	}
	struct utsname u;
	if (!uname(&u))
		ADD("os", "%s %s %s", u.sysname, u.release, u.machine);
	const char *tool_cmd = getenv("CUPTRACE_CMDLINE");
	if (tool_cmd)
		ADD("record_cmdline", "%s", tool_cmd);
	if (cuptrace_private_env()) { /* record --private: nothing that names the host or user */
		n = cuptrace_private_filter(m, n, sizeof(*m), offsetof(struct kv, key),
		                            offsetof(struct kv, val), sizeof(m->val));
		/* An empty host name, as the live writers get: "no host" in a converted capture
		 * too, where a capture with no host name at all reads as an unknown one ("?"). */
		ADD("hostname", "%s", "");
	}
#undef ADD
	return n;
}

/* ---- start / finish ---- */

static int open_output(void)
{
	const char *fmt = getenv("CUPTRACE_FORMAT");
	sess.capture =
	    (fmt && !strcmp(fmt, "capture")) || (!fmt && cuptrace_ends_with(sess.path, ".cupti"));
	struct kv meta[32];
	size_t nmeta = collect_meta(meta, 32);
	if (sess.capture) {
		if (cuptrace_collect_otlp_wanted())
			cuptrace_warn(
			    "OTLP needs a converted trace, not a raw capture: no spans are "
			    "sent (cuptrace convert %s --otlp URL sends them later)",
			    sess.path);
		sess.cap = cuptrace_capture_writer_open(sess.path);
		if (!sess.cap)
			return -errno;
		for (size_t i = 0; i < nmeta; i++)
			cuptrace_capture_meta(sess.cap, meta[i].key, meta[i].val);
		return cuptrace_capture_flush(sess.cap);
	}
	/* -o none: spans only. A collector that cannot be used costs the spans, not the file. */
	int none = !strcmp(sess.path, "none");
	sess.sink = none ? NULL : cuptrace_sink_open(sess.path, fmt, getenv("CUPTRACE_COMPRESS"));
	if (!none && !sess.sink)
		return -errno;
	sess.otlp = cuptrace_collect_otlp_wanted() ? cuptrace_collect_otlp_open() : NULL;
	if (none && !sess.otlp)
		return -ENOENT;
	if (sess.otlp)
		sess.sink = sess.sink ? cuptrace_tee_sink_new(sess.sink, sess.otlp) : sess.otlp;
	if (!sess.sink) {
		sess.otlp = NULL; /* the tee freed both */
		return -ENOMEM;
	}
	struct cuptrace_meta m[32];
	for (size_t i = 0; i < nmeta; i++)
		m[i] = (struct cuptrace_meta){.key = meta[i].key, .s = meta[i].val};
	char host[256] = "?", comm[64];
	gethostname(host, sizeof(host) - 1);
	read_comm("/proc/self/comm", comm, sizeof(comm));
	struct cuptrace_trace_info info = {
	    .pid = sess.pid,
	    .process_name = comm,
	    .hostname = cuptrace_private_env() ? "" : host, /* "": none; NULL: the writer's */
	    .start_realtime_ns = sess.start_real,
	    .start_boottime_ns = sess.start_boot,
	    .trace_uuid_hi =
	        cuptrace_hash64((uint64_t)sess.start_real ^ ((uint64_t)sess.pid << 32)),
	    .trace_uuid_lo = cuptrace_hash64((uint64_t)sess.start_boot +
	                                     cuptrace_hash_bytes(host, strlen(host))),
	    .meta = m,
	    .nmeta = nmeta,
	};
	struct cuptrace_convert_opts co = {.sz = sizeof(co),
	                                   .driver_all = sess.driver_all,
	                                   .runtime_all =
	                                       sess.runtime_mode == CUPTRACE_RUNTIME_ALL};
	sess.conv = cuptrace_converter_new(sess.sink, &info, &co);
	if (!sess.conv)
		return -ENOMEM;
	return 0;
}

/* Called by libcuptrace_preload.so just before exec or _exit in this process: neither runs
 * atexit handlers, so finish here. For exec, the path goes into the new image's environment
 * (CUPTRACE_TAKEN) so that it does not write over this trace. */
static void preload_hook(int why, char *path, size_t n)
{
	if (why == CUPTRACE_PRELOAD_EXEC && path && n)
		snprintf(path, n, "%s",
		         atomic_load(&sess.state) == ST_RUNNING && sess.path ? sess.path : "");
	finish_session();
}

/* Is path among the names earlier images of this process wrote (CUPTRACE_TAKEN)? */
static int path_taken(const char *path)
{
	const char *t = getenv(CUPTRACE_TAKEN_ENV);
	size_t n = strlen(path);
	while (t && *t) {
		const char *end = strchr(t, ':');
		size_t len = end ? (size_t)(end - t) : strlen(t);
		if (len == n && !memcmp(t, path, n))
			return 1;
		t = end ? end + 1 : NULL;
	}
	return 0;
}

static int path_claimed; /* written_this_run made sess.path's (empty) file */

/* Under `cuptrace record` (CUPTRACE_RECORD_START: when it started, CLOCK_REALTIME ns): did another
 * process of this run already take path? Claims it with O_EXCL when free, so of two processes
 * that arrive at one name (ranks' own CUDA subprocesses share their rank, so "%r" repeats) only
 * one keeps it. A file from before the run is an old trace, to be written over. */
static int written_this_run(const char *path)
{
	path_claimed = 0;
	const char *rs = getenv("CUPTRACE_RECORD_START");
	if (!rs || !*rs)
		return 0;
	int fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
	if (fd >= 0) {
		close(fd);
		path_claimed = 1;
		return 0;
	}
	struct stat sb;
	/* Nanoseconds: a quick rerun within one second must still write over the last run's. */
	return errno == EEXIST && !stat(path, &sb) &&
	       (long long)sb.st_mtim.tv_sec * 1000000000LL + sb.st_mtim.tv_nsec >= atoll(rs);
}

/* Everything a session counts starts from zero (the C API may run many sessions). */
static void reset_counters(void)
{
	atomic_store(&sess.buffers, 0);
	atomic_store(&sess.buffers_dropped, 0);
	atomic_store(&sess.records_dropped, 0);
	atomic_store(&sess.cupti_dropped, 0);
	atomic_store(&sess.stop_flusher, 0);
	sess.records = 0;
	memset(sess.kind_counts, 0, sizeof(sess.kind_counts));
	sess.last_cupti_dropped = sess.last_cuptrace_dropped = 0;
	sess.write_err = 0;
	sess.bytes_written = 0;
	sess.dying_signal = 0;
	pthread_mutex_lock(&startend.lock);
	startend.n = 0;
	pthread_mutex_unlock(&startend.lock);
}

static void atexit_handler(void)
{
	if (getpid() != sess.pid)
		return; /* a forked child: CUPTI is not usable here (flushing hangs) */
	finish_session();
}

static int setup_cupti(int injected)
{
	CUptiResult r;
	/* A libcupti older than the API we were built for (LD_LIBRARY_PATH, an old toolkit first
	 * on the path) may misread our structs: refuse, once, clearly. */
	uint32_t cv = 0;
	if (cuptiGetVersion(&cv) == CUPTI_SUCCESS && cv < 130000) {
		cuptrace_err(
		    "CUPTI %u.%u (%u) is older than 13.0, which cuptrace needs; no trace is "
		    "written (put the CUDA 13 toolkit's CUPTI first on the library path)",
		    cv / 10000, cv / 10 % 100, cv);
		return -ENOTSUP;
	}
	/* Claim the single CUPTI subscriber slot: a second CUPTI client in this process (nsys,
	 * ncu, compute-sanitizer, torch.profiler) would otherwise silently take our records. */
	CUpti_SubscriberParams sp;
	char old_name[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 8] = "";
	memset(&sp, 0, sizeof(sp));
	sp.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
	sp.subscriberName = "cuptrace";
	sp.oldSubscriberName = old_name;
	sp.oldSubscriberSize = sizeof(old_name);
	r = cuptiSubscribe_v2(&sess.subscriber, subscriber_callback, NULL, &sp);
	if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
		cuptrace_err(
		    "CUPTI is already in use by another tool in this process (%s); only one "
		    "CUPTI client can run per process on this driver. No trace is written.",
		    old_name[0] ? old_name : "unknown tool");
		return -EBUSY;
	}
	if (r != CUPTI_SUCCESS) {
		cuptrace_err("cannot start CUPTI: %s", cupti_err(r));
		return -EIO;
	}
	static const CUpti_CallbackId nvtx_start[] = {
	    CUPTI_CBID_NVTX_nvtxRangeStartA, CUPTI_CBID_NVTX_nvtxRangeStartW,
	    CUPTI_CBID_NVTX_nvtxRangeStartEx, CUPTI_CBID_NVTX_nvtxDomainRangeStartEx};
	for (size_t i = 0; i < sizeof(nvtx_start) / sizeof(nvtx_start[0]); i++)
		cuptiEnableCallback(1, sess.subscriber, CUPTI_CB_DOMAIN_NVTX, nvtx_start[i]);
	cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
	if ((r = cuptiActivityRegisterTimestampCallback(boottime_now)) != CUPTI_SUCCESS)
		cuptrace_warn("cannot set the CUPTI clock to BOOTTIME: %s", cupti_err(r));
	uint8_t one = 1;
	size_t sz = sizeof(one);
	cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &sz, &one);
	if ((r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed)) !=
	    CUPTI_SUCCESS) {
		cuptrace_err("cannot register CUPTI buffer callbacks: %s", cupti_err(r));
		return -EIO;
	}
	/* The start timestamp, on the clock CUPTI now uses. */
	sess.start_boot = cuptrace_now_ns(CLOCK_BOOTTIME);
	sess.start_real = cuptrace_now_ns(CLOCK_REALTIME);
	cuptrace_gm_setup(sess.subscriber); /* fails soft: says why itself */
	for (size_t i = 0; i < CUPTRACE_NKINDS; i++) {
		if (cuptrace_kinds[i] == CUPTI_ACTIVITY_KIND_RUNTIME ||
		    cuptrace_kinds[i] == CUPTI_ACTIVITY_KIND_DRIVER)
			continue; /* below, with their filters */
		/* Started after CUDA initialized (C API): devices and contexts already exist and
		 * CUPTI reports them only at creation, so ask for a dump of the existing ones. */
		int dump = !injected && (cuptrace_kinds[i] == CUPTI_ACTIVITY_KIND_DEVICE ||
		                         cuptrace_kinds[i] == CUPTI_ACTIVITY_KIND_CONTEXT ||
		                         cuptrace_kinds[i] == CUPTI_ACTIVITY_KIND_STREAM);
		r = dump ? cuptiActivityEnableAndDump(cuptrace_kinds[i])
		         : cuptiActivityEnable(cuptrace_kinds[i]);
		if (r != CUPTI_SUCCESS)
			cuptrace_warn("activity kind %d not recorded: %s", (int)cuptrace_kinds[i],
			              cupti_err(r));
	}
	/* API calls, less the runtime's own driver calls (device queries at init, kernel lookups
	 * before a first launch: hundreds nobody asked for) and the trivial runtime calls
	 * (runtime_filter.h), unless asked for. */
	int e = cuptrace_enable_api(sess.driver_all, sess.runtime_mode == CUPTRACE_RUNTIME_ALL,
	                            cuptrace_api_by_cbid());
	if (e)
		cuptrace_warn("API calls may not be recorded: %s", cupti_err((CUptiResult)-e));
	cuptrace_runtime_watch_setup(sess.subscriber,
	                             (enum cuptrace_runtime_mode)sess.runtime_mode);
	return 0;
}

/* `cuptrace record` learns that tracing failed to start in some process of the command (and
 * so exits non-zero though the program succeeded) from a line in CUPTRACE_ERROR_FILE. */
static void note_start_failure(int err)
{
	const char *f = getenv("CUPTRACE_ERROR_FILE");
	if (!f || !*f)
		return;
	int fd = open(f, O_WRONLY | O_APPEND | O_CLOEXEC);
	if (fd < 0)
		return;
	char line[128];
	int n = snprintf(line, sizeof(line), "%d %s\n", (int)getpid(), strerror(-err));
	ssize_t w = write(fd, line, (size_t)n);
	(void)w;
	close(fd);
}

int cuptrace_collect_start(const char *path, int injected)
{
	pthread_mutex_lock(&sess.lock);
	int ret = 0;
	if (atomic_load(&sess.state) != ST_IDLE) {
		ret = -EALREADY;
		goto out;
	}
	const char *lvl = getenv("CUPTRACE_LOG");
	if (lvl) {
		static const char *const names[] = {"error", "warn", "info", "debug"};
		for (int i = 0; i < 4; i++)
			if (!strcmp(lvl, names[i]))
				cuptrace_log_set_level((enum cuptrace_log_level)i);
	}
	sess.pid = getpid();
	sess.injected = injected;
	const char *tmpl = path ? path : getenv("CUPTRACE_OUTPUT");
	if (!tmpl || !*tmpl)
		tmpl = "cuptrace-%p.pftrace";
	/* Children of the traced command (a launcher's workers, subprocesses) write traces of
	 * their own: without %p in the name they would overwrite the command's trace. */
	char *own = NULL;
	const char *root = getenv("CUPTRACE_ROOT_PID");
	int none = !strcmp(tmpl, "none"); /* no file (--otlp only): no name to claim */
	if (root && !none && atoi(root) != (int)sess.pid && !strstr(tmpl, "%p") &&
	    !strstr(tmpl, "%r"))
		own = cuptrace_path_with_tag(tmpl, "%p");
	sess.path = cuptrace_path_expand(own ? own : tmpl, (int)sess.pid);
	free(own);
	/* An exec'd image has its predecessor's pid, so its predecessor's name: pick the first
	 * of NAME-<pid>.EXT, NAME-<pid>-2.EXT, ... that no earlier image wrote. */
	for (int k = 1; sess.path && !none &&
	                (path_taken(sess.path) || written_this_run(sess.path)) && k < 1000;
	     k++) {
		char tag[48];
		if (k == 1)
			snprintf(tag, sizeof(tag), "%d", (int)sess.pid);
		else
			snprintf(tag, sizeof(tag), "%d-%d", (int)sess.pid, k);
		own = cuptrace_path_with_tag(tmpl, tag);
		char *next = own ? cuptrace_path_expand(own, (int)sess.pid) : NULL;
		free(own);
		own = NULL;
		free(sess.path);
		sess.path = next;
	}
	sess.buffer_size =
	    env_size("CUPTRACE_BUFFER_SIZE", CUPTRACE_DEFAULT_BUFFER_SIZE, 8u << 10, 1u << 30);
	sess.buffer_size &= ~(size_t)7;
	sess.flush_ms = (int)env_size("CUPTRACE_FLUSH_MS", 1000, 0, 3600000);
	sess.fault_every = (unsigned)env_size("CUPTRACE_FAULT_BUFFERS", 0, 0, 1u << 30);
	atomic_store(&sess.buffer_requests, 0);
	size_t qcap = env_size("CUPTRACE_QUEUE", 64, 1, 1u << 20);
	const char *sum = getenv("CUPTRACE_SUMMARY");
	sess.summary = !(sum && !strcmp(sum, "0"));
	const char *drv = getenv("CUPTRACE_DRIVER");
	sess.driver_all = drv && !strcmp(drv, "all");
	const char *rt = getenv("CUPTRACE_RUNTIME");
	sess.runtime_mode = cuptrace_runtime_mode_parse(rt);
	if (sess.runtime_mode < 0) {
		cuptrace_warn("ignoring CUPTRACE_RUNTIME=%s (expected filtered, watch or all)", rt);
		sess.runtime_mode = CUPTRACE_RUNTIME_FILTERED;
	}
	/* The queue is made once and reopened by later sessions: CUPTI may still hand a
	 * finished session's buffer to buffer_completed, which must find a live queue. */
	if (!sess.path || (!sess.queue_ready && cuptrace_queue_init(&sess.queue, qcap))) {
		free(sess.path);
		sess.path = NULL;
		ret = -ENOMEM;
		goto out;
	}
	sess.queue_ready = 1;
	cuptrace_queue_reopen(&sess.queue);
	reset_counters();
	cuptrace_u64map_init(&sess.tids);
	if ((ret = setup_cupti(injected)))
		goto out_cupti;
	if ((ret = open_output())) {
		cuptrace_err("cannot write the trace to %s: %s", sess.path, strerror(-ret));
		goto out_cupti;
	}
	atomic_store(&sess.state, ST_RUNNING);
	install_signal_handlers();
	if (cuptrace_thread_start(&sess.writer, writer_main, NULL) == 0)
		sess.have_writer = 1;
	if (cuptrace_thread_start(&sess.flusher, flusher_main, NULL) == 0)
		sess.have_flusher = 1;
	if (!sess.atexit_done) {
		sess.atexit_done = 1;
		atexit(atexit_handler);
	}
	/* exec and _exit skip atexit: libcuptrace_preload.so (put in LD_PRELOAD by `cuptrace
	 * record`) calls preload_hook first. Looked up each start: it is there or not. */
	sess.preload_reg =
	    (cuptrace_preload_register_fn)dlsym(RTLD_DEFAULT, CUPTRACE_PRELOAD_REGISTER);
	if (sess.preload_reg)
		sess.preload_reg(preload_hook);
	cuptrace_info("tracing pid %d into %s%s", (int)sess.pid, sess.path,
	              injected ? " (injected)" : "");
	goto out;
out_cupti:
	/* Leave CUPTI as harmless as we can: nothing enabled, nothing subscribed. */
	for (size_t i = 0; i < CUPTRACE_NKINDS; i++)
		cuptiActivityDisable(cuptrace_kinds[i]);
	if (sess.subscriber)
		cuptiUnsubscribe(sess.subscriber);
	sess.subscriber = NULL;
	if (path_claimed && sess.path && !sess.sink && !sess.cap)
		unlink(sess.path); /* the empty file that claimed the name: nothing to keep */
	free(sess.path);
	sess.path = NULL;
	atomic_store(&sess.state, ST_IDLE); /* a later cuptrace_start may try again */
out:
	if (ret && ret != -EALREADY)
		note_start_failure(ret);
	pthread_mutex_unlock(&sess.lock);
	return ret;
}

int cuptrace_collect_flush(void)
{
	if (atomic_load(&sess.state) != ST_RUNNING)
		return -EINVAL;
	CUptiResult r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	/* Wait for the writer to take what CUPTI handed over. */
	for (int i = 0; i < 10000; i++) {
		pthread_mutex_lock(&sess.queue.lock);
		size_t len = sess.queue.len;
		pthread_mutex_unlock(&sess.queue.lock);
		if (!len)
			break;
		usleep(1000);
	}
	return r == CUPTI_SUCCESS ? 0 : -EIO;
}

static void print_summary(double finish_ms)
{
	const struct cuptrace_convert_counts *c =
	    sess.conv ? cuptrace_converter_counts(sess.conv) : NULL;
	uint64_t *k = sess.kind_counts;
	char line[1024];
	if (c)
		snprintf(line, sizeof(line),
		         "%llu records: %llu runtime, %llu driver, %llu kernels, %llu memcpy, "
		         "%llu memset, %llu sync, %llu nvtx; %llu API->GPU flows",
		         (unsigned long long)sess.records, (unsigned long long)c->runtime,
		         (unsigned long long)c->driver, (unsigned long long)c->kernels,
		         (unsigned long long)c->memcpys, (unsigned long long)c->memsets,
		         (unsigned long long)c->syncs, (unsigned long long)c->markers,
		         (unsigned long long)c->flows);
	else
		snprintf(line, sizeof(line),
		         "%llu records captured: %llu runtime, %llu driver, %llu kernels, %llu "
		         "memcpy, %llu memset, %llu sync",
		         (unsigned long long)sess.records,
		         (unsigned long long)k[CUPTI_ACTIVITY_KIND_RUNTIME],
		         (unsigned long long)k[CUPTI_ACTIVITY_KIND_DRIVER],
		         (unsigned long long)k[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL],
		         (unsigned long long)(k[CUPTI_ACTIVITY_KIND_MEMCPY] +
		                              k[CUPTI_ACTIVITY_KIND_MEMCPY2]),
		         (unsigned long long)k[CUPTI_ACTIVITY_KIND_MEMSET],
		         (unsigned long long)k[CUPTI_ACTIVITY_KIND_SYNCHRONIZATION]);
	/* The summary is asked for (CUPTRACE_SUMMARY=0 silences it), so it bypasses the log
	 * level; stderr only, never stdout. */
	fprintf(stderr, "cuptrace: %s\n", line);
	if (cuptrace_runtime_watch_summary(line, sizeof(line)))
		fprintf(stderr, "cuptrace: %s\n", line);
	fprintf(stderr,
	        "cuptrace: dropped records: %llu by CUPTI, %llu by cuptrace (%llu buffers); "
	        "%llu bytes written in %.1f ms at exit\n",
	        (unsigned long long)atomic_load(&sess.cupti_dropped),
	        (unsigned long long)atomic_load(&sess.records_dropped),
	        (unsigned long long)atomic_load(&sess.buffers_dropped),
	        (unsigned long long)sess.bytes_written, finish_ms);
	if (sess.otlp)
		cuptrace_collect_otlp_summary(sess.otlp);
	if (strcmp(sess.path, "none"))
		fprintf(stderr, "cuptrace: trace written to %s\n", sess.path);
}

static uint64_t file_size(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return 0;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fclose(f);
	return n > 0 ? (uint64_t)n : 0;
}

/* Metadata known only at the end: the closing clock readings (with the opening ones they give
 * REALTIME's rate against BOOTTIME over the run: NTP slews it), each visible GPU's PCI bus id
 * (from the driver; CUPTI's device record has no PCI address) and the NCCL version if the
 * program loaded NCCL. Called on the finishing thread after the writer thread has ended. */
static void late_meta(void (*put)(void *ctx, const char *k, const char *v), void *ctx)
{
	char k[48], v[96];
	snprintf(v, sizeof(v), "%lld", (long long)cuptrace_now_ns(CLOCK_REALTIME));
	put(ctx, "end_realtime_ns", v);
	snprintf(v, sizeof(v), "%lld", (long long)cuptrace_now_ns(CLOCK_BOOTTIME));
	put(ctx, "end_boottime_ns", v);
	int (*count)(int *) =
	    (int (*)(int *))cuptrace_loaded_sym("libcuda.so.1", "cuDeviceGetCount");
	int (*bus)(char *, int, int) =
	    (int (*)(char *, int, int))cuptrace_loaded_sym("libcuda.so.1", "cuDeviceGetPCIBusId");
	int n = 0;
	if (count && bus && count(&n) == 0)
		for (int d = 0; d < n && d < 64; d++)
			if (bus(v, (int)sizeof(v), d) == 0) {
				snprintf(k, sizeof(k), "gpu%d_pci_bus_id", d);
				put(ctx, k, v);
			}
	/* NCCL: loaded by soname (PyTorch, JAX, CuPy ship libnccl.so.2), or linked in. */
	int (*ver)(int *) = (int (*)(int *))cuptrace_loaded_sym("libnccl.so.2", "ncclGetVersion");
	int code = 0;
	if (ver && ver(&code) == 0 && code > 0) {
		/* NCCL_VERSION_CODE: X*10000+Y*100+Z since 2.9, X*1000+Y*100+Z before */
		if (code >= 20900)
			snprintf(v, sizeof(v), "%d.%d.%d", code / 10000, code / 100 % 100,
			         code % 100);
		else
			snprintf(v, sizeof(v), "%d.%d.%d", code / 1000, code / 100 % 10,
			         code % 100);
		put(ctx, "nccl_version", v);
	}
	const char *gm = cuptrace_gm_status();
	if (gm)
		put(ctx, "gpu_metrics", gm);
	uint64_t samples;
	int64_t cpu_ns;
	if (cuptrace_gm_cost(&samples, &cpu_ns)) {
		snprintf(v, sizeof(v), "%.1f", cpu_ns / 1e6);
		put(ctx, "gpu_metrics_sampler_cpu_ms", v);
		cuptrace_debug(
		    "GPU metrics: %llu samples, sampler thread CPU %.1f ms (%.1f us each)",
		    (unsigned long long)samples, cpu_ns / 1e6,
		    samples ? cpu_ns / 1e3 / samples : 0.0);
	}
}

static void late_meta_capture(void *ctx, const char *k, const char *v)
{
	(void)ctx;
	cuptrace_capture_meta(sess.cap, k, v);
}

static void late_meta_converter(void *ctx, const char *k, const char *v)
{
	(void)ctx;
	cuptrace_converter_meta(sess.conv, k, v);
}

/* An injected session that saw no CUDA work: no runtime call, no context, no GPU activity, no
 * NVTX, nothing lost; at most the driver queries of a process that looked at the GPUs and went
 * on (torchrun, mpirun's Python helpers, a test runner importing torch). Its trace would be an
 * empty timeline beside the ranks', so it is not kept. Runs after the writer thread ended. */
static int no_cuda_work(void)
{
	static const CUpti_ActivityKind work[] = {
	    CUPTI_ACTIVITY_KIND_RUNTIME,           CUPTI_ACTIVITY_KIND_CONTEXT,
	    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
	    CUPTI_ACTIVITY_KIND_MEMCPY2,           CUPTI_ACTIVITY_KIND_MEMSET,
	    CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,   CUPTI_ACTIVITY_KIND_MARKER,
	    CUPTI_ACTIVITY_KIND_MEMORY2,           CUPTI_ACTIVITY_KIND_MEMORY_POOL};
	if (!sess.injected || sess.write_err || atomic_load(&sess.cupti_dropped) ||
	    atomic_load(&sess.records_dropped))
		return 0;
	for (size_t i = 0; i < sizeof(work) / sizeof(work[0]); i++)
		if (sess.kind_counts[work[i]])
			return 0;
	return 1;
}

static void finish_session(void)
{
	if (getpid() != sess.pid)
		return; /* a forked child: the session, its threads and CUPTI belong to the parent
		         */
	int expected = ST_RUNNING;
	if (!atomic_compare_exchange_strong(&sess.state, &expected, ST_STOPPING))
		return;
	int64_t t0 = cuptrace_now_ns(CLOCK_MONOTONIC);
	/* Everything CUPTI holds, complete or not (unfinished GPU work comes back with no times
	 * and is counted, not drawn). */
	cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	size_t dropped = 0;
	if (cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped) == CUPTI_SUCCESS && dropped)
		atomic_fetch_add(&sess.cupti_dropped, dropped);
	for (size_t i = 0; i < CUPTRACE_NKINDS; i++)
		cuptiActivityDisable(cuptrace_kinds[i]);
	/* After the activity flush: the last PM samples (where the exit handler has not taken
	 * them). */
	cuptrace_gm_stop();
	atomic_store(&sess.state, ST_DONE); /* later buffers are freed, not queued */
	atomic_store(&sess.stop_flusher, 1);
	if (sess.have_flusher && !pthread_equal(pthread_self(), sess.flusher)) {
		if (sess.sigpipe[1] >= 0) {
			unsigned char z = 0;
			ssize_t w = write(sess.sigpipe[1], &z, 1);
			(void)w;
		}
		pthread_join(sess.flusher, NULL);
		sess.have_flusher = 0;
	}
	cuptrace_queue_close(&sess.queue);
	if (sess.have_writer) {
		pthread_join(sess.writer, NULL);
		sess.have_writer = 0;
	}
	note_write_err(cuptrace_gm_drain(sess.conv, sess.cap)); /* the last samples */
	int err = sess.write_err;
	if (sess.cap)
		late_meta(late_meta_capture, NULL);
	else if (sess.conv)
		late_meta(late_meta_converter, NULL);
	if (sess.cap) {
		int e = cuptrace_capture_close(sess.cap);
		err = err ? err : e;
		sess.cap = NULL;
	} else if (sess.conv) {
		int e = cuptrace_converter_finish(sess.conv);
		err = err ? err : e;
		e = sess.sink->ops->finish(sess.sink);
		err = err ? err : e;
	}
	int to_file = strcmp(sess.path, "none") != 0; /* -o none: OTLP only */
	int idle = !err && no_cuda_work();
	if (idle && to_file)
		unlink(sess.path);
	sess.bytes_written = idle || !to_file ? 0 : file_size(sess.path);
	double ms = (double)(cuptrace_now_ns(CLOCK_MONOTONIC) - t0) / 1e6;
	note_write_err(err);
	if (!atomic_load(&sess.buffers) && sess.records == 0)
		cuptrace_warn("CUPTI delivered no records to cuptrace. If the program used CUDA, "
		              "another CUPTI client in this process (torch.profiler, nsys) may "
		              "have taken them: only one CUPTI client works per process.");
	if (sess.summary && idle)
		fprintf(stderr,
		        "cuptrace: pid %d did no CUDA work (%llu driver queries, no context): no "
		        "trace written\n",
		        (int)sess.pid,
		        (unsigned long long)sess.kind_counts[CUPTI_ACTIVITY_KIND_DRIVER]);
	else if (sess.summary)
		print_summary(ms);
	/* Where the tracer's memory went, for CUPTRACE_LOG=info (tools/bench/rss_bench.py). */
	cuptrace_info("writer queue: at most %llu of %zu buffers of %zu bytes waiting",
	              (unsigned long long)sess.queue.high_water, sess.queue.cap, sess.buffer_size);
	if (sess.conv)
		cuptrace_info(
		    "reorder window: at most %llu GPU records held",
		    (unsigned long long)cuptrace_converter_counts(sess.conv)->window_peak);
	if (sess.conv) {
		cuptrace_converter_free(sess.conv);
		sess.conv = NULL;
	}
	cuptrace_sink_destroy(sess.sink);
	sess.sink = NULL;
	sess.otlp = NULL;
	if (sess.subscriber) {
		cuptiUnsubscribe(sess.subscriber);
		sess.subscriber = NULL;
	}
	if (!sess.dying_signal)
		remove_signal_handlers();
	free(sess.recs);
	free(sess.sizes);
	sess.recs = NULL;
	sess.sizes = NULL;
	sess.rec_cap = 0;
	cuptrace_u64map_free(&sess.tids);
	if (sess.preload_reg)
		sess.preload_reg(NULL);
	sess.preload_reg = NULL;
	for (int i = 0; i < 2; i++) {
		if (sess.sigpipe[i] >= 0 && !sess.dying_signal)
			close(sess.sigpipe[i]);
		if (!sess.dying_signal)
			sess.sigpipe[i] = -1;
	}
	if (sess.dying_signal)
		return; /* the flush thread re-raises the signal next: the process ends */
	free(sess.path);
	sess.path = NULL;
	/* Ready for another cuptrace_start (the C API may cycle start/stop). */
	atomic_store(&sess.state, ST_IDLE);
}

int cuptrace_collect_stop(void)
{
	if (atomic_load(&sess.state) == ST_IDLE)
		return -EINVAL;
	finish_session();
	return sess.write_err;
}
