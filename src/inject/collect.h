/* The tracing session inside the traced process: CUPTI setup, buffer hand-off to the writer
 * thread, periodic flush, and finalization at exit, on SIGINT/SIGTERM, or on cuptrace_stop().
 * One session per process; all entry points are thread-safe and idempotent. */
#ifndef CUPTRACE_INJECT_COLLECT_H
#define CUPTRACE_INJECT_COLLECT_H

/* path NULL: CUPTRACE_OUTPUT or the default. injected: called from InitializeInjection (inside
 * cuInit: no CUDA calls allowed). Returns 0, -EALREADY, or a negative errno (message logged). */
int cuptrace_collect_start(const char *path, int injected);
int cuptrace_collect_flush(void);
int cuptrace_collect_stop(void);
/* In a session with capture windows (record --on-demand, --capture-range, ...): opens (open = 1)
 * or closes a window, as a trigger would. -EINVAL when the session has no windows or none runs;
 * -EALREADY when one is open already (or none is, to close). */
int cuptrace_collect_window(int open);
/* Whether the running session opens a window when the C API starts it (--on-demand). */
int cuptrace_collect_on_demand(void);
/* Call stacks (record --stacks) paused (on = 0) or resumed from now on, every thread. 0, or
 * -ENOTSUP when the session takes no stacks (collect_stacks.c). */
int cuptrace_collect_stacks(int on);
/* Ends the session cuptrace_start began, windows or not (cuptrace_end()). 0 or the first write
 * error; -EINVAL: no session; -EPERM: the session is the injected one (`cuptrace record`'s). */
int cuptrace_collect_end(void);
/* name: a range of that name begins on this thread; NULL: the innermost ends (-EINVAL if none
 * is open). collect_ranges.c. */
int cuptrace_collect_range(const char *name);
/* A training step ended (cuptrace_step(): optimizer.step() through --steps's Python hook). */
void cuptrace_collect_step(void);

/* InitializeInjectionNvtx2's work (nvtx_watch.c): CUPTI's NVTX handlers, and the range watcher
 * in front of them where capture windows follow NVTX ranges. Returns what NVTX expects (1: a
 * tool is attached). */
int cuptrace_nvtx_inject(const void *get_export_table);

#endif
