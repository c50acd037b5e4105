/* The cuptrace command line: one file per subcommand (see cuptrace.c for the table). */
#ifndef CUPTRACE_TOOLS_CMD_H
#define CUPTRACE_TOOLS_CMD_H

#include <stddef.h>

int cmd_record(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_stats(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_merge(int argc, char **argv);
int cmd_share(int argc, char **argv);
int cmd_trigger(int argc, char **argv);
int cmd_analyze(int argc, char **argv);
int cmd_symbolize(int argc, char **argv);

/* --symbol-dir: appends dir (borrowed) to the malloc'd *dirs. 0 or -ENOMEM. */
int cmd_symbol_dir_take(const char ***dirs, size_t *n, const char *dir);

struct cuptrace_sink;
/* Replays a trace file (any format cuptrace reads) into sink, which the caller then finishes.
 * Returns 0 or a negative errno; the reader has logged why. cmd_replay_cb has the shape of
 * cuptrace_replay_fn (analyze/merge.h) and ignores ctx. */
int cmd_replay(const char *path, struct cuptrace_sink *sink);
int cmd_replay_cb(void *ctx, const char *path, struct cuptrace_sink *sink);

#include "common/options.h"

/* A setting's value from the command line (text: optarg) or, for cmd_setting_env, from the
 * CUPTRACE_* variable this process has (unset or empty: fine), through the one parser of
 * common/options.h. 0, or -1 after one line "cuptrace CMD: bad value for ..." on stderr. */
int cmd_setting(const char *cmd, enum cuptrace_setting_id id, const char *text,
                struct cuptrace_setting_value *v);
int cmd_setting_env(const char *cmd, enum cuptrace_setting_id id);

/* Exit codes shared by the subcommands (record returns the traced command's status instead). */
#define EXIT_USAGE 2
#define EXIT_FAIL  1
#define EXIT_ABOVE 3 /* diff --fail-above: a time grew by more than allowed */

#endif
