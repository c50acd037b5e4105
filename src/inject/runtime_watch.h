/* Trivial runtime calls (convert/runtime_filter.h) switched off in CUPTI, with a callback that
 * still counts them and brings back the few worth seeing: a call that failed, one that blocked
 * for CUPTRACE_RUNTIME_SLOW_NS or more, and a cudaSetDevice that changed the thread's device.
 * Those come back as CUPTI-shaped API records (same clock, same correlation id), so the capture
 * and the converter treat them like any other.
 *
 * Threading: the callback runs on application threads; drain and counts on the writer thread.
 */
#ifndef CUPTRACE_INJECT_RUNTIME_WATCH_H
#define CUPTRACE_INJECT_RUNTIME_WATCH_H

#include <stddef.h>
#include <stdint.h>

#include <cupti.h>

/* CUPTRACE_RUNTIME / --runtime: parsed by the settings table (common/options.h), whose
 * CUPTRACE_RUNTIME_MODE_* values these are (checked at compile time in runtime_watch.c). */
enum cuptrace_runtime_mode {
	CUPTRACE_RUNTIME_FILTERED, /* default: trivial calls off at the source, nothing else */
	CUPTRACE_RUNTIME_WATCH,    /* off, and the callback keeps the few worth seeing */
	CUPTRACE_RUNTIME_ALL,      /* every call recorded */
};

/* In WATCH mode, turns the callback on for the trivial calls (api_enable.c switched their
 * records off). */
void cuptrace_runtime_watch_setup(CUpti_SubscriberHandle sub, enum cuptrace_runtime_mode mode);

/* Every call that is not trivial timed by callbacks and kept as an API record (on = 1), or no
 * longer (0: their callbacks off; the caller turns the synchronizing calls' back on). For the
 * in-process benchmark (collect_bench.c): callbacks against CUPTI's RUNTIME kind. */
void cuptrace_runtime_watch_all(CUpti_SubscriberHandle sub, int on);

/* From the subscriber's callback, for CUPTI_CB_DOMAIN_RUNTIME_API. */
void cuptrace_runtime_watch_callback(CUpti_CallbackId cbid, const CUpti_CallbackData *d);

/* Takes the records kept so far: *out is a malloc'd array the caller frees; returns the count. */
size_t cuptrace_runtime_watch_drain(CUpti_ActivityAPI **out);

/* One summary line on the trivial calls seen (most frequent first) into buf; returns how many
 * were seen (0: nothing written). */
uint64_t cuptrace_runtime_watch_summary(char *buf, size_t n);

#endif
