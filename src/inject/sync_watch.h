/* Synchronizations timed by cuptrace's own callbacks (issue 45), instead of CUPTI's
 * SYNCHRONIZATION activity kind, which CUPTI pays for on every launch (tools/bench/README.md,
 * "Where CUPTI's time goes"). Callbacks are on only for the calls that synchronize: device,
 * context, stream and event synchronize, stream and event queries, stream waits on events,
 * in the runtime and the driver. Each call that returned (a query also when not ready, as
 * CUPTI records them) becomes a CUpti_ActivitySynchronization2 record with CUPTI's layout,
 * the call's correlation id, its stream (cuptiGetStreamIdEx) and event, timed from the
 * callback's entry to its exit: the converter draws them as it draws CUPTI's, and a capture
 * holding them reads as one holding CUPTI's.
 *
 * A runtime call reaches the driver's (cudaStreamSynchronize -> cuStreamSynchronize), whose
 * own API record CUPTI does not write: the record is the runtime call's, and the driver calls
 * inside it are passed over. Event ids: CUPTI gives callbacks none of its own, so each event
 * handle gets a number of ours at its first synchronization (the same for every record of that
 * event; a handle reused after cudaEventDestroy keeps its number).
 *
 * The writer holds each record until the CUPTI buffer with its API call's record has gone to
 * the converter (the converter keeps a synchronization whose call has not come only for a
 * while, and a thread that synchronizes and then waits, as NCCL's watchdog does, hands its
 * buffer over only at the next flush).
 *
 * Threading: the callback runs on application threads (one lock, taken once per
 * synchronizing call); everything else on the writer thread. */
#ifndef CUPTRACE_INJECT_SYNC_WATCH_H
#define CUPTRACE_INJECT_SYNC_WATCH_H

#include <stddef.h>
#include <stdint.h>

#include <cupti.h>

/* Turns the callbacks of the synchronizing calls on (for subscriber sub). */
void cuptrace_sync_watch_setup(CUpti_SubscriberHandle sub);
/* Turns them off again (the in-process benchmark switch, collect_bench.c). */
void cuptrace_sync_watch_teardown(CUpti_SubscriberHandle sub);

/* From the subscriber's callback, for the runtime and driver domains; returns 1 if id is one
 * of the synchronizing calls. */
int cuptrace_sync_watch_callback(CUpti_CallbackDomain d, CUpti_CallbackId id,
                                 const CUpti_CallbackData *cd);

/* Whether calls make records (1 after setup): capture windows switch it with the API kinds,
 * so that no record is made of a call whose API record CUPTI does not write. Any thread. */
void cuptrace_sync_watch_active(int on);

/* Is this (domain's activity kind, cbid) a synchronizing call? (RUNTIME or DRIVER.) */
int cuptrace_sync_watch_is_sync_call(CUpti_ActivityKind kind, uint32_t cbid);

/* ---- writer thread ---- */

/* Moves the records made since the last call into the held ones. */
void cuptrace_sync_watch_take(void);
/* Held records, or records that may come (a call whose record came before ours did)? */
int cuptrace_sync_watch_pending(void);
/* An API record of a CUPTI buffer: the held record of its call (if any) may go. */
void cuptrace_sync_watch_api_seen(const CUpti_ActivityAPI *a);
/* Takes the records that may go (all: every held one, at the end): *out is a malloc'd array
 * the caller frees; returns the count. */
size_t cuptrace_sync_watch_ready(CUpti_ActivitySynchronization2 **out, int all);
/* Forgets everything (a new session; tests). */
void cuptrace_sync_watch_reset(void);
/* Tests: the clock the calls are timed by (NULL: CLOCK_BOOTTIME, the trace's clock). */
void cuptrace_sync_watch_clock(uint64_t (*now)(void));

#endif
