/* A POSIX ustar archive of whole files: what Perfetto's trace processor (and so
 * ui.perfetto.dev) opens as several traces in one session. */
#ifndef CUPTRACE_OUTPUT_TAR_H
#define CUPTRACE_OUTPUT_TAR_H

#include <stddef.h>

/* Writes path: the n files at files[i], stored under names[i] (a base name of at most 99
 * bytes). Returns 0 or a negative errno; on failure path is removed. */
int cuptrace_tar_write(const char *path, const char *const *names, const char *const *files,
                       size_t n);

#endif
