/* Growing arrays and interning strings with a sticky error, as both readers' decoders do.
 * Private to src/read. */
#ifndef CUPTRACE_READ_READ_UTIL_H
#define CUPTRACE_READ_READ_UTIL_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "common/util.h"

/* What both readers' decoders keep as they go: grown arrays and interned strings, with the
 * first allocation failure kept in *err (-ENOMEM) and the array left as it was. */
static inline void *cuptrace_read_grow(void *arr, size_t *cap, size_t n, size_t size, int *err)
{
	void *p = cuptrace_grow(arr, cap, n, size);
	if (!p)
		*err = -ENOMEM;
	return p ? p : arr;
}

static inline uint32_t cuptrace_read_intern(struct cuptrace_strtab *t, const void *s, size_t n,
                                            int *err)
{
	uint32_t id = cuptrace_strtab_intern(t, s, n);
	if (!id)
		*err = -ENOMEM;
	return id;
}

/* Appends one element to r->arr (counted by r->n, capacity r->cap) and returns it, or NULL
 * once r->err is set. */
#define CUPTRACE_READ_PUSH(r, arr, n, cap)                                                         \
	((((r)->arr =                                                                              \
	       cuptrace_read_grow((r)->arr, &(r)->cap, (r)->n + 1, sizeof(*(r)->arr), &(r)->err)), \
	  !(r)->err)                                                                               \
	     ? &(r)->arr[(r)->n++]                                                                 \
	     : NULL)

#endif
