/* The Python call stack of the calling thread, read through CPython's stable C API found at run
 * time (dlsym; libpython is never linked), for call stacks at CUDA launches (issue 27).
 *
 * Only the calling thread's own frames are read, with the GIL held: a thread that released it
 * before calling CUDA (PyTorch releases it around every op) takes it back for the walk, as a
 * native callback into Python does; a thread without a Python state gets no Python frames.
 * (Reading frames without the GIL could race the interpreter's allocator.) Taking the GIL can
 * wait while another Python thread runs: the cost of stacks in multi-threaded Python programs.
 * Nothing here raises or leaves a Python error set: an error already set by the program is saved
 * and put back around our calls. Threading: any thread; the caller serializes cuptrace_pystack_code
 * (it keeps a cache). */
#ifndef CUPTRACE_INJECT_PYSTACK_H
#define CUPTRACE_INJECT_PYSTACK_H

#include <stddef.h>
#include <stdint.h>

struct cuptrace_pyframe {
	uint64_t code; /* the frame's code object, as an address */
	uint32_t line;
};

/* Looks up the interpreter's functions (again, if an earlier call found none). 1 if this
 * process has Python 3.9 or later. */
int cuptrace_pystack_init(void);
/* The calling thread's Python frames, innermost first, at most max: 0 when it has no Python
 * or the interpreter is not running or shutting down, or (may_take_gil 0: --stacks
 * python-held) when it released the GIL. *took_gil says that the walk took the
 * GIL: then the caller looks up the code objects (cuptrace_pystack_code) and calls
 * cuptrace_pystack_release(1) on this thread when done. */
size_t cuptrace_pystack_walk(struct cuptrace_pyframe *out, size_t max, int may_take_gil,
                             int *took_gil);
/* Gives the GIL back if the walk took it. */
void cuptrace_pystack_release(int took_gil);
/* A code object's file and function (co_qualname, else co_name), from a cache that keeps a
 * reference to each code object so its address is never reused for another. Call right after
 * the walk that found code, on the same thread, before the release (it holds the GIL). 0, or -1
 * when the cache is full or the names cannot be read (then the frames of this code get no stack).
 */
int cuptrace_pystack_code(uint64_t code, const char **file, const char **function);
/* The address range of the module that holds the interpreter (python's executable or
 * libpython), to tell its native frames apart; 0 if unknown. */
uint64_t cuptrace_pystack_anchor(void);

#endif
