/* The Python call stack of the calling thread, read through CPython's stable C API found at run
 * time (dlsym; libpython is never linked), for call stacks at CUDA launches (issue 27).
 *
 * Only a thread that holds the GIL is walked: reading another thread's frames, or this thread's
 * while it runs without the GIL (a C extension that released it before calling CUDA), could race
 * the interpreter. Such a call gets no Python frames. Nothing here raises or leaves a Python
 * error set: an error already set by the program is saved and put back around our calls.
 * Threading: any thread; the caller serializes cuptrace_pystack_code (it keeps a cache). */
#ifndef CUPTRACE_COLLECT_PYSTACK_H
#define CUPTRACE_COLLECT_PYSTACK_H

#include <stddef.h>
#include <stdint.h>

struct cuptrace_pyframe {
	uint64_t code; /* the frame's code object, as an address */
	uint32_t line;
};

/* Looks up the interpreter's functions (again, if an earlier call found none). 1 if this
 * process has Python 3.9 or later. */
int cuptrace_pystack_init(void);
/* The calling thread's Python frames, innermost first, at most max: 0 when it has no Python,
 * does not hold the GIL, or the interpreter is not running. */
size_t cuptrace_pystack_walk(struct cuptrace_pyframe *out, size_t max);
/* A code object's file and function (co_qualname, else co_name), from a cache that keeps a
 * reference to each code object so its address is never reused for another. Call right after
 * the walk that found code, on the same thread (it holds the GIL). 0, or -1 when the cache is
 * full or the names cannot be read (then the frames of this code get no stack). */
int cuptrace_pystack_code(uint64_t code, const char **file, const char **function);
/* The address range of the module that holds the interpreter (python's executable or
 * libpython), to tell its native frames apart; 0 if unknown. */
uint64_t cuptrace_pystack_anchor(void);

#endif
