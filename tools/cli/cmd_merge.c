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

#include "merge/merge.h"
#include "cmd.h"
#include "common/text.h"
#include "opt_table.h"
#include "output/outfile.h"
#include "common/util.h"
#include "format/formats.h"
#include "format/json_writer.h"
#include "output/tar.h"

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

/* --ranks -o X.tar: Perfetto's manifest (docs/reference/perfetto-manifest.md, v58): each file
 * on the machine it ran on (ranks of one machine share its BOOTTIME), and each other machine's
 * BOOTTIME related to the first rank's by the offset the alignment found. The manifest has no
 * drift: the offset is the one at the middle of the run (the anchor). */
static int write_manifest(const struct cuptrace_merge *m, char *const *names, const char *path,
                          int none)
{
	struct cuptrace_json *w = cuptrace_json_new(NULL);
	if (!w)
		return -ENOMEM;
	cuptrace_json_start_object(w);
	cuptrace_json_name(w, "perfetto_manifest");
	cuptrace_json_start_object(w);
	cuptrace_json_name(w, "version");
	cuptrace_json_int(w, 1);
	cuptrace_json_name(w, "trace_time");
	cuptrace_json_start_object(w);
	cuptrace_json_name(w, "clock");
	cuptrace_json_string(w, "BOOTTIME");
	cuptrace_json_name(w, "file");
	cuptrace_json_string(w, names[0]);
	cuptrace_json_end_object(w);
	cuptrace_json_name(w, "files");
	cuptrace_json_start_array(w);
	for (size_t i = 0; i < m->n; i++) {
		const struct cuptrace_merge_result *r = &m->in[i];
		/* A machine is named after its first rank's host; with --align none every rank is
		 * a machine of its own, placed by its offset only. */
		size_t first = none ? i : r->map.machine;
		const struct cuptrace_merge_result *f = &m->in[first];
		char machine[512];
		snprintf(machine, sizeof(machine), "%s", none || !f->host ? f->label : f->host);
		/* Two machines of one host name (containers): keep them apart. */
		for (size_t j = 0; j < first && !none; j++)
			if (m->in[j].map.machine == j && m->in[j].host && f->host &&
			    !strcmp(m->in[j].host, f->host)) {
				snprintf(machine, sizeof(machine), "%s (%s)", f->host, f->label);
				break;
			}
		cuptrace_json_start_object(w);
		cuptrace_json_name(w, "path");
		cuptrace_json_string(w, names[i]);
		cuptrace_json_name(w, "machine");
		cuptrace_json_start_object(w);
		cuptrace_json_name(w, "name");
		cuptrace_json_string(w, machine);
		cuptrace_json_end_object(w);
		int same = !none && r->map.machine == m->in[0].map.machine;
		if (i && !same) {
			/* At one instant: BOOTTIME_0 = BOOTTIME_i + bt_0 - bt_i + offset_i -
			 * offset_0 */
			int64_t off = m->in[0].start_boottime_ns - r->start_boottime_ns +
			              r->offset_ns - m->in[0].offset_ns;
			cuptrace_json_name(w, "clocks");
			cuptrace_json_start_object(w);
			cuptrace_json_name(w, "clock");
			cuptrace_json_string(w, "BOOTTIME");
			cuptrace_json_name(w, "sync_to");
			cuptrace_json_start_object(w);
			cuptrace_json_name(w, "file");
			cuptrace_json_string(w, names[0]);
			cuptrace_json_name(w, "clock");
			cuptrace_json_string(w, "BOOTTIME");
			cuptrace_json_end_object(w);
			cuptrace_json_name(w, "offset_ns");
			cuptrace_json_int(w, off);
			cuptrace_json_end_object(w);
		}
		cuptrace_json_end_object(w);
	}
	cuptrace_json_end_array(w);
	cuptrace_json_name(w, "attributes");
	cuptrace_json_start_object(w);
	cuptrace_json_name(w, "cuptrace.merge");
	cuptrace_json_string(w, "ranks");
	cuptrace_json_name(w, "cuptrace.collective_end_spread_median_ns");
	cuptrace_json_int(w, m->align.symmetric.median);
	cuptrace_json_name(w, "cuptrace.collective_end_spread_max_ns");
	cuptrace_json_int(w, m->align.symmetric.max);
	cuptrace_json_end_object(w);
	cuptrace_json_end_object(w);
	cuptrace_json_end_object(w);
	int err = cuptrace_json_error(w);
	size_t len = 0;
	const char *buf = err ? NULL : cuptrace_json_buffer(w, &len);
	FILE *f = buf ? fopen(path, "wb") : NULL;
	if (buf && (!f || fwrite(buf, 1, len, f) != len))
		err = -(errno ? errno : EIO);
	if (f && fclose(f) && !err)
		err = -(errno ? errno : EIO);
	cuptrace_json_free(w);
	return err;
}

static int write_tar(struct cuptrace_merge *m, const char *out, int none)
{
	struct tar_ctx t = {.m = m};
	const char *tdir = getenv("TMPDIR");
	char tmpl[4096];
	snprintf(tmpl, sizeof(tmpl), "%s/cuptrace-merge-XXXXXX", tdir && *tdir ? tdir : "/tmp");
	/* With native clocks (--ranks) one more member: the manifest, first. */
	size_t extra = m->native_clocks ? 1 : 0;
	t.files = calloc(m->n + 1, sizeof(char *));
	t.names = calloc(m->n + 1, sizeof(char *));
	int r = -ENOMEM;
	if (t.files && t.names && strlen(tmpl) < sizeof(t.dir) && mkdtemp(tmpl)) {
		snprintf(t.dir, sizeof(t.dir), "%s", tmpl);
		r = cuptrace_merge_write_each(m, cmd_replay_cb, NULL, tar_open, tar_close, &t);
		if (!r && extra) {
			size_t len = strlen(t.dir) + 32;
			if (!(t.names[m->n] = strdup("perfetto_manifest.json")) ||
			    !(t.files[m->n] = malloc(len)))
				r = -ENOMEM;
			else {
				snprintf(t.files[m->n], len, "%s/perfetto_manifest.json", t.dir);
				r = write_manifest(m, t.names, t.files[m->n], none);
			}
		}
		if (!r) {
			/* the manifest first: Perfetto takes it from anywhere in a tar, but a
			 * reader that streams the archive sees it before the traces */
			const char **nm = calloc(2 * (m->n + 1), sizeof(*nm));
			if (!nm) {
				r = -ENOMEM;
			} else {
				const char **fl = nm + m->n + 1;
				for (size_t i = 0; i < m->n + extra; i++) {
					size_t k = extra ? (i ? i - 1 : m->n) : i;
					nm[i] = t.names[k];
					fl[i] = t.files[k];
				}
				r = cuptrace_tar_write(out, nm, fl, m->n + extra);
				free(nm);
			}
		}
		for (size_t i = 0; i < m->n + extra; i++)
			if (t.files[i])
				unlink(t.files[i]);
		rmdir(t.dir);
	} else if (t.files && t.names) {
		r = -errno;
	}
	for (size_t i = 0; t.files && t.names && i < m->n + 1; i++) {
		free(t.files[i]);
		free(t.names[i]);
	}
	free(t.files);
	free(t.names);
	return r;
}

/* What --ranks did, one line per rank and one for what is left: the user checks the alignment
 * here before trusting a cross-machine comparison. */
static void report_ranks(const struct cuptrace_merge *m, enum cuptrace_align_mode mode)
{
	int warned_rank = 0;
	for (size_t i = 0; i < m->n; i++) {
		const struct cuptrace_merge_result *x = &m->in[i];
		const struct cuptrace_align_out *a = &x->map;
		char off[48];
		report_dur_exact(off, sizeof(off), x->offset_ns, 1);
		fprintf(stderr, "cuptrace merge: %s (%s): %s, shifted by %s", x->label, x->path,
		        cuptrace_merge_clock_name(a->clock), off);
		if (a->clock == CUPTRACE_CLOCK_NCCL)
			fprintf(stderr,
			        ", drift %.3f ppm; REALTIME placement corrected by %s (%zu "
			        "collectives matched)",
			        a->drift * 1e6,
			        (report_dur_exact(off, sizeof(off), a->realtime_error_ns, 1), off),
			        a->matched);
		if (x->pid != x->orig_pid)
			fprintf(stderr, ", pid %" PRId32 " (was %" PRId32 ")", x->pid, x->orig_pid);
		if (x->gpus)
			fprintf(stderr, "; %s", x->gpus);
		fputc('\n', stderr);
		if (x->rank < 0 && !warned_rank++)
			fprintf(
			    stderr,
			    "cuptrace merge: %s names no rank (not recorded under a launcher?): "
			    "placed after the ranks\n",
			    x->path);
		if (mode == CUPTRACE_ALIGN_NCCL && a->clock == CUPTRACE_CLOCK_REALTIME)
			fprintf(stderr,
			        "cuptrace merge: %s shares no NCCL collective with %s's machine: "
			        "placed by REALTIME only, as good as the machines' clock sync\n",
			        x->label, m->in[0].label);
	}
	/* The spread judged is the symmetric collectives'; a broadcast's root may finish long
	 * before a late receiver, so the others are told apart (align.h). */
	const struct cuptrace_align_summary *g = &m->align;
	const struct cuptrace_align_spread *y = &g->symmetric, *o = &g->other;
	if (y->collectives)
		fprintf(
		    stderr,
		    "cuptrace merge: %zu machine%s; %zu symmetric collectives (all-reduce, "
		    "all-gather, reduce-scatter, all-to-all) on two ranks or more; their ends "
		    "after alignment spread by %.1f us (median), %.1f us (p99), %.1f us (max)\n",
		    g->machines, g->machines == 1 ? "" : "s", y->collectives,
		    (double)y->median / 1e3, (double)y->p99 / 1e3, (double)y->max / 1e3);
	else
		fprintf(stderr,
		        "cuptrace merge: %zu machine%s; no %sNCCL collective found in the "
		        "traces\n",
		        g->machines, g->machines == 1 ? "" : "s",
		        o->collectives ? "symmetric " : "");
	if (o->collectives)
		fprintf(
		    stderr,
		    "cuptrace merge: apart, %zu other collectives (broadcast, reduce, send/recv: "
		    "one rank may finish before another joined) end spread by %.1f us (median), "
		    "%.1f us (p99), %.1f us (max)\n",
		    o->collectives, (double)o->median / 1e3, (double)o->p99 / 1e3,
		    (double)o->max / 1e3);
}

/* What `merge` was asked: the options (borrowed from argv; labels malloc'd), the inputs'
 * count, and the merge's options the check works out. */
struct merge_args {
	const char *out, *format, *compress, *align, *align_mode;
	const char **labels;
	size_t nlabels, n;
	int side, ranks;
	struct cuptrace_merge_opts mo; /* align_name malloc'd by the check */
};

/* The options into a: -1 to go on, else the exit code (0 after --help). */
static int merge_parse(struct merge_args *a, int argc, char **argv)
{
	int c;
	while ((c = cli_next(CLI_MERGE, argc, argv)) != CLI_END) {
		switch (c) {
		case 'o':
			a->out = optarg;
			break;
		case 's':
			a->side = 1;
			break;
		case 'r':
			a->ranks = 1;
			break;
		case 'A':
			a->align_mode = optarg;
			break;
		case 'l':
			a->labels[a->nlabels++] = optarg;
			break;
		case 'a':
			a->align = optarg;
			break;
		case 'N':
			a->mo.no_auto_align = 1;
			break;
		case 'f':
			a->format = optarg;
			break;
		case 'z':
			a->compress = optarg;
			break;
		}
	}
	if (cli_status() >= 0)
		return cli_status();
	a->n = (size_t)(argc - optind);
	return -1;
}

/* The operands, the combinations and the output's kind: -1, or EXIT_USAGE after one line on
 * stderr. */
static int merge_check(struct merge_args *a)
{
	if (a->n < (a->ranks ? 1u : 2u)) {
		cli_usage_error(CLI_MERGE,
		                a->ranks ? "needs at least one trace (got %zu)"
		                         : "needs at least two traces (got %zu)",
		                a->n);
		return EXIT_USAGE;
	}
	if (a->side == a->ranks) {
		fprintf(stderr,
		        "cuptrace merge: say --side-by-side (runs, one above the other) or --ranks "
		        "(ranks of one job, on one time axis)\n");
		return EXIT_USAGE;
	}
	if (a->align && a->mo.no_auto_align) {
		fprintf(stderr, "cuptrace merge: --align-on or --no-align, not both\n");
		return EXIT_USAGE;
	}
	if (a->ranks && a->mo.no_auto_align) {
		fprintf(stderr, "cuptrace merge: --no-align is for --side-by-side (--ranks takes "
		                "--align none)\n");
		return EXIT_USAGE;
	}
	if (a->ranks && a->align) {
		fprintf(stderr, "cuptrace merge: --align-on is for --side-by-side; --ranks aligns "
		                "by clocks (--align none|realtime|nccl)\n");
		return EXIT_USAGE;
	}
	if (a->align_mode && !a->ranks) {
		fprintf(stderr, "cuptrace merge: --align is for --ranks (--side-by-side takes "
		                "--align-on NAME[#K])\n");
		return EXIT_USAGE;
	}
	a->mo.ranks = a->ranks;
	a->mo.ranks_align = CUPTRACE_ALIGN_NCCL;
	if (a->align_mode) {
		if (!strcmp(a->align_mode, "none"))
			a->mo.ranks_align = CUPTRACE_ALIGN_NONE;
		else if (!strcmp(a->align_mode, "realtime"))
			a->mo.ranks_align = CUPTRACE_ALIGN_REALTIME;
		else if (strcmp(a->align_mode, "nccl")) {
			fprintf(stderr,
			        "cuptrace merge: --align takes none, realtime or nccl, not '%s'\n",
			        a->align_mode);
			return EXIT_USAGE;
		}
	}
	if (!a->out) {
		cli_usage_error(CLI_MERGE, "needs -o OUTPUT");
		return EXIT_USAGE;
	}
	if (a->nlabels > a->n) {
		fprintf(stderr, "cuptrace merge: %zu labels for %zu inputs\n", a->nlabels, a->n);
		return EXIT_USAGE;
	}
	for (size_t i = 0; i < a->nlabels; i++)
		if (!*a->labels[i]) {
			fprintf(stderr, "cuptrace merge: --label takes a non-empty label\n");
			return EXIT_USAGE;
		}
	if (a->align &&
	    !(a->mo.align_name = cuptrace_merge_parse_align(a->align, &a->mo.align_k))) {
		fprintf(stderr,
		        "cuptrace merge: --align-on takes NAME or NAME#K (K >= 1), not '%s'\n",
		        a->align);
		return EXIT_USAGE;
	}
	char why[512];
	unsigned kind = cuptrace_out_kind(
	    a->out, a->format, CUPTRACE_OUT_PERFETTO | CUPTRACE_OUT_CHROME | CUPTRACE_OUT_TAR, why,
	    sizeof(why));
	if (!kind) {
		fprintf(stderr, "cuptrace merge: %s\n", why);
		return EXIT_USAGE;
	}
	if (kind == CUPTRACE_OUT_TAR && !cuptrace_ends_with(a->out, ".tar")) {
		fprintf(stderr,
		        "cuptrace merge: a tar output needs a file named *.tar (its members "
		        "are written first)\n");
		return EXIT_USAGE;
	}
	return -1;
}

/* After a side-by-side merge, on stderr: what the runs were aligned at and how far each was
 * shifted. */
static void report_side(const struct cuptrace_merge *m, const struct cuptrace_merge_opts *mo)
{
	if (!mo->align_name && !mo->no_auto_align)
		fprintf(stderr,
		        "cuptrace merge: runs aligned at their %s; --align-on NAME[#K] or "
		        "--no-align to choose\n",
		        cuptrace_merge_auto_name(m->auto_align));
	for (size_t i = 0; i < m->n; i++) {
		const struct cuptrace_merge_result *x = &m->in[i];
		char off[48], at[48];
		report_dur_exact(off, sizeof(off), x->offset_ns, 1);
		report_dur_exact(at, sizeof(at), x->align_ts + x->offset_ns, 0);
		fprintf(stderr, "cuptrace merge: %s (%s): shifted by %s", x->label, x->path, off);
		if (mo->align_name)
			fprintf(stderr, ", %s #%" PRIu64 " at %s", mo->align_name, mo->align_k, at);
		else if (m->auto_align && x->has_events)
			fprintf(stderr, ", aligned at %s", at);
		if (x->pid != x->orig_pid)
			fprintf(stderr, ", pid %" PRId32 " (was %" PRId32 ")", x->pid, x->orig_pid);
		fputc('\n', stderr);
	}
}

/* Reads the inputs (argv[optind]...), plans and writes the merge aside, puts it in place and
 * reports. 0, or the exit code after one line on stderr. */
static int merge_run(struct merge_args *a, char **argv)
{
	struct cuptrace_merge_input *in = NULL;
	struct cuptrace_merge m = {0};
	struct cuptrace_sink *sink = NULL;
	struct cuptrace_outfile of = {0};
	const char **paths = NULL;
	int ret = EXIT_FAIL;
	if (!(in = calloc(a->n, sizeof(*in))) || !(paths = calloc(a->n, sizeof(*paths)))) {
		fprintf(stderr, "cuptrace merge: out of memory\n");
		goto out;
	}
	for (size_t i = 0; i < a->n; i++) {
		in[i] = (struct cuptrace_merge_input){argv[optind + i],
		                                      i < a->nlabels ? a->labels[i] : NULL};
		if ((ret = cmd_input("merge", in[i].path, "merge reads each input twice")))
			goto out;
		paths[i] = in[i].path;
	}
	if ((ret = cmd_out_begin(&of, "merge", a->out, paths, a->n)))
		goto out;
	ret = EXIT_FAIL;

	int r = cuptrace_merge_plan(&m, in, a->n, &a->mo, cmd_replay_cb, NULL);
	if (r == -ENOENT) {
		fprintf(stderr,
		        "cuptrace merge: %s has %" PRIu64
		        " slice%s named '%s'; --align-on %s needs "
		        "%" PRIu64 "\n",
		        in[m.bad].path, m.in[m.bad].align_found,
		        m.in[m.bad].align_found == 1 ? "" : "s", a->mo.align_name, a->align,
		        a->mo.align_k);
		goto out;
	}
	if (r) {
		cmd_read_failed("merge", in[m.bad].path, r, NULL);
		goto out;
	}
	int f = 0;
	if (cuptrace_ends_with(a->out, ".tar")) {
		if (a->format || a->compress) {
			fprintf(stderr, "cuptrace merge: a .tar output holds .pftrace files: no "
			                "--format or --compress\n");
			ret = EXIT_USAGE;
			goto out;
		}
		m.native_clocks = a->ranks;
		r = write_tar(&m, of.tmp, a->mo.ranks_align == CUPTRACE_ALIGN_NONE);
	} else {
		if (!(sink = cuptrace_sink_open_as(a->out, of.tmp, a->format, a->compress, 0))) {
			fprintf(stderr, "cuptrace merge: cannot write %s: %s\n", a->out,
			        strerror(errno));
			ret = errno == EINVAL ? EXIT_USAGE : EXIT_FAIL;
			goto out;
		}
		r = cuptrace_merge_write(&m, cmd_replay_cb, NULL, sink);
		f = sink->ops->finish(sink);
	}
	if (r || f) {
		fprintf(stderr, "cuptrace merge: writing %s failed (at %s): %s\n", a->out,
		        in[m.bad].path, strerror(-(r ? r : f)));
		goto out;
	}
	cuptrace_sink_destroy(sink);
	sink = NULL;
	if ((ret = cmd_out_end(&of, "merge", 1)))
		goto out;
	ret = EXIT_FAIL;
	if (a->ranks) {
		report_ranks(&m, a->mo.ranks_align);
		ret = 0;
		goto out;
	}
	report_side(&m, &a->mo);
	ret = 0;
out:
	cuptrace_sink_destroy(sink);
	cuptrace_outfile_abort(&of);
	free(paths);
	cuptrace_merge_free(&m);
	free(in);
	return ret;
}

int cmd_merge(int argc, char **argv)
{
	struct merge_args a = {.mo = {.sz = sizeof(a.mo)}};
	if (!(a.labels = calloc((size_t)argc + 1, sizeof(*a.labels)))) {
		fprintf(stderr, "cuptrace merge: out of memory\n");
		return EXIT_FAIL;
	}
	int r = merge_parse(&a, argc, argv);
	if (r < 0)
		r = merge_check(&a);
	if (r < 0)
		r = merge_run(&a, argv);
	free((char *)a.mo.align_name);
	free(a.labels);
	return r;
}
