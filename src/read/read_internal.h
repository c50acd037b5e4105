/* What the files of src/read share besides read.h. Private to src/read. */
#ifndef CUPTRACE_READ_READ_INTERNAL_H
#define CUPTRACE_READ_READ_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/* Reads the whole file at path into a malloc'd buffer (*buf, *len; one spare byte after the
 * data, so *buf is never NULL on success, even for an empty file). The caller frees *buf.
 * Returns 0 or a negative errno, with a message naming the file in the log. */
int cuptrace_read_file_all(const char *path, uint8_t **buf, size_t *len);

#endif
