/* The contract between libcuptrace_preload.so (preload.c: wraps exec and _exit) and
 * libcuptrace.so (collect.c): the tracing process registers a hook that finishes its trace
 * before the process image goes away without running atexit handlers. */
#ifndef CUPTRACE_PRELOAD_PRELOAD_H
#define CUPTRACE_PRELOAD_PRELOAD_H

#include <stddef.h>

enum { CUPTRACE_PRELOAD_EXEC = 1, CUPTRACE_PRELOAD_EXIT = 2 };

/* why: CUPTRACE_PRELOAD_EXEC or _EXIT. For exec the hook writes the finished trace's path
 * (NUL-terminated, empty if none) into path[0..n). Runs on the thread that called exec/_exit,
 * in the process that registered it. */
typedef void (*cuptrace_preload_hook)(int why, char *path, size_t n);

/* Exported by libcuptrace_preload.so; libcuptrace.so finds it with dlsym(RTLD_DEFAULT) when
 * it is preloaded. fn NULL unregisters. */
#define CUPTRACE_PRELOAD_REGISTER "cuptrace_preload_register"
typedef void (*cuptrace_preload_register_fn)(cuptrace_preload_hook fn);

/* The environment variable through which an exec'd image learns the trace paths its earlier
 * images (same pid) already wrote, ':'-separated. */
#define CUPTRACE_TAKEN_ENV "CUPTRACE_TAKEN"

#endif
