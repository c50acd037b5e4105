/* The recorder's trace files: which name a process's trace takes, and how it gets there without
 * ever destroying what the name held before. The traced program writes its trace under a hidden
 * partial name beside the target (.NAME.cuptrace-PID.partial, same directory, so the rename is
 * atomic) and renames it onto the target only once the trace is complete (normal exit, the
 * finish on SIGINT/SIGTERM, a flight recorder's crash dump, a window's end). A run that records
 * nothing, or a program that fails before CUDA starts, leaves the old file as it was.
 *
 * Under `cuptrace record` each partial file is also noted in the run's directory
 * (CUPTRACE_CLAIMS): a file "partial-PID-N" holding "TMP\0TARGET\0STARTTIME\0", STARTTIME being
 * field 22 of /proc/PID/stat (so a pid used again is not taken for the writer; may be empty).
 * The note goes when the partial file is renamed or removed, so what `record` finds there once
 * the command has ended are the traces of processes that died without finishing them (SIGKILL,
 * a crash without the flight recorder): it puts them in place (cuptrace_recfile_leftovers).
 *
 * Used by the injected library (src/inject) and by `record`; no CUPTI here, so the tests drive
 * it directly. Threading: one thread per recfile; the naming reads the environment's values
 * passed in. */
#ifndef CUPTRACE_OUTPUT_RECFILE_H
#define CUPTRACE_OUTPUT_RECFILE_H

#include <limits.h>

/* The settings of a run that decide a trace's name (the CUPTRACE_* variables of the same names,
 * set by `record`; NULL or empty: unset). */
struct cuptrace_recname_env {
	const char *root_pid;     /* CUPTRACE_ROOT_PID: the command's pid */
	const char *taken;        /* CUPTRACE_TAKEN: names earlier images of this pid wrote, ':' */
	const char *claims;       /* CUPTRACE_CLAIMS: the run's directory */
	const char *record_start; /* CUPTRACE_RECORD_START: the run's start, CLOCK_REALTIME ns */
};

/* The environment's values, for cuptrace_recfile_name. */
struct cuptrace_recname_env cuptrace_recname_env_get(void);

/* The name process pid's trace takes from the template tmpl (%p %h %r %l expanded, %n kept for
 * the windows), under the run's rules: a process of the command other than its root writes
 * NAME-PID.EXT where tmpl lacks %p and %r; a name that an earlier image of this pid wrote or
 * that another process of this run claimed first gets -PID, then -PID-2, ... The claim: an
 * entry named by the name's hash, made with O_EXCL in env->claims; without that directory, the
 * name itself made with O_EXCL (an empty file: *claimed set, for the caller to remove if no
 * trace comes), a file already there counting as this run's when its mtime is past
 * env->record_start. Names with %n, and "none", are not claimed. Returns malloc'd memory, or
 * NULL (out of memory). */
char *cuptrace_recfile_name(const char *tmpl, int pid, const struct cuptrace_recname_env *env,
                            int *claimed);

struct cuptrace_recfile {
	char target[PATH_MAX]; /* the name the trace gets (symbolic links followed: they stay) */
	char tmp[PATH_MAX];    /* where it is written until complete; == target when straight */
	char note[PATH_MAX];   /* its note in the run's directory, "" without one */
	int aside;             /* tmp is a partial file, to be renamed onto target */
	int live;              /* tmp exists and is this recfile's to rename or remove */
	int in_place;          /* written in place: the directory takes no new file */
	int old_mode;          /* the permissions of the file target held, or -1 */
};

/* Prepares f for the trace named path: follows symbolic links to the file they lead to, creates
 * the empty partial file beside it (with the old file's permissions where there is one), then its
 * note in run_dir (NULL: none). "-" (standard output), a device or a FIFO are written straight.
 * Where the directory takes no new file but the target is a writable file, the trace is written
 * in place (*in_place set, for a warning). 0 or a negative errno (nothing made). */
int cuptrace_recfile_begin(struct cuptrace_recfile *f, const char *path, const char *run_dir,
                           int *in_place);

/* The trace in tmp is complete and closed: it replaces target in one rename. Where its writing
 * failed (write_failed) and target holds an older non-empty file, the older file stays and the
 * trace keeps its partial name. Returns 0 (in place), 1 (left in f->tmp: an older file kept), or
 * a negative errno (the rename failed; the trace is still in f->tmp). */
int cuptrace_recfile_commit(struct cuptrace_recfile *f, int write_failed);

/* The trace is not wanted (nothing recorded, the start failed): tmp and its note are removed,
 * target is as it was. Safe after commit, twice, and on a zeroed f. */
void cuptrace_recfile_discard(struct cuptrace_recfile *f);

/* A partial file that a process of the run left (record, once the command has ended). */
struct cuptrace_recfile_left {
	char tmp[PATH_MAX];
	char target[PATH_MAX];
	char note[PATH_MAX];
	int pid;
	int alive; /* the process is still running (it outlived the command): still its own */
};

/* Calls fn for every partial file noted in run_dir whose file is still there, and removes the
 * notes whose file is gone. Returns how many fn saw, or a negative errno (run_dir unreadable). */
int cuptrace_recfile_leftovers(const char *run_dir,
                               void (*fn)(const struct cuptrace_recfile_left *l, void *ctx),
                               void *ctx);

/* Is process pid running (not a zombie), and, where start is given, the one started then (field
 * 22 of /proc/PID/stat)? */
int cuptrace_recfile_proc_alive(int pid, const char *start);

#endif
