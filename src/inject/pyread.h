/* Another thread's Python stack, read without the GIL (issue 46: sampled host stacks).
 *
 * The sampler (inject/sampler.c) must not take the GIL: a thread blocked on a queue or in a
 * long native call may hold it, and waiting for it would stop the sampler (and skew every
 * sample towards the moments the GIL is free). So this reader never calls into the
 * interpreter while sampling: it reads CPython's structures (the interpreter's list of thread
 * states, a thread's frame chain, code objects, their name strings and line tables) through
 * process_vm_readv on our own pid, which fails with EFAULT on an unmapped address instead of
 * faulting. What it reads can change under it (the thread runs on): every object is checked
 * (a code object's type is PyCode_Type, strings are PyUnicode_Type, sizes are bounded), and a
 * stack that does not check out is refused, to be counted and dropped by the caller.
 *
 * Layouts: CPython 3.13 publishes its own offsets (_Py_DebugOffsets at the start of
 * _PyRuntime); 3.11 and 3.12 use offsets known from their headers (see SAMPLING.md). 3.9 and
 * 3.10 (a different frame object) are not read: no Python frames there. The offsets are
 * checked once against the live interpreter from a thread that has a Python state
 * (cuptrace_pyread_validate): its own thread state must be found in the interpreter's list
 * with its own thread ids, and its frames must be code objects; if not, nothing is read.
 *
 * Threading: init and validate once (any thread; the first caller wins); stack and code from
 * one thread at a time (the sampler's); they keep a cache of code objects. */
#ifndef CUPTRACE_INJECT_PYREAD_H
#define CUPTRACE_INJECT_PYREAD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct cuptrace_pyread_frame {
	uint64_t code; /* the code object's address */
	uint32_t line; /* 0 if unknown */
	uint32_t ent;  /* the reader's cache entry of the code (for cuptrace_pyread_code) */
};

/* Finds the interpreter (dlsym; nothing is linked) and its layout. 1 if this process runs a
 * CPython this reader knows (3.11-3.13), 0 if not (yet: looked for again on later calls). */
int cuptrace_pyread_init(void);
/* From a thread with a Python state (a thread that calls CUDA from Python): checks the layout
 * against that thread's own state. 1 if the reader may be used, 0 if not (then never), -1 if
 * this thread cannot tell (no Python state): ask again from another. */
int cuptrace_pyread_validate(void);
/* 1 after a successful validation. */
int cuptrace_pyread_ready(void);
/* The Python frames of thread tid (a kernel thread id of this process), innermost first, at
 * most max: their count (0: the thread has no Python state or no frames), or -EFAULT / -EINVAL
 * when something read did not check out (the stack is dropped). */
int cuptrace_pyread_stack(pid_t tid, struct cuptrace_pyread_frame *out, size_t max);
/* The file and function of a frame's code (valid until the next cuptrace_pyread_stack). */
void cuptrace_pyread_code(const struct cuptrace_pyread_frame *f, const char **file,
                          const char **function);
/* An address inside the interpreter's code (its module holds the interpreter's native frames),
 * 0 before init found one. */
uint64_t cuptrace_pyread_anchor(void);
/* "3.11" and so on, or NULL before init found one. */
const char *cuptrace_pyread_version(void);
/* Frees the cache (tests, end of a session). */
void cuptrace_pyread_reset(void);

#endif
