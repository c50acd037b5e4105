/* A table of call stacks (format/event.h) that owns its frames and strings: each distinct stack
 * is stored once and gets an id (1, 2, ... in first-seen order); a stack is handed to a sink once,
 * before the first slice that names it. Used by the readers, and by the sinks that forward or
 * rewrite stacks (merge, symbolize). Not thread-safe: one owner. */
#ifndef CUPTRACE_READ_STACKTAB_H
#define CUPTRACE_READ_STACKTAB_H

#include "common/util.h"
#include "format/event.h"

#include <stddef.h>
#include <stdint.h>

struct cuptrace_stacktab {
	struct cuptrace_strtab strs;   /* frame strings */
	struct cuptrace_strtab keys;   /* a stack's content as bytes -> its id */
	struct cuptrace_frame *frames; /* every stack's frames, strings borrowed from strs */
	size_t nframes, fcap;
	struct cuptrace_stab_entry {
		size_t frame0, nframes;
		int sent; /* handed to the sink already */
	} * stacks;
	size_t nstacks, scap;
	uint8_t *kbuf; /* scratch for keys */
	size_t kcap;
};

void cuptrace_stacktab_init(struct cuptrace_stacktab *t);
void cuptrace_stacktab_free(struct cuptrace_stacktab *t);
/* Stores frames[0..n) (outermost first; strings copied) and returns its id (>= 1), the same id
 * for equal content; 0 on allocation failure. n may be 0. */
uint32_t cuptrace_stacktab_add(struct cuptrace_stacktab *t, const struct cuptrace_frame *frames,
                               size_t n);
/* The stack of id (frames valid until the next add), or NULL for an unknown id. */
int cuptrace_stacktab_get(const struct cuptrace_stacktab *t, uint32_t id,
                          struct cuptrace_stack *out);
/* Sends stack id to sink through its stack() op, unless already sent (or the sink takes no
 * stacks); the stack goes out under id + id_offset. 0 or the op's error. */
int cuptrace_stacktab_send(struct cuptrace_stacktab *t, uint32_t id, struct cuptrace_sink *sink,
                           uint64_t id_offset);

/* Parses a stack written as text, one frame a line ("\n"), innermost first, as the Chrome JSON
 * "stack" argument holds it: "function (file:line)", "function (module+0xPC)" for a native frame
 * not symbolized, "??" for an unknown function. Stores it and returns its id (0 on allocation
 * failure). A frame with a file that is not Python's (.py, <...>) is taken as native. */
uint32_t cuptrace_stacktab_add_text(struct cuptrace_stacktab *t, const char *text, size_t len);
/* One frame as such a line, snprintf-style (returns the length it needs). */
int cuptrace_stack_format_line(const struct cuptrace_frame *f, char *buf, size_t size);

#endif
