/* Writes one rank of the simulated job of tests/ranks.h to a file, for merge_ranks_test.sh:
 *
 *   ranks_trace OUT --rank R [--world W] [--per-host P] [--steps N] [--skew H:NS]
 *               [--drift H:PPM] [--jitter NS] [--gpu-local] [--kernels K]
 *
 * Defaults as RANKS_JOB_DEFAULT (2 ranks, one per machine, 40 steps of 100 ms, no skew or
 * drift, 3 us jitter, every rank on GPU 0; --gpu-local: on GPU <local rank>, seeing every GPU of
 * its machine and naming the one it used in its metadata; --kernels: K small kernels more per
 * step, ranks.h). The format follows
 * OUT's name. Exit status 0, or 1 with a message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/formats.h"
#include "ranks.h"

int main(int argc, char **argv)
{
	struct ranks_job j = RANKS_JOB_DEFAULT;
	const char *out = NULL;
	int rank = -1;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int h = -1;
		char *end = NULL;
		if (v && (!strcmp(a, "--skew") || !strcmp(a, "--drift"))) {
			h = (int)strtol(v, &end, 10);
			if (*end != ':' || h < 0 || h >= RANKS_MAX_HOSTS) {
				fprintf(stderr, "ranks_trace: %s takes HOST:VALUE\n", a);
				return 1;
			}
		}
		if (!strcmp(a, "--gpu-local"))
			j.gpu_local = 1;
		else if (!strcmp(a, "--rank") && v && ++i)
			rank = atoi(v);
		else if (!strcmp(a, "--world") && v && ++i)
			j.world = atoi(v);
		else if (!strcmp(a, "--per-host") && v && ++i)
			j.per_host = atoi(v);
		else if (!strcmp(a, "--steps") && v && ++i)
			j.steps = atoi(v);
		else if (!strcmp(a, "--jitter") && v && ++i)
			j.jitter_ns = atoll(v);
		else if (!strcmp(a, "--kernels") && v && ++i)
			j.kernels = atoi(v);
		else if (!strcmp(a, "--skew") && v && ++i)
			j.skew_ns[h] = atoll(end + 1);
		else if (!strcmp(a, "--drift") && v && ++i)
			j.drift_ppm[h] = atof(end + 1);
		else if (!out && a[0] != '-')
			out = a;
		else {
			fprintf(stderr, "ranks_trace: bad argument %s\n", a);
			return 1;
		}
	}
	if (!out || rank < 0 || rank >= j.world || j.steps < 1 || j.per_host < 1 ||
	    j.per_host > RANKS_MAX_GPUS || ranks_host(&j, j.world - 1) >= RANKS_MAX_HOSTS ||
	    j.kernels < 0 || j.kernels > 256) {
		fprintf(stderr, "usage: ranks_trace OUT --rank R [--world W] [--per-host P] "
		                "[--steps N] [--skew H:NS] [--drift H:PPM] [--jitter NS] "
		                "[--gpu-local] [--kernels K]\n");
		return 1;
	}
	struct cuptrace_sink *s = cuptrace_sink_open(out, NULL, NULL);
	if (!s) {
		fprintf(stderr, "ranks_trace: cannot write %s\n", out);
		return 1;
	}
	int err = ranks_feed(s, &j, rank);
	int f = s->ops->finish(s);
	cuptrace_sink_destroy(s);
	if (err || f) {
		fprintf(stderr, "ranks_trace: writing %s failed\n", out);
		remove(out);
		return 1;
	}
	return 0;
}
