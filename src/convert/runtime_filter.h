/* Trivial CUDA runtime calls: the queries that frameworks make by the thousand (PyTorch calls
 * cudaGetDevice about six times per kernel) and that say nothing on a timeline. They are left
 * out by default: switched off in CUPTI at the source when recording (collect), and dropped
 * when converting a capture that holds them. A trivial call stays visible when it failed or
 * when it blocked for at least CUPTRACE_RUNTIME_SLOW_NS; cudaSetDevice is recorded when it
 * changes the calling thread's device (the collector decides, the converter keeps what comes).
 * `--runtime all` (CUPTRACE_RUNTIME=all) records every call. Pure tables: no state. */
#ifndef CUPTRACE_CONVERT_RUNTIME_FILTER_H
#define CUPTRACE_CONVERT_RUNTIME_FILTER_H

#include <stddef.h>
#include <stdint.h>

/* A trivial call that took at least this long is kept: it blocked long enough to matter (the
 * first cudaGetDevice of a process, for one, creates the context and takes milliseconds). */
#define CUPTRACE_RUNTIME_SLOW_NS 50000

/* The runtime API names left out, without CUPTI's _vNNNN suffix; NULL-terminated. Also their
 * _ptsz/_ptds variants. */
extern const char *const cuptrace_runtime_trivial_names[];

/* Fills up to max runtime callback ids of trivial calls and returns how many. */
size_t cuptrace_runtime_trivial_cbids(uint32_t *out, size_t max);

/* Is this runtime callback id a trivial call? */
int cuptrace_runtime_cbid_is_trivial(uint32_t cbid);

/* cudaSetDevice (and its variants): trivial, but recorded when the device changes. */
int cuptrace_runtime_cbid_is_set_device(uint32_t cbid);

/* Should a runtime record with this cbid, return value and duration be written when trivial
 * calls are filtered? Non-trivial calls always; trivial ones when they failed, were slow, or
 * are a cudaSetDevice (whose recording the collector already decided). */
int cuptrace_runtime_keep(uint32_t cbid, int32_t ret, uint64_t dur_ns);

#endif
