/* The command line's one option table (opt_table.c): every option of every command is a row
 * tagged with the commands it applies to, in the style of uftrace's option table. Each command's
 * getopt arguments and its --help are made from the rows tagged with it, so every help has one
 * layout (usage, what the command does, options, exit codes) and every option problem one line
 * "cuptrace CMD: ..." naming the option.
 *
 * Adding an option: a row in cli_options[] (opt_table.c) with the command's tag, an id its
 * parse function switches on, and a line in README.md (tests/cli_docs_test.sh checks it is
 * there). Not thread-safe: the parser keeps getopt's global state, as getopt does. */
#ifndef CUPTRACE_TOOLS_CLI_OPT_TABLE_H
#define CUPTRACE_TOOLS_CLI_OPT_TABLE_H

#include <stdio.h>

enum cli_cmd {
	CLI_RECORD,
	CLI_CONVERT,
	CLI_STATS,
	CLI_DIFF,
	CLI_MERGE,
	CLI_TRIGGER,
	CLI_ANALYZE,
	CLI_SYMBOLIZE,
	CLI_SHARE,
	CLI_TOP,
	CLI_NCMDS
};

enum cli_arg {
	CLI_ARG_NONE,     /* --opt */
	CLI_ARG_REQUIRED, /* --opt VALUE, --opt=VALUE, -o VALUE */
	CLI_ARG_OPTIONAL, /* --opt or --opt=VALUE */
};

struct cli_option {
	const char *name;  /* long name, without "--" */
	char shrt;         /* short letter, or 0 */
	enum cli_arg arg;  /* argument kind */
	const char *meta;  /* the argument's name in help (PATH, N, T, ...), NULL without one */
	unsigned cmds;     /* the commands it applies to: bits 1u << enum cli_cmd */
	int id;            /* what cli_next returns for it (the command's switch case) */
	const char *group; /* NULL: "options"; else the heading of its block in help */
	const char *help;  /* lines separated by '\n', without indentation */
};

struct cli_command {
	const char *name;
	int (*fn)(int, char **);
	const char *summary; /* one line for the top-level help */
	const char *usage;   /* usage lines after "usage: " (lines separated by '\n') */
	const char *about;   /* what it does: paragraphs, lines separated by '\n' */
	const char *exits;   /* exit codes, one per line */
	int in_order;        /* options end at the first operand (record's command, PIDs) */
};

/* The table and the commands, in the order help lists them. */
extern const struct cli_option cli_options[];
extern const size_t cli_noptions;
extern const struct cli_command cli_commands[CLI_NCMDS];

/* What cli_next returns when there is no option to take: the options are all read (operands
 * start at optind), or --help was given (the help is on stdout), or an option was bad (its one
 * line is on stderr). cli_status says which. */
#define CLI_END (-1)

/* The next option of argv for cmd: a row's id, with optarg holding its argument, or CLI_END.
 * The first call starts at argv[1]. */
int cli_next(enum cli_cmd cmd, int argc, char **argv);
/* After CLI_END: -1 if the options were all read, else the command's exit code (0 after
 * --help, EXIT_USAGE after a bad option). */
int cli_status(void);
/* The option cli_next last returned, as the user names it ("--top"). */
const char *cli_current(void);

/* The command's help, made from the table, on f. */
void cli_help(enum cli_cmd cmd, FILE *f);
/* Every long option of the table, one "--name" a line (`cuptrace help --options`). */
void cli_list_options(FILE *f);

/* One line "cuptrace CMD: <fmt>; see cuptrace CMD --help" on stderr (usage problems). */
void cli_usage_error(enum cli_cmd cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
