/* The tracing session's life cycle inside the traced process (see collect.h): start (CUPTI
 * set up, output opened, threads started), the flush thread, signals, and the finish.
 * The parts it drives: collect_buffers.c (CUPTI buffers, the writer thread),
 * collect_callbacks.c (the subscriber callback), collect_output.c (output and metadata); what
 * they share is in collect_state.h.
 *
 * Threads: one writer thread (collect_buffers.c); one flush thread asks CUPTI for completed
 * records every CUPTRACE_FLUSH_MS and turns SIGINT/SIGTERM into an orderly finish.
 * Finalization runs exactly once, in the process that started the session (a forked child
 * inherits the atexit handler but must not touch CUPTI: it would hang). */
#define _GNU_SOURCE
#include "inject/collect.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cupti.h>
#include <sys/prctl.h>

#include "inject/api_enable.h"
#include "inject/collect_otlp.h"
#include "inject/cupti_alarm.h"
#include "inject/collect_state.h"
#include "inject/gpumetrics.h"
#include "inject/kinds.h"
#include "inject/runtime_watch.h"
#include "inject/sync_watch.h"
#include "common/log.h"
#include "common/options.h"
#include "common/util.h"
#include "output/recfile.h"

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

/* ---- flush thread: periodic CUPTI flush, and SIGINT/SIGTERM turned into a clean finish ---- */

static void finish_session(struct collect_session *s);
static void cupti_attach_late(struct collect_session *s);

static void on_signal(int sig)
{
	struct collect_session *s = collect_process_session; /* trampoline: signal handler */
	/* Async-signal-safe only: put the default action back (a second signal kills at once),
	 * and wake the flush thread, which finishes the trace and re-raises the signal. */
	struct sigaction dfl = {.sa_handler = SIG_DFL};
	sigaction(sig, &dfl, NULL);
	unsigned char b = (unsigned char)sig;
	ssize_t w = write(s->sigpipe[1], &b, 1);
	(void)w;
}

static void *flusher_main(void *arg)
{
	/* Named cuptrace-*: `top` counts the tracer's own CPU by these names. */
	prctl(PR_SET_NAME, "cuptrace-flush", 0, 0, 0);
	struct collect_session *s = arg;
	int timeout = s->flush_ms > 0 ? s->flush_ms : 1000;
	while (!atomic_load(&s->stop_flusher)) {
		/* Also woken by the capture windows (a close to drain, a dump, a crash). */
		struct pollfd p[2] = {{.fd = s->sigpipe[0], .events = POLLIN},
		                      {.fd = collect_window_wake_fd(s), .events = POLLIN}};
		int r = poll(p, 2, timeout);
		if (atomic_load(&s->stop_flusher))
			break;
		timeout = collect_window_tick(s, s->flush_ms);
		/* A window decided here (time), by the trigger socket or by an NVTX handler (which
		 * woke this thread and waits) wants CUPTI: this thread attaches it. Also a request
		 * no other thread served, at the latest one flush period later. */
		cupti_attach_late(s);
		if (r > 0 && (p[0].revents & POLLIN)) {
			unsigned char sig = 0;
			if (read(s->sigpipe[0], &sig, 1) == 1 && sig) {
				s->dying_signal = sig;
				s->flusher_cpu_ns = collect_thread_cpu_ns();
				finish_session(s);
				/* The handler already restored SIG_DFL: die as the program would.
				 */
				kill(getpid(), sig);
				return NULL;
			}
		}
		/* A context on a second device (collect_callbacks.c): peer copies with both
		 * devices from now on (kinds.h). */
		if (atomic_load(&s->multi_gpu) && atomic_load(&s->cupti_attached) &&
		    collect_window_recording(s) && !atomic_exchange(&s->two_gpu_kinds_on, 1))
			cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY2);
		/* Nothing to flush while CUPTI is not attached or no window has kinds on. */
		if (collect_window_flush_ms(s) > 0 && r == 0 && atomic_load(&s->cupti_attached) &&
		    collect_window_recording(s))
			cuptiActivityFlushAll(0);
	}
	s->flusher_cpu_ns = collect_thread_cpu_ns();
	return NULL;
}

static void install_signal_handlers(struct collect_session *s)
{
	struct cuptrace_setting_value on;
	cuptrace_setting_env(CUPTRACE_SET_SIGNALS, &on);
	if (!on.i)
		return;
	if (pipe2(s->sigpipe, O_CLOEXEC | O_NONBLOCK)) {
		s->sigpipe[0] = s->sigpipe[1] = -1;
		return;
	}
	static const int sigs[2] = {SIGINT, SIGTERM};
	struct sigaction *olds[2] = {&s->old_int, &s->old_term};
	for (int i = 0; i < 2; i++) {
		/* Only where the program left the default: a program with its own handler (Python's
		 * KeyboardInterrupt) exits through atexit, where the trace is finished anyway. */
		if (sigaction(sigs[i], NULL, olds[i]) || olds[i]->sa_handler != SIG_DFL)
			continue;
		struct sigaction sa = {.sa_handler = on_signal, .sa_flags = SA_RESTART};
		sigemptyset(&sa.sa_mask);
		if (!sigaction(sigs[i], &sa, NULL))
			s->handlers_installed[i] = 1;
	}
}

static void remove_signal_handlers(struct collect_session *s)
{
	static const int sigs[2] = {SIGINT, SIGTERM};
	for (int i = 0; i < 2; i++) {
		if (!s->handlers_installed[i])
			continue;
		struct sigaction cur;
		/* Put the default back only if our handler is still the one installed. */
		if (!sigaction(sigs[i], NULL, &cur) && cur.sa_handler == on_signal) {
			struct sigaction dfl = {.sa_handler = SIG_DFL};
			sigaction(sigs[i], &dfl, NULL);
		}
		s->handlers_installed[i] = 0;
	}
}

/* ---- start / finish ---- */

/* Called by libcuptrace_preload.so just before exec or _exit in this process: neither runs
 * atexit handlers, so finish here. For exec, the path goes into the new image's environment
 * (CUPTRACE_TAKEN) so that it does not write over this trace. */
static void preload_hook(int why, char *path, size_t n)
{
	struct collect_session *s = collect_process_session; /* trampoline: preload hook */
	if (why == CUPTRACE_PRELOAD_EXEC && path && n)
		snprintf(path, n, "%s",
		         atomic_load(&s->state) == ST_RUNNING && s->out.path ? s->out.path : "");
	finish_session(s);
}

/* Everything a session counts starts from zero (the C API may run many sessions). */
static void reset_counters(struct collect_session *s)
{
	atomic_store(&s->buffers, 0);
	atomic_store(&s->buffers_dropped, 0);
	atomic_store(&s->records_dropped, 0);
	atomic_store(&s->cupti_dropped, 0);
	atomic_store(&s->stop_flusher, 0);
	atomic_store(&s->callbacks_cpu_ns, 0);
	atomic_store(&s->buffers_requested, 0);
	atomic_store(&s->buffers_live, 0);
	atomic_store(&s->buffers_live_peak, 0);
	s->writer_cpu_ns = s->flusher_cpu_ns = 0;
	s->records = 0;
	memset(s->kind_counts, 0, sizeof(s->kind_counts));
	s->last_cupti_dropped = s->last_cuptrace_dropped = 0;
	s->write_err = 0;
	s->bytes_written = 0;
	s->dying_signal = 0;
	collect_startend_reset(s);
}

static void atexit_handler(void)
{
	struct collect_session *s = collect_process_session; /* trampoline: atexit */
	if (getpid() != s->pid)
		return; /* a forked child: CUPTI is not usable here (flushing hangs) */
	finish_session(s);
}

static int attach_cupti(struct collect_session *s, int injected);
static int subscribe_cupti(struct collect_session *s);

/* The driver's cuDeviceGetCount: its CUresult, or -1 where libcuda is not loaded (cudart opens
 * it out of the global scope: cuptrace_loaded_sym). */
static int driver_device_count(int *n)
{
	typedef int (*count_fn)(int *);
	count_fn f = (count_fn)cuptrace_loaded_sym("libcuda.so.1", "cuDeviceGetCount");
	*n = 0;
	return f ? f(n) : -1;
}

/* Whether CUDA has started in this process: a graph may exist. libcuda not loaded, or not
 * initialized: not yet. */
static int cuda_started(void)
{
	int n, r = driver_device_count(&n);
	return r != -1 && r != CUDA_ERROR_NOT_INITIALIZED;
}

/* --cuda-graphs graph, where CUPTI can take it. CUPTI 13.0 crashes the program (a NULL
 * dereference inside cuGraphLaunch, H200, driver 580) when whole-graph records (GRAPH_TRACE)
 * are switched on after a graph was instantiated without them: mid-run, or when a capture
 * window opened after the program had made its graphs. So GRAPH_TRACE is used only from
 * before CUDA starts to the end: injected without capture windows, or a C API start before
 * the first CUDA call; otherwise graphs are recorded node by node, and the user is told. */
static int graph_trace_usable(struct collect_session *s, int injected)
{
	if (!cuptrace_kind_by_setting(CUPTI_ACTIVITY_KIND_GRAPH_TRACE))
		return 0;
	const char *why = collect_window_defers(s)
	                      ? "with capture windows (they would switch it on after the program "
	                        "made its graphs)"
	                  : !injected && cuda_started()
	                      ? "by a start after CUDA did (the program may have made graphs "
	                        "already)"
	                      : NULL;
	if (!why)
		return 1;
	cuptrace_warn("--cuda-graphs graph is not used %s: " CUPTRACE_GRAPH_TRACE_LATE_WHY, why);
	return 0;
}

static int setup_cupti(struct collect_session *s, int injected)
{
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
	s->start_boot = cuptrace_now_ns(CLOCK_BOOTTIME);
	s->start_real = cuptrace_now_ns(CLOCK_REALTIME);
	s->graph_trace = graph_trace_usable(s, injected);
	s->cupti_deferred = collect_window_defers_cupti(s, collect_nvtx_ours());
	atomic_store(&s->cupti_attached, 0);
	atomic_store(&s->multi_gpu, 0);
	atomic_store(&s->two_gpu_kinds_on, 0);
	if (!s->cupti_deferred)
		return attach_cupti(s, injected);
	/* cupti_attach_late, when the first window wants it. A profiler-range window watches
	 * cudaProfilerStart/Stop meanwhile with CUPTI subscribed and four callbacks on: no clock
	 * or buffer callback, no kind. With --cupti-early every deferred window does the same,
	 * watching the driver's graph-instantiate calls instead: CUPTI 13.0 breaks graphs
	 * launched from the GPU when it starts after such a graph was instantiated (their
	 * launches fail, "unspecified launch failure": H100 and H200, a time window over
	 * examples/device_graph), while subscribed before the same window records and the program
	 * runs to its end. Any start does it, a subscription alone or only registering buffers
	 * (README "Tracing part of a run"), so waiting cannot be cheaper and safe at once. Not the
	 * default: a subscription alone made a graph replay loop 13% slower while waiting (H200,
	 * torch_bench floor_sub and cuptrace_ondemand_early; README "Tracing part of a run"). */
	struct cuptrace_setting_value early;
	cuptrace_setting_env(CUPTRACE_SET_CUPTI_EARLY, &early);
	if (early.i || collect_window_watches_profiler(s)) {
		int e = subscribe_cupti(s);
		if (e)
			return e;
		collect_callbacks_graphs(s, s->subscriber);
		if (collect_window_watches_profiler(s))
			collect_callbacks_windows(s, s->subscriber);
	}
	return 0;
}

/* Subscribes and registers with CUPTI where setup deferred it, if a window wants it now
 * (s->win.cupti_wanted), then has the window code turn the kinds on. The window code decides
 * and asks; this file, which owns CUPTI, acts: called after each event that may open a window,
 * on the thread that reported it where this file is its trampoline (the CUPTI callback, the C
 * API) and by the flush thread for the others (time, the trigger socket, NVTX handlers, which
 * wait for it). attach_lock makes one of them attach; never called holding s->win.lock. */
static void cupti_attach_late(struct collect_session *s)
{
	if (!collect_window_cupti_wanted(s))
		return;
	pthread_mutex_lock(&s->attach_lock);
	int r = 0;
	if (collect_window_cupti_wanted(s) && !atomic_load(&s->cupti_attached)) {
		/* After CUDA started: the devices, contexts and streams that exist are dumped by
		 * the window's kinds_on. */
		r = attach_cupti(s, 0);
		if (r)
			cuptrace_err(
			    "capture window: CUPTI could not be started (%s); nothing is recorded",
			    strerror(-r));
	}
	collect_window_cupti_ready(s, r == 0);
	pthread_mutex_unlock(&s->attach_lock);
}

/* CUPTI's one subscriber callback: application threads, inside the CUDA call. What it does is
 * collect_callbacks.c's; a cudaProfilerStart that opened a window has CUPTI attached here,
 * before the call returns (only after the calls windows watch: a request of the flush thread's
 * is its own to serve, not that of whatever call comes by meanwhile). */
static void CUPTIAPI on_cupti_callback(void *ud, CUpti_CallbackDomain d, CUpti_CallbackId id,
                                       const void *data)
{
	struct collect_session *s = ud; /* trampoline: CUPTI callback (cuptiSubscribe's data) */
	if (collect_callbacks_dispatch(s, d, id, data))
		cupti_attach_late(s);
}

/* A start after CUDA initialized (the C API, a deferred window): the contexts that exist
 * were created unseen, so ask the driver how many devices there are. */
static void count_devices_late(struct collect_session *s)
{
	int n;
	if (driver_device_count(&n) == 0 && n > 1)
		atomic_store(&s->multi_gpu, 1);
}

/* Claims the single CUPTI subscriber slot (once per session): a second CUPTI client in this
 * process (nsys, ncu, compute-sanitizer, torch.profiler) would otherwise silently take our
 * records. 0 or -errno (said once). */
static int subscribe_cupti(struct collect_session *s)
{
	if (s->subscriber)
		return 0;
	CUpti_SubscriberParams sp;
	char old_name[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 8] = "";
	memset(&sp, 0, sizeof(sp));
	sp.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
	sp.subscriberName = "cuptrace";
	sp.oldSubscriberName = old_name;
	sp.oldSubscriberSize = sizeof(old_name);
	CUptiResult r = cuptiSubscribe_v2(&s->subscriber, on_cupti_callback, s, &sp);
	if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
		s->subscriber = NULL;
		cuptrace_err(
		    "CUPTI is already in use by another tool in this process (%s); only one "
		    "CUPTI client can run per process on this driver. No trace is written.",
		    old_name[0] ? old_name : "unknown tool");
		return -EBUSY;
	}
	if (r != CUPTI_SUCCESS) {
		s->subscriber = NULL;
		cuptrace_err("cannot start CUPTI: %s", cupti_err(r));
		return -EIO;
	}
	return 0;
}

static int attach_cupti(struct collect_session *s, int injected)
{
	CUptiResult r;
	if (!injected)
		count_devices_late(s);
	int e0 = subscribe_cupti(s);
	if (e0)
		return e0;
	static const CUpti_CallbackId nvtx_start[] = {
	    CUPTI_CBID_NVTX_nvtxRangeStartA, CUPTI_CBID_NVTX_nvtxRangeStartW,
	    CUPTI_CBID_NVTX_nvtxRangeStartEx, CUPTI_CBID_NVTX_nvtxDomainRangeStartEx};
	for (size_t i = 0; i < sizeof(nvtx_start) / sizeof(nvtx_start[0]); i++)
		cuptiEnableCallback(1, s->subscriber, CUPTI_CB_DOMAIN_NVTX, nvtx_start[i]);
	/* evidence of CUDA work for the "no records" warning (cupti_alarm.h) */
	cuptiEnableCallback(1, s->subscriber, CUPTI_CB_DOMAIN_RESOURCE,
	                    CUPTI_CBID_RESOURCE_CONTEXT_CREATED);
	cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
	if ((r = cuptiActivityRegisterTimestampCallback(boottime_now)) != CUPTI_SUCCESS)
		cuptrace_warn("cannot set the CUPTI clock to BOOTTIME: %s", cupti_err(r));
	uint8_t one = 1;
	size_t sz = sizeof(one);
	cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &sz, &one);
	if ((r = cuptiActivityRegisterCallbacks(collect_buffer_requested,
	                                        collect_buffer_completed)) != CUPTI_SUCCESS) {
		cuptrace_err("cannot register CUPTI buffer callbacks: %s", cupti_err(r));
		return -EIO;
	}
	cuptrace_gm_setup(s->subscriber); /* fails soft: says why itself */
	/* Per graph, graphs launched from a kernel (device graph launch) are records of their own
	 * (DEVICE_GRAPH_TRACE, with GRAPH_TRACE on): without this they would leave no trace at all,
	 * their nodes having none either. CUPTI wants it before CUDA initializes, i.e. here when
	 * injected; the C API's late start can only warn. */
	if (s->graph_trace && (r = cuptiActivityEnableDeviceGraph(1)) != CUPTI_SUCCESS)
		cuptrace_warn("graphs launched from the GPU will not be recorded: %s",
		              cupti_err(r));
	/* Capture windows: nothing until a window opens (collect_window.c switches the kinds on
	 * and off; the devices, contexts and streams that exist by then are dumped). */
	int defer = collect_window_defers(s);
	for (size_t i = 0; i < CUPTRACE_NKINDS; i++) {
		if (cuptrace_kinds[i] == CUPTI_ACTIVITY_KIND_RUNTIME ||
		    cuptrace_kinds[i] == CUPTI_ACTIVITY_KIND_DRIVER)
			continue; /* below, with their filters */
		if (defer)
			continue; /* collect_window.c: on with the first window */
		if (!collect_kind_wanted(s, cuptrace_kinds[i]))
			continue;
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
	int e = defer ? 0
	              : cuptrace_enable_api(s->driver_mode, s->runtime_mode == CUPTRACE_RUNTIME_ALL,
	                                    s->api_by_cbid);
	if (e)
		cuptrace_warn("API calls may not be recorded: %s", cupti_err((CUptiResult)-e));
	collect_callbacks_windows(s, s->subscriber);
	collect_callbacks_graphs(s, s->subscriber);
	cuptrace_runtime_watch_setup(s->subscriber, (enum cuptrace_runtime_mode)s->runtime_mode);
	if (!s->sync_cupti) {
		cuptrace_sync_watch_active(!defer); /* windows: with the API kinds */
		cuptrace_sync_watch_setup(s->subscriber);
	}
	collect_stacks_setup(s->subscriber);
	collect_nvtx_cupti_attach();
	atomic_store(&s->cupti_attached, 1);
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
	struct collect_session *s = collect_process_session; /* trampoline: C API */
	pthread_mutex_lock(&s->lock);
	int ret = 0;
	if (atomic_load(&s->state) != ST_IDLE) {
		ret = -EALREADY;
		goto out;
	}
	/* Every setting through the table that `record` checks too (common/options.h): a bad
	 * value is one warning and the default. The log level first, for those warnings. */
	struct cuptrace_setting_value v;
	if (cuptrace_setting_env(CUPTRACE_SET_LOG, &v))
		cuptrace_log_set_level((enum cuptrace_log_level)v.i);
	s->pid = getpid();
	s->injected = injected;
	cuptrace_setting_env(CUPTRACE_SET_OUTPUT, &v);
	const char *tmpl = path ? path : v.s;
	if (!tmpl || !*tmpl)
		tmpl = "cuptrace-%p.pftrace";
	/* No two processes of a run write one file (output/recfile.h). */
	struct cuptrace_recname_env names = cuptrace_recname_env_get();
	s->out.path = cuptrace_recfile_name(tmpl, (int)s->pid, &names, &s->path_claimed);
	cuptrace_setting_env(CUPTRACE_SET_BUFFER_SIZE, &v);
	s->buffer_size = (size_t)v.i & ~(size_t)7;
	cuptrace_setting_env(CUPTRACE_SET_FLUSH_MS, &v);
	s->flush_ms = (int)v.i;
	cuptrace_setting_env(CUPTRACE_SET_FAULT_BUFFERS, &v);
	s->fault_every = (unsigned)v.i;
	atomic_store(&s->buffer_requests, 0);
	cuptrace_setting_env(CUPTRACE_SET_QUEUE, &v);
	size_t qcap = (size_t)v.i;
	cuptrace_setting_env(CUPTRACE_SET_SUMMARY, &v);
	s->summary = (int)v.i;
	cuptrace_setting_env(CUPTRACE_SET_DRIVER, &v);
	s->driver_mode = (int)v.i;
	cuptrace_setting_env(CUPTRACE_SET_RUNTIME, &v);
	s->runtime_mode = (int)v.i; /* the table's values are enum cuptrace_runtime_mode's */
	/* The queue is made once and reopened by later sessions: CUPTI may still hand a
	 * finished session's buffer to buffer_completed, which must find a live queue. */
	if (!s->out.path || (!s->queue_ready && cuptrace_queue_init(&s->queue, qcap))) {
		free(s->out.path);
		s->out.path = NULL;
		ret = -ENOMEM;
		goto out;
	}
	s->queue_ready = 1;
	cuptrace_queue_reopen(&s->queue);
	reset_counters(s);
	collect_ranges_reset(); /* nothing of an earlier session's ranges comes into this one */
	cuptrace_u64map_init(&s->tids);
	collect_window_setup(s);
	cuptrace_setting_env(CUPTRACE_SET_SYNC_RECORDS, &v);
	s->sync_cupti = v.i == CUPTRACE_SYNC_RECORDS_CUPTI || s->win.ring;
	s->api_by_cbid = cuptrace_api_by_cbid() && injected && !s->win.active && !s->win.ring;
	cuptrace_sync_watch_reset();
	if ((ret = setup_cupti(s, injected)))
		goto out_cupti;
	/* A file per window (%n in the name): each is opened when its window has records. */
	/* The trace's file is the session's one consumer (none with a file per window). */
	s->consumers.n = 0;
	s->to = collect_consumers_as_one(&s->consumers);
	if (!s->win.per_file && (ret = collect_open_output(s, &s->out))) {
		cuptrace_err("cannot write the trace to %s: %s", s->out.path, strerror(-ret));
		goto out_cupti;
	}
	if (!s->win.per_file)
		collect_consumers_add(&s->consumers, &s->out.cons);
	/* The writer thread before the state says RUNNING (until then CUPTI's buffers are freed,
	 * not queued). Without it nothing would take the queue: buffers would pile up to its cap,
	 * then be dropped, and the trace would hold nothing. Writing on CUPTI's threads instead
	 * would put conversion, compression and file I/O on the program's threads (CUPTI asks for
	 * and completes buffers there) and race the converter, which one thread owns. So no trace:
	 * said once, the output removed, CUPTI left idle, and the program runs on untraced. */
	if ((ret = cuptrace_thread_start(&s->writer, collect_writer_main, s))) {
		cuptrace_err("cannot start the writer thread: %s; no trace is written",
		             strerror(-ret));
		collect_discard_output(&s->out);
		goto out_cupti;
	}
	s->have_writer = 1;
	atomic_store(&s->state, ST_RUNNING);
	install_signal_handlers(s);
	/* Without the flush thread records still arrive as buffers fill and at the end; only
	 * the periodic flush and the SIGINT/SIGTERM finish are lost. */
	collect_window_begin(s); /* before the flush thread, which polls its wake pipe */
	cupti_attach_late(s);    /* a window open from the start */
	if (cuptrace_thread_start(&s->flusher, flusher_main, s) == 0)
		s->have_flusher = 1;
	else
		cuptrace_warn("cannot start the flush thread: records are written as CUPTI's "
		              "buffers fill and at exit");
	if (!s->atexit_done) {
		s->atexit_done = 1;
		atexit(atexit_handler);
	}
	/* exec and _exit skip atexit: libcuptrace_preload.so (put in LD_PRELOAD by `cuptrace
	 * record`) calls preload_hook first. Looked up each start: it is there or not. */
	s->preload_reg =
	    (cuptrace_preload_register_fn)dlsym(RTLD_DEFAULT, CUPTRACE_PRELOAD_REGISTER);
	if (s->preload_reg)
		s->preload_reg(preload_hook);
	cuptrace_info("tracing pid %d into %s%s", (int)s->pid, s->out.path,
	              injected ? " (injected)" : "");
	goto out;
out_cupti:
	/* Leave CUPTI as harmless as we can: nothing enabled, nothing subscribed. */
	for (size_t i = 0; i < CUPTRACE_NKINDS; i++)
		cuptiActivityDisable(cuptrace_kinds[i]);
	cuptrace_disable_api(s->api_by_cbid);
	if (s->subscriber)
		cuptiUnsubscribe(s->subscriber);
	s->subscriber = NULL;
	if (s->path_claimed && s->out.path && !s->out.sink && !s->out.cons.ops)
		unlink(s->out.path); /* the empty file that claimed the name: nothing to keep */
	free(s->out.path);
	s->out.path = NULL;
	cuptrace_u64map_free(&s->tids);
	atomic_store(&s->state, ST_IDLE); /* a later cuptrace_start may try again */
out:
	if (ret && ret != -EALREADY)
		note_start_failure(ret);
	pthread_mutex_unlock(&s->lock);
	return ret;
}

int cuptrace_collect_flush(void)
{
	struct collect_session *s = collect_process_session; /* trampoline: C API */
	if (atomic_load(&s->state) != ST_RUNNING)
		return -EINVAL;
	CUptiResult r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	/* Wait for the writer to take what CUPTI handed over. */
	for (int i = 0; i < 10000; i++) {
		pthread_mutex_lock(&s->queue.lock);
		size_t len = s->queue.len;
		pthread_mutex_unlock(&s->queue.lock);
		if (!len)
			break;
		usleep(1000);
	}
	return r == CUPTI_SUCCESS ? 0 : -EIO;
}

/* What the tracer cost: its threads' CPU against the whole process's, and the CUPTI buffers it
 * held. finish_ms: CPU of the finishing thread in finish_session (the last records, the last
 * chunks), which runs on a thread of the program. */
static void print_cost(struct collect_session *s, double finish_ms)
{
	struct collect_cost c;
	collect_cost(s, &c);
	double own = c.writer_ms + c.compress_ms + c.flush_ms + c.callbacks_ms + finish_ms;
	fprintf(stderr,
	        "cuptrace: tracer CPU %.1f ms: writer thread %.1f, compressor threads %.1f, flush "
	        "thread %.1f, CUPTI buffer callbacks %.1f, finishing at exit %.1f; the whole "
	        "process %.1f ms (tracer %.1f%%)\n",
	        own, c.writer_ms, c.compress_ms, c.flush_ms, c.callbacks_ms, finish_ms,
	        c.process_ms, c.process_ms > 0 ? 100.0 * own / c.process_ms : 0.0);
	/* zlib takes about twice libdeflate's CPU for the same chunks (README "Writer
	 * throughput"): worth a line where the machine lacks it. */
	if (c.by_zlib)
		fprintf(stderr, "cuptrace: chunks compressed by zlib: libdeflate.so.0 (Debian's "
		                "libdeflate0) was not found; with it they take about half the "
		                "compressor CPU\n");
	double mib = (double)c.buffer_size / (1024.0 * 1024.0);
	char live[96] = "";
	if (c.live_peak)
		snprintf(live, sizeof(live), "at most %llu alive at once (%.1f MiB), ",
		         (unsigned long long)c.live_peak, (double)c.live_peak * mib);
	fprintf(stderr,
	        "cuptrace: CUPTI buffers: %llu of %.2f MiB handed out, %swriter queue at most "
	        "%llu; bound: the queue's %zu buffers (CUPTRACE_QUEUE) x %.2f MiB "
	        "(CUPTRACE_BUFFER_SIZE) = %.1f MiB, plus the buffers CUPTI is filling\n",
	        (unsigned long long)c.requested, mib, live, (unsigned long long)c.queue_peak,
	        c.queue_cap, mib, (double)c.queue_cap * mib);
}

static void print_summary(struct collect_session *s, double finish_ms, double finish_cpu_ms,
                          const char *where)
{
	const struct cuptrace_convert_counts *c =
	    s->out.conv ? cuptrace_converter_counts(s->out.conv) : NULL;
	uint64_t *k = s->kind_counts;
	char line[1024];
	if (c)
		snprintf(line, sizeof(line),
		         "%llu records: %llu runtime, %llu driver, %llu kernels, %llu memcpy, "
		         "%llu memset, %llu sync, %llu nvtx; %llu API->GPU flows",
		         (unsigned long long)s->records, (unsigned long long)c->runtime,
		         (unsigned long long)c->driver, (unsigned long long)c->kernels,
		         (unsigned long long)c->memcpys, (unsigned long long)c->memsets,
		         (unsigned long long)c->syncs, (unsigned long long)c->markers,
		         (unsigned long long)c->flows);
	else
		snprintf(line, sizeof(line),
		         "%llu records captured: %llu runtime, %llu driver, %llu kernels, %llu "
		         "memcpy, %llu memset, %llu sync",
		         (unsigned long long)s->records,
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
	/* --cuda-graphs graph: the launches stand for their nodes, which have no records. */
	uint64_t graphs =
	    c ? c->graph_launches
	      : k[CUPTI_ACTIVITY_KIND_GRAPH_TRACE] + k[CUPTI_ACTIVITY_KIND_DEVICE_GRAPH_TRACE];
	if (graphs)
		fprintf(stderr,
		        "cuptrace: %llu CUDA graph launches, each one slice (--cuda-graphs graph: "
		        "their kernels, copies and memsets not recorded)\n",
		        (unsigned long long)graphs);
	/* Node by node, CUPTI's host work at every node of every launch can make a loop of
	 * short graphs host-bound (README "CUDA graphs"): say so where graphs are most of it. */
	uint64_t work = c ? c->kernels + c->memcpys + c->memsets : 0;
	/* Not with capture windows, where graph mode is not available (graph_trace_usable). */
	int windows = collect_window_defers(s);
	if (c && !graphs && !windows && c->graph_nodes >= 10000 && 2 * c->graph_nodes >= work)
		fprintf(stderr,
		        "cuptrace: %llu of %llu kernels, copies and memsets ran in CUDA graphs; "
		        "`record --cuda-graphs graph` records each graph launch as one slice "
		        "instead, without CUPTI's cost at every node\n",
		        (unsigned long long)c->graph_nodes, (unsigned long long)work);
	uint64_t dgraphs = atomic_load(&s->device_launch_graphs);
	if (dgraphs)
		fprintf(
		    stderr,
		    "cuptrace: %llu CUDA graphs were instantiated for launch from the GPU: node by "
		    "node, CUPTI records none of their work (not their launches, kernels, copies "
		    "or memsets)%s\n",
		    (unsigned long long)dgraphs,
		    windows ? ""
		            : "; `record --cuda-graphs graph` records each of their launches as "
		              "one slice");
	if (cuptrace_runtime_watch_summary(line, sizeof(line)))
		fprintf(stderr, "cuptrace: %s\n", line);
	fprintf(stderr,
	        "cuptrace: dropped records: %llu by CUPTI, %llu by cuptrace (%llu buffers); "
	        "%llu bytes written in %.1f ms at exit\n",
	        (unsigned long long)atomic_load(&s->cupti_dropped),
	        (unsigned long long)atomic_load(&s->records_dropped),
	        (unsigned long long)atomic_load(&s->buffers_dropped),
	        (unsigned long long)s->bytes_written, finish_ms);
	print_cost(s, finish_cpu_ms);
	if (s->out.otlp)
		cuptrace_collect_otlp_summary(s->out.otlp);
	if (where && !s->win.per_file)
		fprintf(stderr, "cuptrace: trace written to %s\n", where);
}

/* An injected session that saw no CUDA work: no runtime call, no context, no GPU activity, no
 * NVTX, nothing lost; at most the driver queries of a process that looked at the GPUs and went
 * on (torchrun, mpirun's Python helpers, a test runner importing torch). Its trace would be an
 * empty timeline beside the ranks', so it is not kept. Runs after the writer thread ended. */
static int no_cuda_work(struct collect_session *s)
{
	static const CUpti_ActivityKind work[] = {
	    CUPTI_ACTIVITY_KIND_RUNTIME,           CUPTI_ACTIVITY_KIND_CONTEXT,
	    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
	    CUPTI_ACTIVITY_KIND_MEMCPY2,           CUPTI_ACTIVITY_KIND_MEMSET,
	    CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,   CUPTI_ACTIVITY_KIND_MARKER,
	    CUPTI_ACTIVITY_KIND_MEMORY2,           CUPTI_ACTIVITY_KIND_MEMORY_POOL,
	    CUPTI_ACTIVITY_KIND_GRAPH_TRACE,       CUPTI_ACTIVITY_KIND_DEVICE_GRAPH_TRACE};
	if (!s->injected || s->write_err || atomic_load(&s->cupti_dropped) ||
	    atomic_load(&s->records_dropped))
		return 0;
	for (size_t i = 0; i < sizeof(work) / sizeof(work[0]); i++)
		if (s->kind_counts[work[i]])
			return 0;
	return 1;
}

static void finish_session(struct collect_session *s)
{
	if (getpid() != s->pid)
		return; /* a forked child: the session, its threads and CUPTI belong to the parent
		         */
	int expected = ST_RUNNING;
	if (!atomic_compare_exchange_strong(&s->state, &expected, ST_STOPPING))
		return;
	int64_t t0 = cuptrace_now_ns(CLOCK_MONOTONIC);
	uint64_t cpu0 = collect_thread_cpu_ns();
	collect_stacks_stop(); /* no samples of the exit path; at most one period's wait */
	collect_window_end(s); /* an open window closes here; the flight recorder's last dump */
	/* Everything CUPTI holds, complete or not (unfinished GPU work comes back with no times
	 * and is counted, not drawn). */
	if (atomic_load(&s->cupti_attached)) {
		cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
		/* The program's threads may go on launching meanwhile (a signal's finish runs on
		 * the flush thread). Off in reverse order, the GPU's kinds before the API calls':
		 * a launch in between leaves a call without its kernel, never a kernel without its
		 * call. Then once more everything: what came between the two flushes would
		 * otherwise stay in CUPTI, or come in a buffer after the end and be freed, one
		 * kind's records without the other's. */
		for (size_t i = CUPTRACE_NKINDS; i-- > 0;)
			cuptiActivityDisable(cuptrace_kinds[i]);
		cuptrace_disable_api(s->api_by_cbid);
		cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
		size_t dropped = 0;
		if (cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped) == CUPTI_SUCCESS &&
		    dropped)
			atomic_fetch_add(&s->cupti_dropped, dropped);
	}
	int64_t t_flushed = cuptrace_now_ns(CLOCK_MONOTONIC);
	/* After the activity flush: the last PM samples (where the exit handler has not taken
	 * them). */
	cuptrace_gm_stop();
	atomic_store(&s->state, ST_DONE); /* later buffers are freed, not queued */
	atomic_store(&s->stop_flusher, 1);
	if (s->have_flusher && !pthread_equal(pthread_self(), s->flusher)) {
		if (s->sigpipe[1] >= 0) {
			unsigned char z = 0;
			ssize_t w = write(s->sigpipe[1], &z, 1);
			(void)w;
		}
		pthread_join(s->flusher, NULL);
		s->have_flusher = 0;
	}
	cuptrace_queue_close(&s->queue);
	if (s->have_writer) {
		pthread_join(s->writer, NULL);
		s->have_writer = 0;
	}
	collect_ranges_reset(); /* pushed after the writer's last look: not in this trace */
	int64_t t_drained = cuptrace_now_ns(CLOCK_MONOTONIC), t_converted = 0;
	collect_window_free(s);
	collect_note_write_err(s, cuptrace_gm_drain(&s->to)); /* the last samples */
	collect_note_write_err(s, collect_stacks_drain(s));   /* the last host stack samples */
	int err = s->write_err;
	int e = collect_finish_output(s, &s->out, &t_converted);
	err = err ? err : e;
	int64_t t_written = cuptrace_now_ns(CLOCK_MONOTONIC);
	if (!t_converted)
		t_converted = t_written;
	/* Where the time at exit goes (it is on the program's own exit path). */
	cuptrace_info("finish: CUPTI flush %.2f ms, writer's last buffers %.2f ms, last records "
	              "%.2f ms, last chunks %.2f ms",
	              (double)(t_flushed - t0) / 1e6, (double)(t_drained - t_flushed) / 1e6,
	              (double)(t_converted - t_drained) / 1e6,
	              (double)(t_written - t_converted) / 1e6);
	/* A session whose capture windows never opened recorded nothing by design. */
	int no_window = s->win.active && !s->win.nlog;
	int idle = !err && (no_cuda_work(s) || no_window);
	collect_note_write_err(s, err);
	/* The trace replaces the old file only now, complete; a session that recorded nothing
	 * leaves it as it was (the empty file that claimed the name goes too). */
	const char *where = collect_settle_output(&s->out, !idle, err);
	if (idle && s->path_claimed && !s->win.per_file)
		unlink(s->out.path);
	s->bytes_written = where ? collect_file_size(where) : 0;
	double ms = (double)(cuptrace_now_ns(CLOCK_MONOTONIC) - t0) / 1e6;
	if (!no_window && cuptrace_cupti_alarm(&(struct cuptrace_cupti_evidence){
	                      .records = s->records,
	                      .buffers = atomic_load(&s->buffers),
	                      .contexts = cuptrace_cupti_alarm_contexts()}))
		cuptrace_warn("CUPTI delivered no records to cuptrace. If the program used CUDA, "
		              "another CUPTI client in this process (torch.profiler, nsys) may "
		              "have taken them: only one CUPTI client works per process.");
	if (s->summary && no_window)
		fprintf(stderr, "cuptrace: pid %d: no capture window opened: no trace written\n",
		        (int)s->pid);
	else if (s->summary && idle)
		fprintf(stderr,
		        "cuptrace: pid %d did no CUDA work (%llu driver queries, no context): no "
		        "trace written\n",
		        (int)s->pid,
		        (unsigned long long)s->kind_counts[CUPTI_ACTIVITY_KIND_DRIVER]);
	else if (s->summary)
		print_summary(s, ms, (double)(collect_thread_cpu_ns() - cpu0) / 1e6, where);
	if (s->summary && !idle)
		collect_window_summary(s);
	/* Where the tracer's memory went, for CUPTRACE_LOG=info (tools/bench/rss_bench.py). */
	cuptrace_info("writer queue: at most %llu of %zu buffers of %zu bytes waiting",
	              (unsigned long long)s->queue.high_water, s->queue.cap, s->buffer_size);
	if (s->out.conv) {
		const struct cuptrace_convert_counts *k = cuptrace_converter_counts(s->out.conv);
		cuptrace_info("reorder window: at most %llu GPU records held",
		              (unsigned long long)k->window_peak);
		/* What a trace with GPU work left without its launch needs looked at first. */
		cuptrace_info(
		    "correlation: %llu flows; %llu API calls written before all their GPU "
		    "work came; %llu GPU records unlinked (%llu whose slot went to a newer "
		    "id, %llu after their call was written, %llu over before their call "
		    "began, %llu still waiting at the end)",
		    (unsigned long long)k->flows, (unsigned long long)k->pending_forced,
		    (unsigned long long)k->unlinked_gpu, (unsigned long long)k->unlinked_evicted,
		    (unsigned long long)k->unlinked_late,
		    (unsigned long long)k->unlinked_before_call,
		    (unsigned long long)k->unlinked_at_finish);
	}
	int64_t t_summed = cuptrace_now_ns(CLOCK_MONOTONIC);
	collect_release_output(&s->out);
	int64_t t_released = cuptrace_now_ns(CLOCK_MONOTONIC);
	if (s->subscriber) {
		cuptiUnsubscribe(s->subscriber);
		s->subscriber = NULL;
	}
	/* The rest of the exit path, after the trace is closed: on the program's exit too. */
	cuptrace_info("finish after the trace: summary %.2f ms, freeing the converter and sink "
	              "%.2f ms, unsubscribing %.2f ms",
	              (double)(t_summed - t_written) / 1e6, (double)(t_released - t_summed) / 1e6,
	              (double)(cuptrace_now_ns(CLOCK_MONOTONIC) - t_released) / 1e6);
	if (!s->dying_signal)
		remove_signal_handlers(s);
	free(s->recs);
	free(s->sizes);
	s->recs = NULL;
	s->sizes = NULL;
	s->rec_cap = 0;
	cuptrace_u64map_free(&s->tids);
	if (s->preload_reg)
		s->preload_reg(NULL);
	s->preload_reg = NULL;
	for (int i = 0; i < 2; i++) {
		if (s->sigpipe[i] >= 0 && !s->dying_signal)
			close(s->sigpipe[i]);
		if (!s->dying_signal)
			s->sigpipe[i] = -1;
	}
	if (s->dying_signal)
		return; /* the flush thread re-raises the signal next: the process ends */
	free(s->out.path);
	s->out.path = NULL;
	/* Ready for another cuptrace_start (the C API may cycle start/stop). */
	atomic_store(&s->state, ST_IDLE);
}

int cuptrace_collect_window(int open)
{
	struct collect_session *s = collect_process_session; /* trampoline: C API */
	int r = collect_window_api(s, open);
	cupti_attach_late(s);
	return r;
}

int cuptrace_collect_on_demand(void)
{
	struct collect_session *s = collect_process_session; /* trampoline: C API */
	return s->win.active && s->win.spec.mode == CUPTRACE_WMODE_ON_DEMAND;
}

void cuptrace_collect_step(void)
{
	struct collect_session *s = collect_process_session; /* trampoline: C API */
	collect_window_step(s);
	cupti_attach_late(s);
}

int cuptrace_collect_stop(void)
{
	struct collect_session *s = collect_process_session; /* trampoline: C API */
	if (atomic_load(&s->state) == ST_IDLE)
		return -EINVAL;
	finish_session(s);
	return s->write_err;
}

int cuptrace_collect_end(void)
{
	struct collect_session *s = collect_process_session; /* trampoline: C API */
	pthread_mutex_lock(&s->lock);
	int state = atomic_load(&s->state), injected = s->injected;
	pthread_mutex_unlock(&s->lock);
	if (state == ST_IDLE)
		return -EINVAL;
	if (injected)
		return -EPERM; /* `cuptrace record`'s: it ends with the program */
	finish_session(s);
	return s->write_err;
}

int cuptrace_collect_range(const char *name)
{
	struct collect_session *s = collect_process_session; /* trampoline: C API */
	int r = name ? collect_range_push(s, name) : collect_range_pop(s);
	cupti_attach_late(s); /* a range that opened a window, or ended a step */
	return r;
}
