/* Native frames of sampled host stacks (issue 46; inject/nsample.h), without a GPU and without
 * Python: a thread spins in spin_inner, called from spin_outer (both built with frame pointers,
 * not inlined), another sleeps in nanosleep; the sampler, with native frames, samples both for
 * half a second. What the records say is checked against dladdr (the loader's own symbol table,
 * not the sampler's module list): the spinning thread's samples have native frames, most of
 * them innermost in spin_inner with spin_outer as a caller; every native frame's module path and
 * load-relative pc map back to a loaded address; the sleeping thread is signalled only in the
 * moments it runs (a few samples) and its nanosleep loop is never cut short (it counts the
 * EINTRs it gets: zero). A thread that exits while sampled is dropped or sampled, never a
 * crash. */
#define _GNU_SOURCE
#include "inject/nsample.h"
#include "inject/sampler.h"
#include "check.h"
#include "convert/stackrec.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static atomic_int stop;
static atomic_int sleeper_eintr;
static pid_t spin_tid, sleep_tid;

/* Exported (-rdynamic), so that dladdr names them. */
void spin_inner(volatile uint64_t *x);
void spin_outer(volatile uint64_t *x);

/* A local on the stack gives it a frame of its own: gcc keeps no frame pointer in a leaf
 * function that needs no frame, whatever the options. */
__attribute__((noinline)) void spin_inner(volatile uint64_t *x)
{
	volatile uint64_t b[4];
	for (int i = 0; i < 1000000; i++) {
		b[i & 3] = *x;
		*x = b[i & 3] * 6364136223846793005ull + 1442695040888963407ull;
	}
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void spin_outer(volatile uint64_t *x)
{
	while (!atomic_load(&stop))
		spin_inner(x);
	__asm__ volatile("" ::: "memory");
}

static void *spinner(void *arg)
{
	(void)arg;
	volatile uint64_t x = 1;
	spin_tid = (pid_t)syscall(SYS_gettid);
	cuptrace_sampler_note_thread();
	spin_outer(&x);
	return NULL;
}

static void *sleeper(void *arg)
{
	(void)arg;
	sleep_tid = (pid_t)syscall(SYS_gettid);
	cuptrace_sampler_note_thread();
	while (!atomic_load(&stop)) {
		struct timespec t = {0, 20 * 1000 * 1000};
		if (nanosleep(&t, NULL) && errno == EINTR)
			atomic_fetch_add(&sleeper_eintr, 1);
	}
	return NULL;
}

static void *brief(void *arg)
{
	(void)arg;
	cuptrace_sampler_note_thread();
	volatile uint64_t x = 1;
	spin_inner(&x);
	return NULL;
}

/* The loaded address of (module path, relative pc): the object of that path's load bias. */
struct find {
	const char *path;
	uint64_t bias;
	int found;
};
static int find_bias(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct find *f = arg;
	char exe[4096];
	const char *name = info->dlpi_name;
	if (!name || !*name) {
		ssize_t k = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		exe[k > 0 ? k : 0] = 0;
		name = exe;
	}
	if (!strcmp(name, f->path)) {
		f->bias = info->dlpi_addr;
		f->found = 1;
		return 1;
	}
	return 0;
}

static const char *sym_of(const struct cuptrace_frame *fr)
{
	struct find f = {.path = fr->module};
	if (!fr->module || !dl_iterate_phdr(find_bias, &f) || !f.found)
		return NULL;
	Dl_info di;
	if (!dladdr((void *)(uintptr_t)(fr->rel_pc + f.bias), &di))
		return "";
	return di.dli_sname ? di.dli_sname : "";
}

static void test_native(void)
{
	if (cuptrace_nsample_init()) {
		printf("SKIP: no real-time signal free or not x86-64/aarch64\n");
		return;
	}
	cuptrace_sampler_reset();
	cuptrace_sampler_set_native(1);
	pthread_t a, b, c;
	CHECK_EQ_INT(pthread_create(&a, NULL, spinner, NULL), 0);
	CHECK_EQ_INT(pthread_create(&b, NULL, sleeper, NULL), 0);
	CHECK_EQ_INT(cuptrace_sampler_start(200, 0), 0);
	CHECK_EQ_INT(cuptrace_sampler_native(), 1);
	for (int i = 0; i < 20; i++) { /* threads that exit while sampled */
		CHECK_EQ_INT(pthread_create(&c, NULL, brief, NULL), 0);
		pthread_join(c, NULL);
	}
	struct timespec t = {0, 500 * 1000 * 1000};
	nanosleep(&t, NULL);
	cuptrace_sampler_stop();
	atomic_store(&stop, 1);
	pthread_join(a, NULL);
	pthread_join(b, NULL);

	uint8_t *recs;
	size_t len;
	CHECK_EQ_INT(cuptrace_sampler_drain(&recs, &len), 0);
	struct {
		uint64_t id;
		struct cuptrace_stack st;
		struct cuptrace_frame *fr;
	} stk[256];
	size_t nst = 0;
	int spin = 0, spin_inner_top = 0, with_outer = 0, sleep_n = 0, sleep_native = 0, bad = 0;
	for (size_t off = 0; off < len;) {
		size_t sz = cuptrace_stackrec_bytes(recs + off);
		uint32_t kind;
		memcpy(&kind, recs + off, 4);
		CHECK(sz > 0);
		if (!sz)
			break;
		if (kind == CUPTRACE_REC_STACK && nst < 256) {
			size_t cap = 0;
			stk[nst].fr = NULL;
			CHECK_EQ_INT(cuptrace_stackrec_decode(recs + off, sz, &stk[nst].st,
			                                      &stk[nst].fr, &cap),
			             0);
			stk[nst].id = stk[nst].st.id;
			nst++;
		} else if (kind == CUPTRACE_REC_SAMPLES) {
			const struct cuptrace_stackrec_sample *sm;
			size_t n;
			CHECK_EQ_INT(cuptrace_stackrec_samples(recs + off, sz, &sm, &n), 0);
			for (size_t i = 0; i < n; i++) {
				const struct cuptrace_stack *st = NULL;
				for (size_t k = 0; k < nst && !st; k++)
					if (stk[k].id == sm[i].stack)
						st = &stk[k].st;
				CHECK(st != NULL);
				if (!st || !st->nframes)
					continue;
				for (size_t k = 0; k < st->nframes; k++)
					bad += st->frames[k].kind != CUPTRACE_FRAME_NATIVE ||
					       !sym_of(&st->frames[k]);
				if ((pid_t)sm[i].tid == sleep_tid) {
					sleep_n++;
					sleep_native += st->nframes > 0;
				}
				if ((pid_t)sm[i].tid != spin_tid)
					continue;
				spin++;
				const char *top = sym_of(&st->frames[st->nframes - 1]);
				spin_inner_top += top && strstr(top, "spin_inner") != NULL;
				for (size_t k = 0; k + 1 < st->nframes; k++) {
					const char *s = sym_of(&st->frames[k]);
					with_outer += s && strstr(s, "spin_outer") != NULL && top &&
					              strstr(top, "spin_inner");
				}
			}
		}
		off += sz;
	}
	struct cuptrace_sampler_stats ss;
	cuptrace_sampler_stats(&ss);
	printf("spinning thread: %d samples, %d innermost in spin_inner, %d with spin_outer as a "
	       "caller; sleeping thread: %d samples with native frames; %d bad frames; signal %d; "
	       "stats: %llu kept, %llu native, %llu native failed, %llu dropped\n",
	       spin, spin_inner_top, with_outer, sleep_native, bad, cuptrace_nsample_signal(),
	       (unsigned long long)ss.samples, (unsigned long long)ss.native,
	       (unsigned long long)ss.native_failed, (unsigned long long)ss.dropped);
	/* 200 Hz for 0.5 s: about 100 ticks; the spinning thread runs at most of them (a tick whose
	 * handler did not run within 2 ms, on a loaded machine, is dropped). */
	CHECK(spin >= 20);
	CHECK(spin_inner_top * 10 >= spin * 8);
	CHECK(with_outer * 10 >= spin_inner_top * 8);
	CHECK_EQ_INT(bad, 0);
	/* The sleeper runs only for a moment every 20 ms: a sample now and then, never a sleep
	 * cut short. */
	CHECK(sleep_native * 5 <= spin);
	CHECK_EQ_INT(sleep_n, sleep_native);
	CHECK_EQ_INT(atomic_load(&sleeper_eintr), 0);
	for (size_t k = 0; k < nst; k++)
		free(stk[k].fr);
	free(recs);
	cuptrace_sampler_set_native(0);
}

TEST_MAIN(T(test_native))
