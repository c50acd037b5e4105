/* The cuptrace command line: one file per subcommand; the commands and their options are the
 * tables of opt_table.h. */
#ifndef CUPTRACE_TOOLS_CMD_H
#define CUPTRACE_TOOLS_CMD_H

#include <stdio.h>
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
int cmd_top(int argc, char **argv);

/* record: puts in place the traces that processes of the run left unfinished in their partial
 * files (noted in run_dir, the run's CUPTRACE_CLAIMS), one line on stderr each; an unfinished
 * trace that holds nothing leaves an older file as it was. Returns how many it found. */
int record_leftovers(const char *run_dir);

/* --symbol-dir: appends dir (borrowed) to the malloc'd *dirs. 0 or -ENOMEM. */
int cmd_symbol_dir_take(const char ***dirs, size_t *n, const char *dir);

struct cuptrace_sink;
struct cuptrace_symbolizer;

/* --group-by line's options, shared by stats, diff and analyze (tools/cmd_lines.c): the
 * user-code patterns (analyze/lines.h) and where native frames are symbolized from. */
struct cmd_lines {
	const char **skip, **keep, **dirs; /* borrowed from argv */
	size_t nskip, nkeep, ndirs;
	struct cuptrace_symbolizer *sym;
};
#define CMD_LINES_OPT_SKIP 0x5E1
#define CMD_LINES_OPT_KEEP 0x5E2
#define CMD_LINES_OPT_DIR  0x5E3
/* --group-by's id in the option table (opt_table.c), for stats, diff and analyze. */
#define CMD_OPT_GROUP_BY 0x5E4
/* record's options that are settings of libcuptrace.so: CMD_WOPT + the setting's id. */
#define CMD_WOPT 1000
/* The report options of stats, diff and analyze (their rows in opt_table.c are shared):
 * --markdown, --json, and --group-by line's patterns and symbols. */
struct cmd_report {
	int markdown, json, by_line;
	struct cmd_lines lines;
};
/* Takes option c for command cmd (a CLI_* of opt_table.h): -1 if it is not one of these, 0 if
 * taken, else an exit code after one line on stderr. --group-by is taken as "line" only, for
 * stats and analyze; diff has its own. */
int cmd_report_option(int cmd, struct cmd_report *r, int c, const char *arg);
/* The report options together: 0, or EXIT_USAGE after one line. */
int cmd_report_check(int cmd, const struct cmd_report *r);

/* Takes option c (one of CMD_LINES_OPT_*); 1 if it was one, 0 if not, -1 out of memory. */
int cmd_lines_option(struct cmd_lines *l, int c, const char *arg);
/* The user-code patterns as analyze/lines.h takes them (a struct cuptrace_lines_opts). */
struct cuptrace_lines_opts cmd_lines_opts(const struct cmd_lines *l);
/* inner wrapped by a symbolizing sink (inner is owned by it, or destroyed on failure). NULL on
 * failure. */
struct cuptrace_sink *cmd_lines_symbolize(struct cmd_lines *l, struct cuptrace_sink *inner);
void cmd_lines_free(struct cmd_lines *l);
/* --json --group-by line: the one JSON object print writes, on stdout with "lines" as its last
 * key. 0 or an error. */
struct cuptrace_lines;
int cmd_lines_print_json(const struct cuptrace_lines *l, int (*print)(const void *ctx, FILE *f),
                         const void *ctx);

/* Replays a trace file (any format cuptrace reads) into sink, which the caller then finishes.
 * Returns 0 or a negative errno; the reader's error is held for cmd_read_failed. cmd_replay_cb
 * has the shape of cuptrace_replay_fn (analyze/merge.h) and ignores ctx. cmd_read takes the
 * reader's flags (read/read.h). */
int cmd_replay(const char *path, struct cuptrace_sink *sink);
int cmd_replay_cb(void *ctx, const char *path, struct cuptrace_sink *sink);
int cmd_read(const char *path, struct cuptrace_sink *sink, int flags);
/* The one line for a read that failed with r: "cuptrace CMD: cannot read PATH: why" + then
 * (NULL or more words, as "; nothing was written"), why being the reader's own error. */
void cmd_read_failed(const char *cmd, const char *path, int r, const char *then);
/* Routes the core library's log (common/log.h) to stderr as "cuptrace CMD: ..." lines. */
void cmd_log_begin(const char *cmd);

#include "common/options.h"

/* A setting's value from the command line (text: optarg) or, for cmd_setting_env, from the
 * CUPTRACE_* variable this process has (unset or empty: fine), through the one parser of
 * common/options.h. 0, or -1 after one line "cuptrace CMD: bad value for ..." on stderr. */
int cmd_setting(const char *cmd, enum cuptrace_setting_id id, const char *text,
                struct cuptrace_setting_value *v);
int cmd_setting_env(const char *cmd, enum cuptrace_setting_id id);

/* Outputs and inputs (tools/cmd_out.c). */
struct cuptrace_outfile;
/* Refuses an output that is one of inputs (same file: path, symbolic or hard link), then starts
 * writing it aside (output/outfile.h). 0, or an exit code after one line on stderr. */
int cmd_out_begin(struct cuptrace_outfile *of, const char *cmd, const char *out,
                  const char *const *inputs, size_t nin);
/* ok: the output replaces what was there; else it is dropped and the old file stays. 0, or an
 * exit code after one line on stderr. */
int cmd_out_end(struct cuptrace_outfile *of, const char *cmd, int ok);
/* A trace writer (Perfetto or Chrome JSON, from format or out's name) for out, written aside
 * through of; inputs are refused as outputs. NULL with *status an exit code after one line on
 * stderr. Finish and destroy the sink, then cmd_out_end. */
struct cuptrace_sink *cmd_sink_open(struct cuptrace_outfile *of, const char *cmd, const char *out,
                                    const char *format, const char *compress, int level,
                                    const char *const *inputs, size_t nin, int *status);
/* An input the command can read: "-" is standard input unless twice says why it must be read
 * twice (then refused). 0, or an exit code after one line on stderr. */
int cmd_input(const char *cmd, const char *path, const char *twice);
/* Handlers of SIGINT, SIGTERM and SIGHUP that remove unfinished outputs' temporary files. */
void cmd_out_signals(void);

/* Exit codes shared by the subcommands (record returns the traced command's status instead). */
#define EXIT_USAGE 2
#define EXIT_FAIL  1
#define EXIT_ABOVE 3 /* diff --fail-above: a time grew by more than allowed */

#endif
