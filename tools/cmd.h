/* The cuptrace command line: one file per subcommand (see cuptrace.c for the table). */
#ifndef CUPTRACE_TOOLS_CMD_H
#define CUPTRACE_TOOLS_CMD_H

int cmd_record(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_stats(int argc, char **argv);

/* Exit codes shared by the subcommands (record returns the traced command's status instead). */
#define EXIT_USAGE 2
#define EXIT_FAIL  1

#endif
