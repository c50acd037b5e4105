/* Sampled host stacks (issue 46): a thread of cuptrace's own wakes at a fixed wall-clock rate
 * and reads the Python stack of each target thread without stopping it and without the GIL
 * (inject/pyread.h), whatever that thread does: runs, sleeps or waits on a lock or a queue.
 * Each distinct stack is interned and described once, as a STACK record (convert/stackrec.h,
 * ids from CUPTRACE_SAMPLE_STACK_BASE up, apart from the launch stacks' ids); each sample is a
 * (time, thread, stack id) triple in a SAMPLES record. See SAMPLING.md for the mechanism, why,
 * and its limits. With native frames (cuptrace_sampler_set_native), each sample of a running
 * thread also carries its native return addresses (inject/nsample.h), symbolized after the run.
 *
 * Targets: the threads that called CUDA (cuptrace_sampler_note_thread from the API callbacks),
 * or every thread of the process. A stack that cannot be read safely is counted and dropped.
 * Memory is bounded: SAMPLER_MAX_PENDING samples wait for the writer at most, STACKS_MAX
 * distinct stacks; past either, samples are counted as dropped.
 * No CUPTI here, so tests drive it without a GPU. Threading: start/stop from one thread;
 * note_thread from any; drain from the writer; one lock inside. */
#ifndef CUPTRACE_INJECT_SAMPLER_H
#define CUPTRACE_INJECT_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#define CUPTRACE_SAMPLE_DEFAULT_HZ 100
#define CUPTRACE_SAMPLE_MAX_HZ     1000
#define SAMPLER_MAX_PENDING        (1u << 20)

struct cuptrace_sampler_stats {
	uint64_t samples;       /* kept */
	uint64_t dropped;       /* a stack that could not be read safely, or no room */
	uint64_t no_python;     /* a target without Python frames at that moment */
	uint64_t stacks;        /* distinct stacks */
	uint64_t late;          /* ticks skipped because the sampler ran late */
	uint64_t native;        /* samples with native frames */
	uint64_t native_failed; /* native frames asked for and not read (the sample kept its
	                         * Python frames) */
};

/* Native frames too (nsample.h: a signal to each running target), from the next start. */
void cuptrace_sampler_set_native(int on);
/* 1: native frames are taken; 0: not asked for; a negative errno: asked for, unavailable. */
int cuptrace_sampler_native(void);
/* Starts the sampler thread at hz samples a second per target thread (every thread with
 * all_threads). 0, or a negative errno (it is then off). */
int cuptrace_sampler_start(unsigned hz, int all_threads);
/* The calling thread becomes a target (cheap after the first call on a thread); it also lets
 * the Python reader check its layout against this thread (pyread validate). */
void cuptrace_sampler_note_thread(void);
/* paused 1: the sampler takes no samples (it still wakes at its rate) until paused 0. Any
 * thread. */
void cuptrace_sampler_pause(int paused);
/* Stops and joins the sampler thread (what it queued stays for the drain). */
void cuptrace_sampler_stop(void);
/* Takes what was queued: STACK records, then one SAMPLES record, back to back (each 8-aligned,
 * its size in it). The caller frees *recs. 0, or -ENOMEM. */
int cuptrace_sampler_drain(uint8_t **recs, size_t *len);
void cuptrace_sampler_stats(struct cuptrace_sampler_stats *st);
/* 1 while the sampler runs. */
int cuptrace_sampler_running(void);
/* Forgets everything (a new session; tests). Only while stopped. */
void cuptrace_sampler_reset(void);

#endif
