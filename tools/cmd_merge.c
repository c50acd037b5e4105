/* cuptrace merge --side-by-side A B ... -o OUT: several runs in one timeline, one above the
 * other (analyze/merge.h). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analyze/merge.h"
#include "cmd.h"
#include "common/util.h"
#include "format/formats.h"
#include "output/tar.h"

static void merge_usage(FILE *f)
{
	fprintf(f,
	        "usage: cuptrace merge --side-by-side [options] -o OUTPUT INPUT...\n\n"
	        "Puts two or more runs (any trace or capture cuptrace reads) in one trace, each\n"
	        "as its own process group \"<label>: <process>\", in input order, shifted so that\n"
	        "each starts at 0 (or aligned with --align-on). Every slice, flow, counter and\n"
	        "argument is kept. OUTPUT's format follows its name (.pftrace, .json, .gz) as\n"
	        "for convert; OUTPUT.tar writes Perfetto's multi-trace form instead: one\n"
	        "shifted .pftrace per input in a tar archive, which ui.perfetto.dev opens as\n"
	        "one timeline. The shift applied to each input is printed on stderr.\n\n"
	        "  -o, --output PATH       output file (required)\n"
	        "      --side-by-side      one group per input (required: the only mode so far)\n"
	        "  -l, --label L           label of the next input (repeatable, in order;\n"
	        "                          default: the file's name)\n"
	        "      --align-on NAME[#K] start the K-th (default 1st) slice named NAME (an NVTX\n"
	        "                          range, an op, any slice) at the same moment in all\n"
	        "  -f, --format FMT        perfetto | chrome\n"
	        "      --compress MODE     chunks | gzip | none\n"
	        "  -h, --help              this help\n");
}

/* -o X.tar: each input into DIR/<k>-<label>.pftrace, then the archive. */
struct tar_ctx {
	const struct cuptrace_merge *m;
	char dir[4096];
	char **files, **names;
};

static struct cuptrace_sink *tar_open(void *octx, size_t i)
{
	struct tar_ctx *t = octx;
	char name[96];
	/* Member names: the label, made safe for a file name and kept short. */
	int k = snprintf(name, sizeof(name), "%zu-", i + 1);
	for (const char *p = t->m->in[i].label; *p && k < 80; p++)
		name[k++] = (*p == '/' || *p == ' ' || (unsigned char)*p < 32) ? '_' : *p;
	snprintf(name + k, sizeof(name) - (size_t)k, ".pftrace");
	size_t len = strlen(t->dir) + strlen(name) + 2;
	if (!(t->names[i] = strdup(name)) || !(t->files[i] = malloc(len))) {
		errno = ENOMEM;
		return NULL;
	}
	snprintf(t->files[i], len, "%s/%s", t->dir, name);
	return cuptrace_sink_open(t->files[i], "perfetto", NULL);
}

static int tar_close(void *octx, size_t i, struct cuptrace_sink *sink)
{
	(void)octx;
	(void)i;
	int r = sink->ops->finish(sink);
	cuptrace_sink_destroy(sink);
	return r;
}

static int write_tar(struct cuptrace_merge *m, const char *out)
{
	struct tar_ctx t = {.m = m};
	const char *tdir = getenv("TMPDIR");
	char tmpl[4096];
	snprintf(tmpl, sizeof(tmpl), "%s/cuptrace-merge-XXXXXX", tdir && *tdir ? tdir : "/tmp");
	t.files = calloc(m->n, sizeof(char *));
	t.names = calloc(m->n, sizeof(char *));
	int r = -ENOMEM;
	if (t.files && t.names && strlen(tmpl) < sizeof(t.dir) && mkdtemp(tmpl)) {
		snprintf(t.dir, sizeof(t.dir), "%s", tmpl);
		r = cuptrace_merge_write_each(m, cmd_replay_cb, NULL, tar_open, tar_close, &t);
		if (!r)
			r = cuptrace_tar_write(out, (const char *const *)t.names,
			                       (const char *const *)t.files, m->n);
		for (size_t i = 0; i < m->n; i++)
			if (t.files[i])
				unlink(t.files[i]);
		rmdir(t.dir);
	} else if (t.files && t.names) {
		r = -errno;
	}
	for (size_t i = 0; t.files && t.names && i < m->n; i++) {
		free(t.files[i]);
		free(t.names[i]);
	}
	free(t.files);
	free(t.names);
	return r;
}

static int same_file(const char *a, const char *b)
{
	struct stat sa, sb;
	return !stat(a, &sa) && !stat(b, &sb) && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

int cmd_merge(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"output", required_argument, NULL, 'o'}, {"side-by-side", no_argument, NULL, 's'},
	    {"label", required_argument, NULL, 'l'},  {"align-on", required_argument, NULL, 'a'},
	    {"format", required_argument, NULL, 'f'}, {"compress", required_argument, NULL, 'z'},
	    {"help", no_argument, NULL, 'h'},         {0},
	};
	const char *out = NULL, *format = NULL, *compress = NULL, *align = NULL;
	const char **labels = calloc((size_t)argc + 1, sizeof(*labels));
	struct cuptrace_merge_input *in = NULL;
	struct cuptrace_merge_opts mo = {.sz = sizeof(mo)};
	struct cuptrace_merge m = {0};
	struct cuptrace_sink *sink = NULL;
	size_t nlabels = 0, n = 0;
	int side = 0, c, ret = EXIT_USAGE;

	if (!labels) {
		fprintf(stderr, "cuptrace merge: out of memory\n");
		return EXIT_FAIL;
	}
	optind = 1;
	while ((c = getopt_long(argc, argv, "o:l:f:h", opts, NULL)) != -1) {
		switch (c) {
		case 'o':
			out = optarg;
			break;
		case 's':
			side = 1;
			break;
		case 'l':
			labels[nlabels++] = optarg;
			break;
		case 'a':
			align = optarg;
			break;
		case 'f':
			format = optarg;
			break;
		case 'z':
			compress = optarg;
			break;
		case 'h':
			merge_usage(stdout);
			ret = 0;
			goto out;
		default:
			merge_usage(stderr);
			goto out;
		}
	}
	n = (size_t)(argc - optind);
	if (!side) {
		fprintf(stderr,
		        "cuptrace merge: only --side-by-side is implemented so far (one group "
		        "per input)\n");
		goto out;
	}
	if (n < 2 || !out) {
		fprintf(stderr, "cuptrace merge: need -o OUTPUT and at least two INPUTs\n\n");
		merge_usage(stderr);
		goto out;
	}
	if (nlabels > n) {
		fprintf(stderr, "cuptrace merge: %zu labels for %zu inputs\n", nlabels, n);
		goto out;
	}
	for (size_t i = 0; i < nlabels; i++)
		if (!*labels[i]) {
			fprintf(stderr, "cuptrace merge: --label takes a non-empty label\n");
			goto out;
		}
	if (align && !(mo.align_name = cuptrace_merge_parse_align(align, &mo.align_k))) {
		fprintf(stderr,
		        "cuptrace merge: --align-on takes NAME or NAME#K (K >= 1), not '%s'\n",
		        align);
		goto out;
	}
	ret = EXIT_FAIL;
	if (!(in = calloc(n, sizeof(*in)))) {
		fprintf(stderr, "cuptrace merge: out of memory\n");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		in[i] =
		    (struct cuptrace_merge_input){argv[optind + i], i < nlabels ? labels[i] : NULL};
		if (access(in[i].path, R_OK)) {
			fprintf(stderr, "cuptrace merge: cannot read %s: %s\n", in[i].path,
			        strerror(errno));
			goto out;
		}
		if (same_file(in[i].path, out)) {
			fprintf(stderr, "cuptrace merge: the output %s is input %s\n", out,
			        in[i].path);
			goto out;
		}
	}

	int r = cuptrace_merge_plan(&m, in, n, &mo, cmd_replay_cb, NULL);
	if (r == -ENOENT) {
		fprintf(stderr,
		        "cuptrace merge: %s has %" PRIu64
		        " slice%s named '%s'; --align-on %s needs "
		        "%" PRIu64 "\n",
		        in[m.bad].path, m.in[m.bad].align_found,
		        m.in[m.bad].align_found == 1 ? "" : "s", mo.align_name, align, mo.align_k);
		goto out;
	}
	if (r) {
		fprintf(stderr, "cuptrace merge: cannot read %s: %s\n", in[m.bad].path,
		        strerror(-r));
		goto out;
	}
	int f = 0;
	if (cuptrace_ends_with(out, ".tar")) {
		if (format || compress) {
			fprintf(stderr, "cuptrace merge: a .tar output holds .pftrace files: no "
			                "--format or --compress\n");
			ret = EXIT_USAGE;
			goto out;
		}
		r = write_tar(&m, out);
	} else {
		if (!(sink = cuptrace_sink_open(out, format, compress))) {
			fprintf(stderr, "cuptrace merge: cannot write %s: %s\n", out,
			        strerror(errno));
			ret = errno == EINVAL ? EXIT_USAGE : EXIT_FAIL;
			goto out;
		}
		r = cuptrace_merge_write(&m, cmd_replay_cb, NULL, sink);
		f = sink->ops->finish(sink);
	}
	if (r || f) {
		fprintf(stderr, "cuptrace merge: writing %s failed (at %s): %s\n", out,
		        in[m.bad].path, strerror(-(r ? r : f)));
		unlink(out);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		const struct cuptrace_merge_result *x = &m.in[i];
		fprintf(stderr, "cuptrace merge: %s (%s): shifted by %" PRId64 " ns", x->label,
		        x->path, x->offset_ns);
		if (mo.align_name)
			fprintf(stderr, ", %s #%" PRIu64 " at %" PRId64 " ns", mo.align_name,
			        mo.align_k, x->align_ts + x->offset_ns);
		if (x->pid != x->orig_pid)
			fprintf(stderr, ", pid %" PRId32 " (was %" PRId32 ")", x->pid, x->orig_pid);
		fputc('\n', stderr);
	}
	ret = 0;
out:
	cuptrace_sink_destroy(sink);
	cuptrace_merge_free(&m);
	free((char *)mo.align_name);
	free(in);
	free(labels);
	return ret;
}
