/* The host-stack sampler thread (see sampler.h and SAMPLING.md).
 *
 * Each tick (absolute deadlines on CLOCK_MONOTONIC, so the rate holds whatever a tick costs)
 * reads every target's Python stack through pyread.c, then, under the lock, interns it (a key
 * of (code, line) words, as stacks.c does for launch stacks) and queues the sample. The stack
 * reads happen outside the lock: the writer's drain never waits for a read. The sampler thread
 * blocks every signal, so the program's handlers never run on it. */
#define _GNU_SOURCE
#include "inject/sampler.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <sys/prctl.h>

#include "inject/nsample.h"
#include "inject/nstack.h"
#include "inject/pyread.h"
#include "inject/stacks.h"
#include "common/util.h"
#include "convert/stackrec.h"
#include "format/event.h"

#define PY_MAX      128 /* frames kept per sample, innermost first */
#define TARGETS_MAX 1024
#define SLOTS       (2 * STACKS_MAX)

struct ent {
	uint64_t hash;
	uint32_t id; /* index + 1; 0: empty */
	uint32_t len;
	size_t off; /* key words in s.words */
};

static struct {
	pthread_mutex_t lock;
	pthread_t thread;
	int have_thread;
	atomic_int stop;
	atomic_int paused; /* cuptrace_sampler_pause */
	unsigned hz;
	int all;
	int native;     /* native frames asked for (cuptrace_sampler_set_native) */
	int native_on;  /* ... and the signal is installed */
	int native_err; /* why not (cuptrace_nsample_init) */
	int native_ran; /* the signal was installed in this session: the trace's metadata, written
	                 * after cuptrace_sampler_stop took it down, says so */
	pid_t self_tid; /* the sampler's own thread: never a target */
	/* Targets noted by the callbacks (under lock). */
	pid_t targets[TARGETS_MAX];
	size_t ntargets;
	/* Interning (under lock). */
	struct ent *slots;
	uint64_t *words;
	size_t nwords;
	uint32_t n;
	struct cuptrace_frame *frames;
	/* Queued for the writer (under lock). */
	uint8_t *recs;
	size_t len, cap;
	struct cuptrace_stackrec_sample *samples;
	size_t nsamples, scap;
	struct cuptrace_sampler_stats st;
} s = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* A thread is noted once per session: reset() starts a new generation. */
static atomic_uint gen = 1;
static __thread unsigned noted;

void cuptrace_sampler_note_thread(void)
{
	unsigned g = atomic_load_explicit(&gen, memory_order_relaxed);
	if (noted == g)
		return;
	noted = g;
	if (cuptrace_pyread_init())
		cuptrace_pyread_validate();
	pid_t tid = (pid_t)syscall(SYS_gettid);
	pthread_mutex_lock(&s.lock);
	size_t i = 0;
	while (i < s.ntargets && s.targets[i] != tid)
		i++;
	if (i == s.ntargets && s.ntargets < TARGETS_MAX)
		s.targets[s.ntargets++] = tid;
	pthread_mutex_unlock(&s.lock);
}

/* Every thread of the process but the sampler: from /proc/self/task. */
static size_t all_threads(pid_t *out, size_t max)
{
	DIR *d = opendir("/proc/self/task");
	size_t n = 0;
	if (!d)
		return 0;
	struct dirent *e;
	while ((e = readdir(d)) && n < max) {
		long t = strtol(e->d_name, NULL, 10);
		if (t > 0 && (pid_t)t != s.self_tid)
			out[n++] = (pid_t)t;
	}
	closedir(d);
	return n;
}

/* Describes a new stack (outermost first: the Python frames, then the native ones, whose
 * modules are looked up under the module lock) and queues its STACK record. Under the lock. */
static int describe(uint64_t id, const struct cuptrace_pyread_frame *py, size_t npy,
                    const uint64_t *nat, size_t nnat)
{
	size_t k = 0;
	for (size_t i = npy; i-- > 0;) {
		struct cuptrace_frame *f = &s.frames[k++];
		memset(f, 0, sizeof(*f));
		f->kind = CUPTRACE_FRAME_PYTHON;
		f->line = py[i].line;
		cuptrace_pyread_code(&py[i], &f->file, &f->function);
	}
	cuptrace_nstack_lock();
	for (size_t i = nnat; i-- > 0;) {
		struct cuptrace_frame *f = &s.frames[k++];
		memset(f, 0, sizeof(*f));
		f->kind = CUPTRACE_FRAME_NATIVE;
		const struct cuptrace_module *m = cuptrace_nstack_module(nat[i]);
		f->module = m ? m->path : NULL;
		f->build_id = m ? m->build_id : NULL;
		f->rel_pc = m ? nat[i] - m->bias : nat[i];
	}
	struct cuptrace_stack st = {.id = id, .frames = s.frames, .nframes = k};
	size_t size = cuptrace_stackrec_size(&st);
	int err = !size || CUPTRACE_GROW(s.recs, s.cap, s.len + size);
	if (!err) {
		cuptrace_stackrec_encode(&st, s.recs + s.len);
		s.len += size;
	}
	cuptrace_nstack_unlock();
	return err ? -1 : 0;
}

/* The id of this stack, interned (new ones described); 0 if there is no room. Under the lock. */
static uint64_t intern(const struct cuptrace_pyread_frame *py, size_t npy, const uint64_t *nat,
                       size_t nnat)
{
	size_t len = 1 + 2 * npy + nnat;
	if (s.nwords + len > STACKS_MAX_WORDS)
		return 0;
	uint64_t *key = s.words + s.nwords;
	key[0] = (uint64_t)npy << 32 | nnat;
	for (size_t i = 0; i < npy; i++) {
		key[1 + 2 * i] = py[i].code;
		key[2 + 2 * i] = py[i].line;
	}
	memcpy(key + 1 + 2 * npy, nat, nnat * sizeof(*nat));
	uint64_t h = cuptrace_hash_bytes(key, len * sizeof(*key));
	size_t mask = SLOTS - 1, i = (size_t)h & mask;
	for (; s.slots[i].id; i = (i + 1) & mask) {
		const struct ent *e = &s.slots[i];
		if (e->hash == h && e->len == len && !memcmp(s.words + e->off, key, len * 8))
			return CUPTRACE_SAMPLE_STACK_BASE + e->id;
	}
	if (s.n >= STACKS_MAX || describe(CUPTRACE_SAMPLE_STACK_BASE + s.n + 1, py, npy, nat, nnat))
		return 0;
	s.slots[i] = (struct ent){.hash = h, .id = ++s.n, .len = (uint32_t)len, .off = s.nwords};
	s.nwords += len;
	s.st.stacks = s.n;
	return CUPTRACE_SAMPLE_STACK_BASE + s.n;
}

/* Of a native walk (innermost first), the frames to keep: up to the first address in no module
 * (a walk through code without frame pointers went astray) and, with Python frames, up to the
 * first in the interpreter (the Python frames say more). Return addresses become call sites
 * (one byte back, so that symbolizing finds the calling line); the interrupted pc stays. */
static size_t native_keep(uint64_t *pcs, size_t n, int with_py)
{
	uint64_t anchor = with_py ? cuptrace_pyread_anchor() : 0;
	size_t k = 0;
	cuptrace_nstack_lock();
	const struct cuptrace_module *pm = anchor ? cuptrace_nstack_module(anchor) : NULL;
	uint64_t lo = pm ? pm->lo : 0, hi = pm ? pm->hi : 0;
	for (; k < n; k++) {
		uint64_t pc = k ? pcs[k] - 1 : pcs[k];
		if (!cuptrace_nstack_module(pc) || (pc >= lo && pc < hi))
			break;
		pcs[k] = pc;
	}
	cuptrace_nstack_unlock();
	return k;
}

static void sample_one(pid_t tid, struct cuptrace_pyread_frame *py, uint64_t *nat, uint64_t tick)
{
	int n = cuptrace_pyread_ready() ? cuptrace_pyread_stack(tid, py, PY_MAX) : 0;
	int nn = s.native_on && n >= 0 ? cuptrace_nsample_stack(tid, nat, NSAMPLE_MAX, tick) : 0;
	uint64_t ts = (uint64_t)cuptrace_now_ns(CLOCK_BOOTTIME);
	size_t nk = nn > 0 ? native_keep(nat, (size_t)nn, n > 0) : 0;
	pthread_mutex_lock(&s.lock);
	if (nn < 0)
		s.st.native_failed++;
	else if (nk)
		s.st.native++;
	if (n < 0) {
		s.st.dropped++;
	} else if (n == 0 && !nk) {
		s.st.no_python++;
	} else {
		uint64_t id = s.nsamples < SAMPLER_MAX_PENDING ? intern(py, (size_t)n, nat, nk) : 0;
		if (!id || CUPTRACE_GROW(s.samples, s.scap, s.nsamples + 1)) {
			s.st.dropped++;
		} else {
			s.samples[s.nsamples++] = (struct cuptrace_stackrec_sample){
			    .ts = ts, .tid = (uint32_t)tid, .stack = id};
			s.st.samples++;
		}
	}
	pthread_mutex_unlock(&s.lock);
}

static void *sampler_main(void *arg)
{
	/* Named cuptrace-*: `top` counts the tracer's own CPU by these names. */
	prctl(PR_SET_NAME, "cuptrace-sample", 0, 0, 0);
	(void)arg;
	s.self_tid = (pid_t)syscall(SYS_gettid);
	struct cuptrace_pyread_frame *py = malloc(PY_MAX * sizeof(*py));
	pid_t *tids = malloc(TARGETS_MAX * sizeof(*tids));
	uint64_t *nat = malloc(NSAMPLE_MAX * sizeof(*nat));
	if (!py || !tids || !nat)
		goto out;
	int64_t period = 1000000000ll / s.hz;
	uint64_t tick = 1;
	int64_t next = cuptrace_now_ns(CLOCK_MONOTONIC);
	while (!atomic_load(&s.stop)) {
		next += period;
		int64_t now = cuptrace_now_ns(CLOCK_MONOTONIC);
		if (now > next + period) { /* late (suspended, starved): skip, do not burst */
			uint64_t missed = (uint64_t)((now - next) / period);
			next += (int64_t)missed * period;
			tick += missed + 1; /* no thread was seen at the ticks in between */
			pthread_mutex_lock(&s.lock);
			s.st.late += missed;
			pthread_mutex_unlock(&s.lock);
		}
		struct timespec t = {.tv_sec = next / 1000000000ll, .tv_nsec = next % 1000000000ll};
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL) == EINTR)
			;
		if (atomic_load(&s.stop))
			break;
		if ((!cuptrace_pyread_ready() && !s.native_on) || atomic_load(&s.paused))
			continue; /* no Python (yet), or its layout did not check out; or paused */
		size_t n;
		if (s.all) {
			n = all_threads(tids, TARGETS_MAX);
		} else {
			pthread_mutex_lock(&s.lock);
			n = s.ntargets;
			memcpy(tids, s.targets, n * sizeof(*tids));
			pthread_mutex_unlock(&s.lock);
		}
		for (size_t i = 0; i < n && !atomic_load(&s.stop); i++)
			sample_one(tids[i], py, nat, tick);
		tick++;
	}
out:
	free(py);
	free(tids);
	free(nat);
	return NULL;
}

int cuptrace_sampler_start(unsigned hz, int all_threads_too)
{
	if (s.have_thread)
		return 0;
	if (!hz)
		return -EINVAL;
	pthread_mutex_lock(&s.lock);
	if (!s.slots) {
		s.slots = calloc(SLOTS, sizeof(*s.slots));
		s.words = malloc(STACKS_MAX_WORDS * sizeof(*s.words));
		s.frames = malloc((PY_MAX + NSAMPLE_MAX) * sizeof(*s.frames));
	}
	int ok = s.slots && s.words && s.frames;
	pthread_mutex_unlock(&s.lock);
	if (!ok)
		return -ENOMEM;
	s.hz = hz > CUPTRACE_SAMPLE_MAX_HZ ? CUPTRACE_SAMPLE_MAX_HZ : hz;
	s.all = all_threads_too;
	atomic_store(&s.stop, 0);
	cuptrace_pyread_init();
	if (s.native && !s.native_on) {
		int e = cuptrace_nsample_init();
		s.native_on = !e;
		s.native_ran |= !e;
		s.native_err = e;
	}
	/* Every signal blocked in the new thread: the program's handlers run on its threads. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int e = pthread_create(&s.thread, NULL, sampler_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (e)
		return -e;
	s.have_thread = 1;
	return 0;
}

void cuptrace_sampler_pause(int paused)
{
	atomic_store(&s.paused, paused);
}

void cuptrace_sampler_set_native(int on)
{
	s.native = on;
}

int cuptrace_sampler_native(void)
{
	return s.native ? (s.native_on || s.native_ran ? 1 : s.native_err) : 0;
}

int cuptrace_sampler_running(void)
{
	return s.have_thread;
}

void cuptrace_sampler_stop(void)
{
	if (!s.have_thread)
		return;
	atomic_store(&s.stop, 1);
	pthread_join(s.thread, NULL);
	s.have_thread = 0;
	if (s.native_on)
		cuptrace_nsample_fini();
	s.native_on = 0;
}

int cuptrace_sampler_drain(uint8_t **recs, size_t *len)
{
	pthread_mutex_lock(&s.lock);
	size_t sbytes = s.nsamples ? 8 + s.nsamples * sizeof(*s.samples) : 0;
	int err = 0;
	if (sbytes && CUPTRACE_GROW(s.recs, s.cap, s.len + sbytes)) {
		err = -ENOMEM; /* the samples wait for the next drain */
	} else if (sbytes) {
		uint32_t h[2] = {CUPTRACE_REC_SAMPLES, (uint32_t)s.nsamples};
		memcpy(s.recs + s.len, h, 8);
		memcpy(s.recs + s.len + 8, s.samples, s.nsamples * sizeof(*s.samples));
		s.len += sbytes;
		s.nsamples = 0;
	}
	*recs = s.recs;
	*len = s.len;
	if (!err) {
		s.recs = NULL;
		s.len = s.cap = 0;
	} else {
		*recs = NULL;
		*len = 0;
	}
	pthread_mutex_unlock(&s.lock);
	return err;
}

void cuptrace_sampler_stats(struct cuptrace_sampler_stats *st)
{
	pthread_mutex_lock(&s.lock);
	*st = s.st;
	pthread_mutex_unlock(&s.lock);
}

void cuptrace_sampler_reset(void)
{
	pthread_mutex_lock(&s.lock);
	if (s.slots)
		memset(s.slots, 0, SLOTS * sizeof(*s.slots));
	s.nwords = 0;
	s.n = 0;
	s.ntargets = 0;
	free(s.recs);
	free(s.samples);
	s.recs = NULL;
	s.samples = NULL;
	s.len = s.cap = s.nsamples = s.scap = 0;
	s.native_ran = 0;
	memset(&s.st, 0, sizeof(s.st));
	atomic_fetch_add(&gen, 1);
	pthread_mutex_unlock(&s.lock);
}
