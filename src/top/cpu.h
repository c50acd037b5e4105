/* The tracer's own CPU for cuptrace top (top_cpu.c), from /proc: the CPU time of a process's
 * threads named cuptrace-* (the injected library names its writer, flusher, output, control,
 * sampler and metrics threads so), or of a whole process (top itself, its record). CPU that
 * cuptrace spends in the program's own threads (CUPTI's callbacks, the copies into buffers) is
 * not told apart by /proc and is not in it. Threading: any; no state. */
#ifndef CUPTRACE_TOP_CPU_H
#define CUPTRACE_TOP_CPU_H

#include <stdint.h>
#include <sys/types.h>

/* CPU time (user + system) in ns: of pid's cuptrace-* threads (named_only), or of the whole
 * process (its threads together, as /proc/PID/stat counts them). *nthreads: the threads
 * counted (NULL: not wanted). 0, or a negative errno (the process is gone, no /proc). */
int cuptrace_top_cpu_ns(pid_t pid, int named_only, int64_t *ns, int *nthreads);

#endif
