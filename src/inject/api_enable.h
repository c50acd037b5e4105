/* Switches the API activity kinds (RUNTIME, DRIVER) on with cuptrace's filters: the runtime's
 * own driver calls and the trivial runtime calls stay off unless asked for. Shared by
 * libcuptrace and the benchmark's CUPTI floor, so the floor pays exactly the same CUPTI cost.
 * Call once, from the thread that sets CUPTI up, before any CUDA work. */
#ifndef CUPTRACE_INJECT_API_ENABLE_H
#define CUPTRACE_INJECT_API_ENABLE_H

/* driver_mode: CUPTRACE_DRIVER_* (common/options.h): WORK keeps the driver calls that make,
 * order or wait for GPU work (convert.h's cuptrace_driver_cbid_is_work), USER every call but
 * the runtime's own, ALL every call.
 * by_cbid 0: cuptiActivityEnable for the kind, then each filtered call off.
 * by_cbid 1: the kind stays off and each call that is kept is switched on by itself.
 * Returns 0, or the first CUPTI error (as a negative number). */
int cuptrace_enable_api(int driver_mode, int runtime_all, int by_cbid);

/* Every API record off: the kinds, and with by_cbid each call that was switched on by itself
 * (disabling a kind that was never on leaves those on). */
void cuptrace_disable_api(int by_cbid);

/* Turns on the callbacks of cudaProfilerStart/Stop and cuProfilerStart/Stop for subscriber sub
 * (a void * for CUpti_SubscriberHandle): what a --capture-range cuda-profiler-api window waits
 * on, in libcuptrace and in the floor that measures it. */
void cuptrace_enable_profiler_callbacks(void *sub);

#endif
