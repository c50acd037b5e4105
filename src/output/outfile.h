/* Output files that never destroy what was there. A command's output is written under a
 * temporary name beside its target and renamed into place only once it is complete, so a failed
 * or interrupted write leaves the old file as it was; an output that is one of the command's
 * inputs (the same path, a symbolic or a hard link) is refused before anything is opened.
 *
 * Used by the command line's writers (convert, symbolize, analyze --annotate, merge, share),
 * which read whole traces before they decide whether the output is good. The recorder writes
 * aside too, through output/recfile.h (its own names, and `record` puts in place what a killed
 * program left).
 *
 * Threading: one thread per outfile; cuptrace_outfile_abort_all may run in a signal handler. */
#ifndef CUPTRACE_OUTPUT_OUTFILE_H
#define CUPTRACE_OUTPUT_OUTFILE_H

#include <limits.h>
#include <stddef.h>

struct cuptrace_outfile {
	char target[PATH_MAX]; /* the file the output replaces (symbolic links followed) */
	char tmp[PATH_MAX];    /* where the writer writes: beside target; "-" for stdout */
	int mode;              /* permissions the committed file gets */
	int live;              /* tmp exists and is ours to remove */
};

/* Are a and b the same file (device and inode, symbolic links followed)? 0 when either does not
 * exist. "-" is never a file. */
int cuptrace_same_file(const char *a, const char *b);

/* Is path one of inputs[0..n)? Returns the index of the first it is, or -1. */
int cuptrace_output_is_input(const char *path, const char *const *inputs, size_t n);

/* Follows path's symbolic links (at most 40, as the kernel does) to the name of the file they
 * lead to, which need not exist yet: an output goes there and the links stay links. 0 or a
 * negative errno. */
int cuptrace_path_resolve(const char *path, char *out, size_t n);

/* Prepares o for path: follows symbolic links to the file they name (the link stays a link),
 * creates an empty temporary file beside it. "-" means standard output: no temporary file, and
 * o->tmp is "-". Returns 0 or a negative errno (nothing was created then). */
int cuptrace_outfile_begin(struct cuptrace_outfile *o, const char *path);

/* The output is complete: its bytes reach the disk, then it replaces the target in one rename.
 * Returns 0 or a negative errno, in which case the temporary file is removed and the target is
 * as it was. */
int cuptrace_outfile_commit(struct cuptrace_outfile *o);

/* The output is not wanted: the temporary file is removed; the target is as it was. Safe after
 * commit, twice, and on a zeroed o. */
void cuptrace_outfile_abort(struct cuptrace_outfile *o);

/* Removes every temporary file not yet committed or aborted, with async-signal-safe calls only:
 * for the command line's handlers of SIGINT, SIGTERM and SIGHUP. */
void cuptrace_outfile_abort_all(void);

#endif
