/* Native frames of another thread of this process, for the host-stack sampler (issue 46,
 * `record --sample-native`): the sampler thread sends the target a real-time signal the program
 * does not own (tgkill); the handler, on the target thread, takes the interrupted pc, copies a
 * bounded piece of its own stack above the interrupted stack pointer into a preallocated buffer
 * with one process_vm_readv on our own pid (EFAULT past a mapping, never a fault) and walks the
 * frame-pointer chain inside that copy only (each link checked: inside the copy, 8-aligned,
 * rising). It allocates nothing, takes no lock, calls only system calls, keeps errno, and never
 * waits; the sampler waits for it (bounded) and then looks the addresses up in the modules.
 *
 * What may change in the program, and so why it is opt-in (SAMPLING.md): only a thread that is
 * running (state R in /proc/self/task/TID/stat) at this tick and the one before, and does not
 * block the signal, is sent one, so a thread asleep in a call that a handled signal interrupts
 * even with SA_RESTART (nanosleep, poll, epoll_wait, select), or waking from one for a moment,
 * is left alone; one that starts such a call in the microseconds between the check and the
 * signal sees it return EINTR. Code built without frame pointers
 * gives its innermost frame and a walk that stops early (or, rarely, a wrong caller, cut at
 * the first address outside every module).
 *
 * Threading: init/fini and stack from the sampler thread only (one request at a time). */
#ifndef CUPTRACE_INJECT_NSAMPLE_H
#define CUPTRACE_INJECT_NSAMPLE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define NSAMPLE_MAX 64 /* native frames kept per sample */

/* Installs the handler on the highest real-time signal that has the default disposition. 0, or
 * a negative errno (-EBUSY: every one is taken; -ENOTSUP: not x86-64 or aarch64). */
int cuptrace_nsample_init(void);
/* Thread tid's native return addresses, innermost first (the interrupted pc first), at most
 * max (<= NSAMPLE_MAX): their count; 0 when the thread is not running, was not running at the
 * previous tick (tick: the sampler's tick number), or blocks the signal (nothing sent); a negative
 * errno when it could not be read (-ETIMEDOUT: the handler did not run in time; -EPERM: the program
 * took the signal over; then the caller counts a drop). */
int cuptrace_nsample_stack(pid_t tid, uint64_t *pcs, size_t max, uint64_t tick);
/* The signal in use (0: none). */
int cuptrace_nsample_signal(void);
/* Stops sending (the handler stays installed: a signal still in flight finds it). */
void cuptrace_nsample_fini(void);

#endif
