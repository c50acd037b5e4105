/* A test library for the call-stack recorder without a GPU (tests/stacks_walker.py): Python loads
 * it with ctypes and takes stacks from known lines, through the same code the tracer runs at a
 * launch (inject/stacks.c), and reads back the frames of the STACK records it queued. */
#include <execinfo.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inject/nstack.h"
#include "inject/stacks.h"
#include "convert/stackrec.h"

#define MAXREC 4096

static void *recs[MAXREC]; /* copies of the STACK records, by stack id */
static size_t sizes[MAXREC];

int probe_init(int mode)
{
	return cuptrace_stacks_init(mode);
}

uint64_t probe_take(void)
{
	return cuptrace_stacks_take();
}

uint64_t probe_count(void)
{
	return cuptrace_stacks_count();
}

static void drain(void)
{
	uint8_t *b;
	uint64_t *pairs;
	size_t len, n;
	cuptrace_stacks_drain(&b, &len, &pairs, &n);
	for (size_t off = 0; off < len;) {
		size_t sz = cuptrace_stackrec_bytes(b + off);
		uint64_t id;
		memcpy(&id, b + off + 8, 8);
		if (id < MAXREC && !recs[id] && (recs[id] = malloc(sz))) {
			memcpy(recs[id], b + off, sz);
			sizes[id] = sz;
		}
		off += sz;
	}
	free(b);
	free(pairs);
}

/* The frames of stack id, outermost first, one a line: kind|function|file|line|module|build
 * id|rel_pc (hex). -1 if unknown. */
int probe_frames(uint64_t id, char *out, size_t n)
{
	drain();
	if (id >= MAXREC || !recs[id])
		return -1;
	struct cuptrace_stack st;
	struct cuptrace_frame *fr = NULL;
	size_t cap = 0;
	if (cuptrace_stackrec_decode(recs[id], sizes[id], &st, &fr, &cap))
		return -1;
	size_t k = 0;
	out[0] = 0;
	for (size_t i = 0; i < st.nframes && k < n; i++) {
		const struct cuptrace_frame *f = &st.frames[i];
		int w = snprintf(out + k, n - k, "%s|%s|%s|%u|%s|%s|%llx\n",
		                 f->kind == CUPTRACE_FRAME_PYTHON ? "py" : "native",
		                 f->function ? f->function : "", f->file ? f->file : "", f->line,
		                 f->module ? f->module : "", f->build_id ? f->build_id : "",
		                 (unsigned long long)f->rel_pc);
		k += w > 0 ? (size_t)w : 0;
	}
	free(fr);
	return (int)st.nframes;
}

/* The recorder's unwinder (libunwind where installed) against glibc's backtrace() from one
 * frame: below this function both must list the same return addresses. Returns the number of
 * frames compared, or -1 on a difference; *unwinder names the recorder's. */
__attribute__((noinline)) int probe_compare_unwinders(const char **unwinder)
{
	uint64_t a[64];
	void *b[64];
	size_t na = cuptrace_nstack_walk(a, 64); /* a[0] inside the walk, a[1] here */
	int nb = backtrace(b, 64);               /* b[0] here */
	*unwinder = cuptrace_nstack_unwinder();
	if (na < 3 || nb < 2 || na - 1 != (size_t)nb)
		return -1;
	for (int i = 1; i < nb; i++)
		if (a[i + 1] != (uint64_t)(uintptr_t)b[i])
			return -1;
	return nb - 1;
}
