/* cuptrace diff BASE NEW: what changed between two runs, per kernel, API call, copy kind, NVTX
 * range and PyTorch op (analyze/diff.h). */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compare/diff.h"
#include "cmd.h"
#include "opt_table.h"

/* The profile of one run; 0 or EXIT_FAIL with the message printed. */
static int load(const char *path, const struct cuptrace_profile_opts *o, struct cuptrace_profile *p,
                struct cmd_lines *lines)
{
	struct cuptrace_sink *sink;
	int r;

	memset(p, 0, sizeof(*p));
	int e = cmd_input("diff", path, NULL);
	if (e)
		return e;
	sink = cuptrace_profile_sink_new(p, o);
	if (sink && o->group_by_line)
		sink = cmd_lines_symbolize(lines, sink);
	if (!sink) {
		fprintf(stderr, "cuptrace diff: out of memory\n");
		return EXIT_FAIL;
	}
	r = cmd_replay(path, sink);
	if (!r)
		r = sink->ops->finish(sink);
	cuptrace_sink_destroy(sink);
	if (r) {
		cmd_read_failed("diff", path, r, NULL);
		cuptrace_profile_free(p);
		return EXIT_FAIL;
	}
	return 0;
}

/* The options into o and rep: -1 to go on, else the exit code (0 after --help). */
static int diff_parse(struct cuptrace_diff_opts *o, struct cmd_report *rep, int argc, char **argv)
{
	int c;
	char *end;
	while ((c = cli_next(CLI_DIFF, argc, argv)) != CLI_END) {
		int e = cmd_report_option(CLI_DIFF, rep, c, optarg);
		if (e >= 0) {
			if (e)
				return e;
			continue;
		}
		switch (c) {
		case 'n': {
			errno = 0;
			long v = strtol(optarg, &end, 10);
			if (errno || *end || end == optarg || v < 1 || v > 1000000) {
				fprintf(stderr,
				        "cuptrace diff: --top takes a number of rows >= 1, "
				        "not '%s'\n",
				        optarg);
				return EXIT_USAGE;
			}
			o->top = (int)v;
			break;
		}
		case CMD_OPT_GROUP_BY:
			if (strcmp(optarg, "name") && strcmp(optarg, "base") &&
			    strcmp(optarg, "op") && strcmp(optarg, "line")) {
				fprintf(
				    stderr,
				    "cuptrace diff: bad value for --group-by: '%s' (takes name, "
				    "base, op or line)\n",
				    optarg);
				return EXIT_USAGE;
			}
			o->group_by_base = !strcmp(optarg, "base");
			o->group_by_op = !strcmp(optarg, "op");
			o->group_by_line = !strcmp(optarg, "line");
			break;
		case 'p':
			if (!*optarg) {
				fprintf(stderr, "cuptrace diff: --per takes a range name\n");
				return EXIT_USAGE;
			}
			o->per_name = optarg;
			break;
		case 'F':
			errno = 0;
			o->fail_above_pct = strtod(optarg, &end);
			if (errno || *end || end == optarg || !isfinite(o->fail_above_pct) ||
			    o->fail_above_pct < 0) {
				fprintf(stderr,
				        "cuptrace diff: --fail-above takes a percentage >= 0, "
				        "not '%s'\n",
				        optarg);
				return EXIT_USAGE;
			}
			break;
		}
	}
	return cli_status();
}

/* The two runs (argv[optind], argv[optind + 1]): -1, or EXIT_USAGE after one line. */
static int diff_check(struct cuptrace_diff_opts *o, const struct cmd_report *rep, int argc,
                      char **argv)
{
	if (cmd_report_check(CLI_DIFF, rep))
		return EXIT_USAGE;
	if (optind != argc - 2) {
		cli_usage_error(CLI_DIFF, "needs two traces, BASE and NEW (got %d)", argc - optind);
		return EXIT_USAGE;
	}
	o->base_path = argv[optind];
	o->new_path = argv[optind + 1];
	if (!strcmp(o->base_path, "-") && !strcmp(o->new_path, "-")) {
		fprintf(stderr, "cuptrace diff: '-' (standard input) can be one of the two traces, "
		                "not both\n");
		return EXIT_USAGE;
	}
	return -1;
}

/* Reads both runs, compares and prints. 0, EXIT_ABOVE (--fail-above), or EXIT_FAIL. */
static int diff_run(const struct cuptrace_diff_opts *o, struct cmd_report *rep)
{
	struct cuptrace_lines_opts lo = cmd_lines_opts(&rep->lines);
	struct cuptrace_profile_opts po = {.sz = sizeof(po),
	                                   .group_by_base = o->group_by_base,
	                                   .per_name = o->per_name,
	                                   .group_by_op = o->group_by_op,
	                                   .group_by_line = o->group_by_line,
	                                   .lines = &lo};
	struct cuptrace_profile a, b;
	struct cuptrace_diff d;
	int ret = load(o->base_path, &po, &a, &rep->lines);
	if (ret)
		return ret;
	if ((ret = load(o->new_path, &po, &b, &rep->lines))) {
		cuptrace_profile_free(&a);
		return ret;
	}
	int r = cuptrace_diff_compute(&a, &b, o, &d);
	/* No false all-clear: a run without GPU work has nothing to compare on the GPU. */
	if (!r && (!d.kernels.base || !d.kernels.new_)) {
		int none_a = !d.kernels.base && !d.bytes_copied.base,
		    none_b = !d.kernels.new_ && !d.bytes_copied.new_;
		if (none_a && none_b)
			fprintf(stderr,
			        "cuptrace diff: no GPU work in %s or %s: nothing to "
			        "compare on the GPU (host calls only)\n",
			        o->base_path, o->new_path);
		else if (none_a || none_b)
			fprintf(stderr, "cuptrace diff: no GPU work in %s: its GPU side is empty\n",
			        none_a ? o->base_path : o->new_path);
	}
	for (int i = 0; r == -ENOENT && i < 2; i++)
		if (!(i ? b : a).per_count)
			fprintf(
			    stderr,
			    "cuptrace diff: %s has no range named '%s' on a host thread (--per)\n",
			    i ? o->new_path : o->base_path, o->per_name);
	if (r && r != -ENOENT)
		fprintf(stderr, "cuptrace diff: %s\n", strerror(-r));
	cuptrace_profile_free(&a);
	cuptrace_profile_free(&b);
	if (r) {
		cuptrace_diff_free(&d);
		return EXIT_FAIL;
	}
	if (rep->json)
		r = cuptrace_diff_print_json(&d, stdout);
	else
		cuptrace_diff_print(&d, stdout, rep->markdown);
	if (r || fflush(stdout)) {
		fprintf(stderr, "cuptrace diff: cannot write the report\n");
		ret = EXIT_FAIL;
	} else if (d.nfail) {
		fprintf(stderr, "cuptrace diff: %zu time%s grew by more than %g%% (--fail-above)\n",
		        d.nfail, d.nfail == 1 ? "" : "s", d.fail_above_pct);
		ret = EXIT_ABOVE;
	}
	cuptrace_diff_free(&d);
	return ret;
}

int cmd_diff(int argc, char **argv)
{
	struct cuptrace_diff_opts o = {.sz = sizeof(o), .top = 20, .fail_above_pct = -1};
	struct cmd_report rep = {0};
	int r = diff_parse(&o, &rep, argc, argv);
	if (r < 0)
		r = diff_check(&o, &rep, argc, argv);
	if (r < 0)
		r = diff_run(&o, &rep);
	cmd_lines_free(&rep.lines);
	return r;
}
