/* Native frames of another thread through a signal to it (see nsample.h). */
#define _GNU_SOURCE
#include "inject/nsample.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#define COPY_PAGES 8 /* the stack copied above the interrupted stack pointer: 32 KiB */
#define PAGE       4096

/* The one request in flight. state: IDLE -> ARMED (sampler) -> BUSY (handler, on the target)
 * -> DONE (handler) -> IDLE (sampler); or ARMED -> IDLE (sampler, timed out: a late handler
 * then finds nothing armed and returns). Only the owner of a state writes the fields: the
 * sampler while IDLE/ARMED (tid), the handler while BUSY (pcs, n). */
enum { IDLE = 0, ARMED, BUSY, DONE };
static struct {
	_Atomic int state;
	_Atomic int dead; /* a handler never finished: no more requests */
	int sig;
	pid_t pid, tid;
	uint64_t pcs[NSAMPLE_MAX];
	int n;
	size_t max;
	uint8_t copy[COPY_PAGES * PAGE]; /* preallocated: the handler allocates nothing */
} q;

static struct sigaction ours;

static void regs(const ucontext_t *uc, uint64_t *pc, uint64_t *sp, uint64_t *fp)
{
#if defined(__x86_64__)
	*pc = (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
	*sp = (uint64_t)uc->uc_mcontext.gregs[REG_RSP];
	*fp = (uint64_t)uc->uc_mcontext.gregs[REG_RBP];
#elif defined(__aarch64__)
	*pc = (uint64_t)uc->uc_mcontext.pc;
	*sp = (uint64_t)uc->uc_mcontext.sp;
	*fp = (uint64_t)uc->uc_mcontext.regs[29];
#else
	(void)uc;
	*pc = *sp = *fp = 0;
#endif
}

static uint64_t load(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, sizeof(v));
	return v;
}

/* On the target thread: async-signal-safe (system calls, plain memory of q, no errno change). */
static void handler(int sig, siginfo_t *si, void *ctx)
{
	(void)sig;
	int saved = errno;
	int want = ARMED;
	/* Only our own request (tgkill from this process), for this very thread. */
	if (!si || si->si_code != SI_TKILL || si->si_pid != q.pid ||
	    (pid_t)syscall(SYS_gettid) != q.tid ||
	    !atomic_compare_exchange_strong(&q.state, &want, BUSY)) {
		errno = saved;
		return;
	}
	uint64_t pc, sp, fp;
	regs(ctx, &pc, &sp, &fp);
	int n = 0;
	if (pc)
		q.pcs[n++] = pc;
	/* The stack above sp, page by page: a page that is not mapped ends the copy there. */
	uint64_t base = sp & ~(uint64_t)(PAGE - 1);
	struct iovec local = {q.copy, sizeof(q.copy)}, remote[COPY_PAGES];
	for (int i = 0; i < COPY_PAGES; i++)
		remote[i] = (struct iovec){(void *)(uintptr_t)(base + (uint64_t)i * PAGE), PAGE};
	ssize_t got = sp ? syscall(SYS_process_vm_readv, q.pid, &local, 1UL, remote,
	                           (unsigned long)COPY_PAGES, 0UL)
	                 : -1;
	uint64_t end = got > 0 ? base + (uint64_t)got : base;
	/* The frame-pointer chain, inside the copy only: [fp] the caller's fp, [fp + 8] the
	 * return address; each caller's frame lies higher on the stack. */
	while (n < (int)q.max && fp >= sp && fp + 16 <= end && !(fp & 7)) {
		uint64_t next = load(q.copy + (fp - base)), ret = load(q.copy + (fp - base) + 8);
		if (!ret)
			break;
		q.pcs[n++] = ret;
		if (next <= fp)
			break;
		fp = next;
	}
	q.n = n;
	atomic_store(&q.state, DONE);
	syscall(SYS_futex, &q.state, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	errno = saved;
}

int cuptrace_nsample_init(void)
{
#if !defined(__x86_64__) && !defined(__aarch64__)
	return -ENOTSUP;
#else
	if (q.sig)
		return 0;
	q.pid = getpid();
	memset(&ours, 0, sizeof(ours));
	ours.sa_sigaction = handler;
	/* SA_RESTART: calls the kernel restarts after a handled signal are restarted. */
	ours.sa_flags = SA_SIGINFO | SA_RESTART;
	sigfillset(&ours.sa_mask); /* nothing else runs on top of it */
	for (int sig = SIGRTMAX; sig >= SIGRTMIN + 2; sig--) {
		struct sigaction old;
		if (sigaction(sig, NULL, &old) || old.sa_handler != SIG_DFL ||
		    (old.sa_flags & SA_SIGINFO))
			continue;
		if (sigaction(sig, &ours, NULL))
			continue;
		q.sig = sig;
		return 0;
	}
	return -EBUSY;
#endif
}

int cuptrace_nsample_signal(void)
{
	return q.sig;
}

void cuptrace_nsample_fini(void)
{
	/* The handler stays: a signal still pending when it was removed would take the default
	 * action of a real-time signal, ending the process. */
	atomic_store(&q.dead, 1);
}

/* Per thread (hashed by tid), the last tick at which it was seen running. */
#define SEEN 1024
static struct {
	pid_t tid;
	uint64_t tick;
} seen[SEEN];

/* Is thread tid running, and does it let the signal through? From /proc/self/task/TID. */
static int may_signal(pid_t tid, int sig)
{
	char path[64], buf[2048];
	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	const char *p = strrchr(buf, ')'); /* the name may hold anything: the state follows ')' */
	if (!p || p[1] != ' ' || p[2] != 'R')
		return 0;
	snprintf(path, sizeof(path), "/proc/self/task/%d/status", (int)tid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	const char *m = strstr(buf, "\nSigBlk:");
	unsigned long long blk;
	if (!m || sscanf(m + 8, "%llx", &blk) != 1)
		return 0;
	return !(blk & (1ull << (sig - 1)));
}

static int64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000ll + t.tv_nsec;
}

int cuptrace_nsample_stack(pid_t tid, uint64_t *pcs, size_t max, uint64_t tick)
{
	if (!q.sig || atomic_load(&q.dead))
		return -ENOTSUP;
	/* Running now and at the tick before: a thread that runs in short bursts between sleeps
	 * (where a signal might meet the start of its next sleep) is left alone. */
	size_t h = ((size_t)tid * 2654435761u) % SEEN;
	int before = seen[h].tid == tid && seen[h].tick + 1 == tick;
	if (!may_signal(tid, q.sig))
		return 0;
	seen[h].tid = tid;
	seen[h].tick = tick;
	if (!before)
		return 0;
	/* Still ours? A program that installed its own handler since must not get our signal. */
	struct sigaction cur;
	if (sigaction(q.sig, NULL, &cur) || cur.sa_sigaction != handler) {
		atomic_store(&q.dead, 1);
		return -EPERM;
	}
	q.tid = tid;
	q.max = max < NSAMPLE_MAX ? max : NSAMPLE_MAX;
	q.n = 0;
	atomic_store(&q.state, ARMED);
	if (syscall(SYS_tgkill, q.pid, tid, q.sig)) {
		atomic_store(&q.state, IDLE);
		return -ESRCH;
	}
	/* The handler runs as soon as the thread is scheduled: wait 2 ms for it, then withdraw
	 * the request; one already under way (BUSY) never blocks, so it is waited for (up to a
	 * second: a thread stopped in its handler by a debugger ends native sampling). */
	int64_t start = now_ns(), limit = 2000000;
	for (;;) {
		int st = atomic_load(&q.state);
		if (st == DONE)
			break;
		int64_t left = start + limit - now_ns();
		if (left <= 0) {
			int want = ARMED;
			if (atomic_compare_exchange_strong(&q.state, &want, IDLE))
				return -ETIMEDOUT;
			if (limit < 1000000000ll) { /* BUSY: it is reading; give it time */
				limit = 1000000000ll;
				continue;
			}
			atomic_store(&q.dead, 1);
			return -ETIMEDOUT;
		}
		struct timespec t = {0, left < 200000 ? left : 200000};
		syscall(SYS_futex, &q.state, FUTEX_WAIT_PRIVATE, st, &t, NULL, 0);
	}
	int n = q.n;
	memcpy(pcs, q.pcs, (size_t)n * sizeof(*pcs));
	atomic_store(&q.state, IDLE);
	return n;
}
