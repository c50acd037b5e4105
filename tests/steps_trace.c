/* Writes the synthetic loop of tests/steps.h to a file, for the diff and merge script tests:
 *
 *   steps_trace OUT [--steps N] [--gemm NS] [--softmax] [--pid P] [--start NS] [--lead NS]
 *
 * Defaults: 3 steps, gemm 3000 ns, pid 4242, start 1000 ns, no lead. The format follows OUT's
 * name, as `cuptrace convert` picks it. Exit status 0, or 1 with a message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/formats.h"
#include "steps.h"

int main(int argc, char **argv)
{
	struct steps_spec sp = STEPS_DEFAULT;
	const char *out = NULL;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--softmax"))
			sp.softmax = 1;
		else if (!strcmp(a, "--steps") && v && ++i)
			sp.steps = atoi(v);
		else if (!strcmp(a, "--gemm") && v && ++i)
			sp.gemm_ns = atoll(v);
		else if (!strcmp(a, "--start") && v && ++i)
			sp.start_ns = atoll(v);
		else if (!strcmp(a, "--lead") && v && ++i)
			sp.lead_ns = atoll(v);
		else if (!strcmp(a, "--pid") && v && ++i)
			sp.pid = atoi(v);
		else if (!out && a[0] != '-')
			out = a;
		else {
			fprintf(stderr, "steps_trace: bad argument %s\n", a);
			return 1;
		}
	}
	if (!out || sp.steps < 1) {
		fprintf(stderr, "usage: steps_trace OUT [--steps N] [--gemm NS] [--softmax] "
		                "[--pid P] [--start NS] [--lead NS]\n");
		return 1;
	}
	struct cuptrace_sink *s = cuptrace_sink_open(out, NULL, NULL);
	if (!s) {
		fprintf(stderr, "steps_trace: cannot write %s\n", out);
		return 1;
	}
	int err = steps_feed(s, &sp);
	int f = s->ops->finish(s);
	cuptrace_sink_destroy(s);
	if (err || f) {
		fprintf(stderr, "steps_trace: writing %s failed\n", out);
		remove(out);
		return 1;
	}
	return 0;
}
