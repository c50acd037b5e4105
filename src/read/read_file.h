/* Whole files and gzip data into memory (read_file.c), for both readers and read.c. Private to
 * src/read. */
#ifndef CUPTRACE_READ_READ_FILE_H
#define CUPTRACE_READ_READ_FILE_H

#include <stddef.h>
#include <stdint.h>

/* Reads the whole file at path into a malloc'd buffer (*buf, *len; a NUL after the data, so
 * *buf is never NULL on success, even for an empty file). The caller frees *buf. Returns 0 or
 * a negative errno, with a message naming the file in the log. */
int cuptrace_read_file_all(const char *path, uint8_t **buf, size_t *len);

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
