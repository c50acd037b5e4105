/* cuptrace trigger: opens a capture window in running traced processes, stops one, or writes a
 * flight recorder out, through each process's control socket (src/control/control.h); prints
 * the files the processes wrote. All processes named are asked at once, so the ranks of a job
 * open their windows together. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "cmd.h"
#include "opt_table.h"
#include "control/control.h"
#include "common/options.h"
#include "common/util.h"

struct target {
	const char *path;
	const char *request;
	int timeout_ms;
	int ret;
	char *out;
	size_t len;
};

static void *ask(void *arg)
{
	struct target *t = arg;
	FILE *m = open_memstream(&t->out, &t->len);
	if (!m) {
		t->ret = -ENOMEM;
		return NULL;
	}
	t->ret = cuptrace_control_send(t->path, t->request, t->timeout_ms, m);
	fclose(m);
	return NULL;
}

/* "DIR/j12.p345.sock" -> 345: the name control.c gives the socket. */
static int path_pid(const char *path)
{
	const char *base = strrchr(path, '/');
	long job;
	int pid = 0;
	return sscanf(base ? base + 1 : path, "j%ld.p%d.sock", &job, &pid) == 2 ? pid : 0;
}

/* What `trigger` was asked (parse), and the request it sends (check). */
struct trigger_opts {
	int64_t duration, timeout; /* ns; timeout -1: not given */
	uint64_t steps;
	int stop, dump, actions;
	long job;
	char request[96];
	int timeout_ms;
};

/* The options into o: -1 to go on, else the exit code (0 after --help). */
static int trigger_parse(struct trigger_opts *o, int argc, char **argv)
{
	int c;
	while ((c = cli_next(CLI_TRIGGER, argc, argv)) != CLI_END) {
		char *end;
		switch (c) {
		case 'd':
			if (cuptrace_parse_duration(optarg, 1000000000, &o->duration) ||
			    o->duration <= 0) {
				fprintf(stderr,
				        "cuptrace trigger: bad value for --duration: '%s' (a "
				        "duration above 0, such as 500ms, 2s or 1m)\n",
				        optarg);
				return EXIT_USAGE;
			}
			o->actions++;
			break;
		case 's':
			o->steps = strtoull(optarg, &end, 10);
			if (!*optarg || *end || !o->steps || *optarg == '-') {
				fprintf(stderr,
				        "cuptrace trigger: bad value for --steps: '%s' (a count of "
				        "steps above 0)\n",
				        optarg);
				return EXIT_USAGE;
			}
			o->actions++;
			break;
		case 'S':
			o->stop = 1;
			o->actions++;
			break;
		case 'D':
			o->dump = 1;
			o->actions++;
			break;
		case 'j':
			o->job = strtol(optarg, &end, 10);
			if (!*optarg || *end || o->job <= 0) {
				fprintf(stderr,
				        "cuptrace trigger: bad value for --job: '%s' (the pid of a "
				        "`cuptrace record`)\n",
				        optarg);
				return EXIT_USAGE;
			}
			break;
		case 't':
			if (cuptrace_parse_duration(optarg, 1000000000, &o->timeout)) {
				fprintf(stderr,
				        "cuptrace trigger: bad value for --timeout: '%s' (a "
				        "duration such as 30s or 5m)\n",
				        optarg);
				return EXIT_USAGE;
			}
			break;
		}
	}
	return cli_status();
}

/* The combination and the operands; the request and its timeout. -1, or the exit code. */
static int trigger_check(struct trigger_opts *o, int argc)
{
	if (o->actions > 1) {
		cli_usage_error(CLI_TRIGGER,
		                "takes one of --duration, --steps, --stop, --dump (got %d)",
		                o->actions);
		return EXIT_USAGE;
	}
	if (!o->job && optind >= argc) {
		cli_usage_error(CLI_TRIGGER,
		                "needs the processes' PIDs or --job RECORD_PID (got none)");
		return EXIT_USAGE;
	}
	if (o->stop)
		snprintf(o->request, sizeof(o->request), "stop");
	else if (o->dump)
		snprintf(o->request, sizeof(o->request), "dump");
	else
		snprintf(o->request, sizeof(o->request), "open %" PRId64 " %" PRIu64, o->duration,
		         o->steps);
	o->timeout_ms = o->timeout >= 0
	                    ? (int)(o->timeout / 1000000)
	                    : (int)((o->duration > 0 ? o->duration / 1000000 : 0) + 60000);
	if (o->steps && o->timeout < 0)
		o->timeout_ms = 3600 * 1000; /* steps can be long: an hour unless told */
	return -1;
}

/* Every socket: of the job, or of each pid (argv[optind]...), into the malloc'd *paths.
 * Returns -1 to go on (*bad set where some were not found), or the exit code. */
static int trigger_find(const struct trigger_opts *o, int argc, char **argv, char ***paths,
                        size_t *npaths, int *bad)
{
	char err[256];
	if (o->job) {
		int n = cuptrace_control_find(0, o->job, paths, err, sizeof(err));
		if (n < 0) {
			fprintf(stderr, "cuptrace trigger: %s\n", err);
			return EXIT_FAIL;
		}
		if (n == 0) {
			fprintf(stderr,
			        "cuptrace trigger: no traced process of job %ld is listening "
			        "(was it started by `cuptrace record`, and has it initialized "
			        "CUDA?)\n",
			        o->job);
			return EXIT_FAIL;
		}
		*npaths = (size_t)n;
	}
	for (int i = optind; i < argc; i++) {
		char *end;
		long pid = strtol(argv[i], &end, 10);
		if (!*argv[i] || *end || pid <= 0) {
			fprintf(stderr, "cuptrace trigger: '%s' is not a pid\n", argv[i]);
			*bad = 1;
			continue;
		}
		char **found;
		int n = cuptrace_control_find((pid_t)pid, 0, &found, err, sizeof(err));
		if (n <= 0) {
			fprintf(
			    stderr, "cuptrace trigger: process %ld: %s\n", pid,
			    n < 0 ? err
			          : "not traced by cuptrace, or not listening (it listens once it "
			            "has initialized CUDA)");
			*bad = 1;
			free(found);
			continue;
		}
		size_t cap = *npaths;
		if (CUPTRACE_GROW(*paths, cap, *npaths + (size_t)n)) {
			for (int k = 0; k < n; k++)
				free(found[k]);
			free(found);
			*bad = 1;
			continue;
		}
		for (int k = 0; k < n; k++)
			(*paths)[(*npaths)++] = found[k];
		free(found);
	}
	return -1;
}

/* Sends the request to every socket at once and prints what each wrote: the files on stdout,
 * the rest on stderr. Frees paths. 0, or EXIT_FAIL where one failed. */
static int trigger_run(const struct trigger_opts *o, char **paths, size_t npaths, int bad)
{
	struct target *t = calloc(npaths ? npaths : 1, sizeof(*t));
	pthread_t *th = calloc(npaths ? npaths : 1, sizeof(*th));
	if (!t || !th) {
		fprintf(stderr, "cuptrace trigger: out of memory\n");
		for (size_t i = 0; i < npaths; i++)
			free(paths[i]);
		free(paths);
		free(t);
		free(th);
		return EXIT_FAIL;
	}
	for (size_t i = 0; i < npaths; i++) {
		t[i] = (struct target){paths[i], o->request, o->timeout_ms, 0, NULL, 0};
		if (pthread_create(&th[i], NULL, ask, &t[i])) {
			t[i].ret = -EAGAIN;
			th[i] = 0;
		}
	}
	for (size_t i = 0; i < npaths; i++) {
		if (th[i])
			pthread_join(th[i], NULL);
		int pid = path_pid(t[i].path);
		if (t[i].ret) {
			fprintf(stderr, "cuptrace trigger: process %d: %s\n", pid,
			        t[i].ret == -ETIMEDOUT ? "no answer in time" : strerror(-t[i].ret));
			bad = 1;
		}
		/* "file PATH" lines are the result (stdout); the rest is said on stderr. */
		for (char *line = t[i].out, *nl; line && *line; line = nl + 1) {
			nl = strchr(line, '\n');
			if (!nl)
				nl = line + strlen(line) - 1;
			else
				*nl = 0;
			if (!strncmp(line, "file ", 5))
				printf("%s\n", line + 5);
			else if (!strncmp(line, "error: ", 7)) {
				fprintf(stderr, "cuptrace trigger: process %d: %s\n", pid,
				        line + 7);
				bad = 1;
			} else if (*line)
				fprintf(stderr, "cuptrace trigger: process %d: %s\n", pid, line);
		}
		free(t[i].out);
		free(paths[i]);
	}
	free(paths);
	free(t);
	free(th);
	return bad ? EXIT_FAIL : 0;
}

int cmd_trigger(int argc, char **argv)
{
	struct trigger_opts o = {.timeout = -1};
	char **paths = NULL;
	size_t npaths = 0;
	int bad = 0;
	int r = trigger_parse(&o, argc, argv);
	if (r < 0)
		r = trigger_check(&o, argc);
	if (r < 0)
		r = trigger_find(&o, argc, argv, &paths, &npaths, &bad);
	if (r >= 0) {
		for (size_t i = 0; i < npaths; i++)
			free(paths[i]);
		free(paths);
		return r;
	}
	return trigger_run(&o, paths, npaths, bad);
}
