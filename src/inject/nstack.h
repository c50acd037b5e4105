/* Native call stacks at CUDA launches (issue 27): return addresses (libunwind or glibc), and
 * the mapped file each falls in (path, GNU build id, load bias) from dl_iterate_phdr, so that
 * they can be symbolized after the run, on this machine or another with the same files. Nothing
 * is symbolized in the traced process.
 *
 * The unwinder: libunwind (libunwind.so.8, loaded with dlopen where installed: no new link
 * dependency in the traced process), whose unw_backtrace caches what it learns of each return
 * address and is about 15x faster on a repeated stack; else glibc's backtrace(). Both unwind
 * with the DWARF call-frame information every x86-64 object carries (.eh_frame), so code built
 * without frame pointers works.
 * Threading: cuptrace_nstack_walk on any thread; the module functions under cuptrace_nstack_lock.
 */
#ifndef CUPTRACE_INJECT_NSTACK_H
#define CUPTRACE_INJECT_NSTACK_H

#include <stddef.h>
#include <stdint.h>

/* Return addresses of the calling thread, innermost first (at most max). */
size_t cuptrace_nstack_walk(uint64_t *pcs, size_t max);
/* "libunwind" or "glibc": which unwinder the walks use (for the summary and metadata). */
const char *cuptrace_nstack_unwinder(void);

struct cuptrace_module {
	uint64_t lo, hi; /* the address range of its PT_LOAD segments */
	uint64_t bias;   /* load bias: address - bias = the ELF virtual address */
	char *path;
	char *build_id; /* lowercase hex, NULL if none */
	int ours;       /* cuptrace, CUPTI or the CUDA driver: frames left out of stacks */
};

/* The module list is shared by the launch stacks (stacks.c) and the sampler (sampler.c): every
 * use of cuptrace_nstack_module and of what it returns is between these two. */
void cuptrace_nstack_lock(void);
void cuptrace_nstack_unlock(void);

/* The module holding pc, reading the process's modules again when pc is in none known (a
 * library loaded since); NULL if none holds it. The pointer is valid until the next call. */
const struct cuptrace_module *cuptrace_nstack_module(uint64_t pc);
void cuptrace_nstack_free(void);

#endif
