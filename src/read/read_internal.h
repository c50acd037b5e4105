/* What the files of src/read share besides read.h. Private to src/read. */
#ifndef CUPTRACE_READ_READ_INTERNAL_H
#define CUPTRACE_READ_READ_INTERNAL_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "common/util.h"

/* Reads the whole file at path into a malloc'd buffer (*buf, *len; a NUL after the data, so
 * *buf is never NULL on success, even for an empty file). The caller frees *buf. Returns 0 or
 * a negative errno, with a message naming the file in the log. */
int cuptrace_read_file_all(const char *path, uint8_t **buf, size_t *len);

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

/* How a gunzip ended. */
enum cuptrace_gz_end {
	CUPTRACE_GZ_COMPLETE = 0, /* every member whole, nothing after */
	CUPTRACE_GZ_CUT,          /* the input ends inside a member (a cut file) */
	CUPTRACE_GZ_LIMIT,        /* max bytes inflated; more would follow */
	CUPTRACE_GZ_CORRUPT,      /* bad data (or garbage after the last member) */
};

/* Inflates gzip data (one member or several, concatenated) into a malloc'd buffer of at most
 * max bytes, NUL-terminated (*out has *outn + 1 bytes). How it ended goes to *end; what was
 * inflated before is kept in every case. Returns 0, or -ENOMEM (then *out is NULL). */
int cuptrace_gunzip(const uint8_t *in, size_t n, size_t max, uint8_t **out, size_t *outn,
                    enum cuptrace_gz_end *end);

#endif
