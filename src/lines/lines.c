/* GPU time by source line (lines.h): the user-code rule, the key a frame's row shows, and the
 * forwarding sink that attributes each kernel, copy and memset to the user line of the stack at
 * its launch. Like every sink, used by one thread at a time. */
#include "lines/lines.h"
#include "stats/busy.h"
#include "stats/family.h"
#include "format/forward.h"
#include "common/saturate.h"
#include "common/util.h"

#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

static int under_packages(const char *p)
{
	return strstr(p, "/site-packages/") || strstr(p, "/dist-packages/");
}

/* The standard library: a directory ".../lib/python3.N/" (or lib64, or python3.Nt of the
 * free-threaded build). Its site-packages were caught before. */
static int in_stdlib(const char *p)
{
	for (const char *s = strstr(p, "/python3."); s; s = strstr(s + 1, "/python3.")) {
		int lib = (s - p >= 4 && !strncmp(s - 4, "/lib", 4)) ||
		          (s - p >= 6 && !strncmp(s - 6, "/lib64", 6));
		const char *d = s + 9;
		if (!lib || !isdigit((unsigned char)*d))
			continue;
		while (isdigit((unsigned char)*d))
			d++;
		if (*d == 't')
			d++;
		if (*d == '/')
			return 1;
	}
	return 0;
}

static int pseudo_file(const char *p)
{
	return !strncmp(p, "<frozen", 7) || !strcmp(p, "<string>") || !strcmp(p, "<built-in>");
}

static int runtime_module(const char *mod)
{
	static const char *const prefixes[] = {
	    "libcuda",    "libcudart", "libcupti", "libcuptrace", "libc.",    "libc-",
	    "libpthread", "libstdc++", "libgcc_s", "ld-linux",    "libtorch", "libc10",
	    "libcublas",  "libcudnn",  "libnccl",  "libpython",
	};
	const char *b = base_name(mod);
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
		if (!strncmp(b, prefixes[i], strlen(prefixes[i])))
			return 1;
	return 0;
}

static int matches(const char *const *pats, size_t n, const char *file, const char *mod)
{
	for (size_t i = 0; i < n; i++)
		if ((file && !fnmatch(pats[i], file, 0)) || (mod && !fnmatch(pats[i], mod, 0)))
			return 1;
	return 0;
}

int cuptrace_frame_is_user(const struct cuptrace_frame *f, const struct cuptrace_lines_opts *o)
{
	const char *file = f->file && *f->file ? f->file : NULL;
	const char *mod =
	    f->kind == CUPTRACE_FRAME_NATIVE && f->module && *f->module ? f->module : NULL;
	if (o && matches(o->keep, o->nkeep, file, mod))
		return 1;
	if (o && matches(o->skip, o->nskip, file, mod))
		return 0;
	if (f->kind == CUPTRACE_FRAME_PYTHON)
		return file && !under_packages(file) && !in_stdlib(file) && !pseudo_file(file);
	if (mod)
		return !runtime_module(mod) && !under_packages(mod);
	/* A native frame of no known file: nothing to show as a line. */
	return file || (f->function && *f->function);
}

long cuptrace_stack_user_frame(const struct cuptrace_stack *st, const struct cuptrace_lines_opts *o)
{
	if (!st->nframes)
		return -1;
	for (size_t i = st->nframes; i-- > 0;)
		if (cuptrace_frame_is_user(&st->frames[i], o))
			return (long)i;
	return (long)st->nframes - 1;
}

void cuptrace_frame_key(const struct cuptrace_frame *f, char *buf, size_t cap)
{
	const char *fn = f->function && *f->function ? f->function : NULL;
	int n;

	if (!cap)
		return;
	if (f->file && *f->file) {
		if (f->line)
			n = snprintf(buf, cap, "%s:%" PRIu32, f->file, f->line);
		else
			n = snprintf(buf, cap, "%s", f->file);
		if (fn && n >= 0 && (size_t)n < cap)
			snprintf(buf + n, cap - (size_t)n, " %s", fn);
	} else if (f->kind == CUPTRACE_FRAME_NATIVE && f->module && *f->module) {
		const char *mod = base_name(f->module);
		if (fn)
			snprintf(buf, cap, "%s (%s)", fn, mod);
		else
			snprintf(buf, cap, "%s+0x%" PRIx64, mod, f->rel_pc);
	} else if (f->kind == CUPTRACE_FRAME_NATIVE && f->build_id && *f->build_id) {
		/* A module known by its build id alone (its path could not be read): the id names
		 * the file to look for, as a symbolizer would; 12 digits keep rows apart. */
		if (fn)
			snprintf(buf, cap, "%s (build id %.12s)", fn, f->build_id);
		else
			snprintf(buf, cap, "build id %.12s+0x%" PRIx64, f->build_id, f->rel_pc);
	} else if (f->kind == CUPTRACE_FRAME_NATIVE) {
		/* An address in no module (JIT code, an anonymous mapping): the recorder keeps the
		 * address itself then (inject/stacks.c), which is what there is to say. */
		if (fn)
			snprintf(buf, cap, "%s [unknown module]", fn);
		else
			snprintf(buf, cap, "[unknown module] 0x%" PRIx64, f->rel_pc);
	} else {
		snprintf(buf, cap, "%s", fn ? fn : "?");
	}
}

/* GPU work waiting for its stack (resolved per file: ids start over in each). */
struct work {
	uint64_t stack, flow, corr;
	int64_t dur;
	uint32_t name;
	uint8_t copy;
};
struct acc_row {
	uint32_t line;
	uint64_t count, kcount, ccount;
	int64_t ns, kns, cns;
};
struct acc_work {
	uint32_t row, name;
	uint8_t copy;
	uint64_t count;
	int64_t ns;
};

struct lines_sink {
	struct fwd_sink fwd;
	struct cuptrace_lines *out; /* borrowed; written only at finish */
	char **pats;                /* copies: skip patterns, then keep patterns */
	struct cuptrace_lines_opts opts;
	int finished;
	struct cuptrace_strtab strs;       /* lines and work names */
	struct cuptrace_u64map stack_line; /* stack id -> line id in strs */
	struct cuptrace_u64map flow_stack; /* flow id -> stack id of the slice starting it */
	struct cuptrace_u64map corr_stack; /* correlation id -> stack id of a host slice */
	struct work *works;
	size_t nworks, workcap;
	struct cuptrace_u64map row_of;  /* line id -> index + 1 in rows */
	struct cuptrace_u64map work_of; /* row << 33 | name << 1 | copy -> index + 1 in aw */
	struct acc_row *rows;
	size_t nrows, rowcap;
	struct acc_work *aw;
	size_t naw, awcap;
	uint64_t count, with_stack;
	int64_t ns;
	uint32_t no_stack; /* id of CUPTRACE_LINES_NO_STACK */
};

static struct lines_sink *to_lines(struct cuptrace_sink *s)
{
	return (struct lines_sink *)s;
}

static int ln_stack(struct cuptrace_sink *sk, const struct cuptrace_stack *st)
{
	struct lines_sink *s = to_lines(sk);
	char key[2048];
	int err;

	if ((err = fwd_stack(sk, st)))
		return err;
	long i = cuptrace_stack_user_frame(st, &s->opts);
	if (i < 0)
		snprintf(key, sizeof(key), "%s", CUPTRACE_LINES_NO_STACK);
	else
		cuptrace_frame_key(&st->frames[i], key, sizeof(key));
	uint32_t id = cuptrace_strtab_intern(&s->strs, key, strlen(key));
	uint64_t *v = id && st->id ? cuptrace_u64map_put(&s->stack_line, st->id, NULL) : NULL;
	if (!v)
		return st->id ? fwd_fail(&s->fwd, -ENOMEM) : 0;
	*v = id;
	return 0;
}

static int ln_slice(struct cuptrace_sink *sk, const struct cuptrace_slice *e)
{
	struct lines_sink *s = to_lines(sk);
	int err;

	if ((err = fwd_slice(sk, e)))
		return err;
	int kind = cuptrace_busy_family(e->category);
	if (kind >= 0) {
		const char *name = e->name ? e->name : "";
		uint32_t id = cuptrace_strtab_intern(&s->strs, name, strlen(name));
		if (!id || CUPTRACE_GROW(s->works, s->workcap, s->nworks + 1))
			return fwd_fail(&s->fwd, -ENOMEM);
		s->works[s->nworks++] = (struct work){
		    .stack = e->stack_id,
		    .flow = e->nflows_in ? e->flows_in[0] : 0,
		    .corr = e->correlation_id,
		    .dur = e->dur > 0 ? e->dur : 0,
		    .name = id,
		    .copy = kind == CUPTRACE_FAM_COPY,
		};
		return 0;
	}
	if (!e->stack_id)
		return 0;
	for (size_t i = 0; i < e->nflows_out; i++) {
		uint64_t *v = cuptrace_u64map_put(&s->flow_stack, e->flows_out[i], NULL);
		if (!v)
			return fwd_fail(&s->fwd, -ENOMEM);
		*v = e->stack_id;
	}
	if (e->correlation_id) {
		uint64_t *v = cuptrace_u64map_put(&s->corr_stack, e->correlation_id, NULL);
		if (!v)
			return fwd_fail(&s->fwd, -ENOMEM);
		*v = e->stack_id;
	}
	return 0;
}

static int account(struct lines_sink *s, uint32_t line, const struct work *w)
{
	int created;
	uint64_t *slot = cuptrace_u64map_put(&s->row_of, line, &created);
	if (!slot)
		return -ENOMEM;
	if (created) {
		if (CUPTRACE_GROW(s->rows, s->rowcap, s->nrows + 1)) {
			cuptrace_u64map_del(&s->row_of, line);
			return -ENOMEM;
		}
		s->rows[s->nrows] = (struct acc_row){.line = line};
		*slot = ++s->nrows;
	}
	uint64_t row = *slot - 1;
	struct acc_row *r = &s->rows[row];
	r->count++;
	r->ns = sat_add(r->ns, w->dur);
	if (w->copy) {
		r->ccount++;
		r->cns = sat_add(r->cns, w->dur);
	} else {
		r->kcount++;
		r->kns = sat_add(r->kns, w->dur);
	}
	uint64_t key = row << 33 | (uint64_t)w->name << 1 | w->copy;
	if (!(slot = cuptrace_u64map_put(&s->work_of, key, &created)))
		return -ENOMEM;
	if (created) {
		if (CUPTRACE_GROW(s->aw, s->awcap, s->naw + 1)) {
			cuptrace_u64map_del(&s->work_of, key);
			return -ENOMEM;
		}
		s->aw[s->naw] =
		    (struct acc_work){.row = (uint32_t)row, .name = w->name, .copy = w->copy};
		*slot = ++s->naw;
	}
	struct acc_work *a = &s->aw[*slot - 1];
	a->count++;
	a->ns = sat_add(a->ns, w->dur);
	return 0;
}

/* Each work of the file so far to its line's row; then the file's ids are forgotten. */
static int resolve(struct lines_sink *s)
{
	int err = 0;
	for (size_t i = 0; i < s->nworks && !err; i++) {
		const struct work *w = &s->works[i];
		uint64_t sid = w->stack;
		const uint64_t *v;
		if (!sid && w->flow && (v = cuptrace_u64map_get(&s->flow_stack, w->flow)))
			sid = *v;
		if (!sid && w->corr && (v = cuptrace_u64map_get(&s->corr_stack, w->corr)))
			sid = *v;
		v = sid ? cuptrace_u64map_get(&s->stack_line, sid) : NULL;
		uint32_t line = v ? (uint32_t)*v : s->no_stack;
		if (v && line != s->no_stack)
			s->with_stack++;
		s->count++;
		s->ns = sat_add(s->ns, w->dur);
		err = account(s, line, w);
	}
	s->nworks = 0;
	cuptrace_u64map_free(&s->stack_line);
	cuptrace_u64map_free(&s->flow_stack);
	cuptrace_u64map_free(&s->corr_stack);
	cuptrace_u64map_init(&s->stack_line);
	cuptrace_u64map_init(&s->flow_stack);
	cuptrace_u64map_init(&s->corr_stack);
	return err;
}

void cuptrace_lines_next_file(struct cuptrace_sink *sk)
{
	struct lines_sink *s = to_lines(sk);
	int err;
	if (s && !s->fwd.err && !s->finished && (err = resolve(s)))
		fwd_fail(&s->fwd, err);
}

static int row_cmp(const void *pa, const void *pb)
{
	const struct cuptrace_line_row *a = pa, *b = pb;
	if (a->gpu_ns != b->gpu_ns)
		return a->gpu_ns > b->gpu_ns ? -1 : 1;
	if (a->count != b->count)
		return a->count > b->count ? -1 : 1;
	return strcmp(a->line, b->line);
}

static int work_cmp(const void *pa, const void *pb)
{
	const struct cuptrace_line_work *a = pa, *b = pb;
	if (a->gpu_ns != b->gpu_ns)
		return a->gpu_ns > b->gpu_ns ? -1 : 1;
	int c = strcmp(a->name, b->name);
	return c ? c : a->copy - b->copy;
}

static int build(struct lines_sink *s, struct cuptrace_lines *r)
{
	size_t *fill = NULL;
	int err = -ENOMEM;

	r->count = s->count;
	r->gpu_ns = s->ns;
	r->with_stack = s->with_stack;
	if (!s->nrows)
		return 0;
	if (!(r->rows = calloc(s->nrows, sizeof(*r->rows))) ||
	    !(fill = calloc(s->nrows, sizeof(*fill))))
		goto out;
	for (; r->nrows < s->nrows; r->nrows++) {
		const struct acc_row *a = &s->rows[r->nrows];
		struct cuptrace_line_row *o = &r->rows[r->nrows];
		*o = (struct cuptrace_line_row){.count = a->count,
		                                .gpu_ns = a->ns,
		                                .kernel_count = a->kcount,
		                                .copy_count = a->ccount,
		                                .kernel_ns = a->kns,
		                                .copy_ns = a->cns};
		if (!(o->line = strdup(cuptrace_strtab_str(&s->strs, a->line))))
			goto out;
	}
	for (size_t i = 0; i < s->naw; i++)
		r->rows[s->aw[i].row].nwork++;
	for (size_t i = 0; i < r->nrows; i++)
		if (!(r->rows[i].work = calloc(r->rows[i].nwork, sizeof(*r->rows[i].work))))
			goto out;
	for (size_t i = 0; i < s->naw; i++) {
		const struct acc_work *a = &s->aw[i];
		struct cuptrace_line_work *o = &r->rows[a->row].work[fill[a->row]++];
		*o = (struct cuptrace_line_work){
		    .copy = a->copy, .count = a->count, .gpu_ns = a->ns};
		if (!(o->name = strdup(cuptrace_strtab_str(&s->strs, a->name))))
			goto out;
	}
	for (size_t i = 0; i < r->nrows; i++)
		qsort(r->rows[i].work, r->rows[i].nwork, sizeof(*r->rows[i].work), work_cmp);
	qsort(r->rows, r->nrows, sizeof(*r->rows), row_cmp);
	err = 0;
out:
	free(fill);
	return err;
}

static int ln_finish(struct cuptrace_sink *sk)
{
	struct lines_sink *s = to_lines(sk);
	struct cuptrace_lines r = {0};
	int err;

	if (s->fwd.err || s->finished)
		return s->fwd.err ? s->fwd.err : -EINVAL;
	if ((err = fwd_finish(sk)) || (err = resolve(s)))
		return fwd_fail(&s->fwd, err);
	s->finished = 1;
	if ((err = build(s, &r))) {
		cuptrace_lines_free(&r);
		return fwd_fail(&s->fwd, err);
	}
	cuptrace_lines_free(s->out);
	*s->out = r;
	return 0;
}

static void ln_destroy(struct cuptrace_sink *sk)
{
	struct lines_sink *s = to_lines(sk);

	if (!s)
		return;
	cuptrace_sink_destroy(s->fwd.inner);
	for (size_t i = 0; s->pats && i < s->opts.nskip + s->opts.nkeep; i++)
		free(s->pats[i]);
	free(s->pats);
	cuptrace_strtab_free(&s->strs);
	cuptrace_u64map_free(&s->stack_line);
	cuptrace_u64map_free(&s->flow_stack);
	cuptrace_u64map_free(&s->corr_stack);
	cuptrace_u64map_free(&s->row_of);
	cuptrace_u64map_free(&s->work_of);
	free(s->works);
	free(s->rows);
	free(s->aw);
	free(s);
}

static const struct cuptrace_sink_ops lines_ops = {
    .name = "lines",
    .begin = fwd_begin,
    .track = fwd_track,
    .slice = ln_slice,
    .instant = fwd_instant,
    .counter = fwd_counter,
    .stack = ln_stack,
    .sample = fwd_sample,
    .meta = fwd_meta,
    .finish = ln_finish,
    .destroy = ln_destroy,
};

struct cuptrace_sink *cuptrace_lines_sink_new(struct cuptrace_lines *out,
                                              const struct cuptrace_lines_opts *opts,
                                              struct cuptrace_sink *inner)
{
	struct lines_sink *s;
	size_t nskip = opts ? opts->nskip : 0, nkeep = opts ? opts->nkeep : 0;

	if (!out || !inner) {
		cuptrace_sink_destroy(inner);
		errno = EINVAL;
		return NULL;
	}
	memset(out, 0, sizeof(*out));
	if (!(s = calloc(1, sizeof(*s)))) {
		cuptrace_sink_destroy(inner);
		errno = ENOMEM;
		return NULL;
	}
	s->fwd.base.ops = &lines_ops;
	s->fwd.inner = inner;
	s->out = out;
	cuptrace_strtab_init(&s->strs);
	cuptrace_u64map_init(&s->stack_line);
	cuptrace_u64map_init(&s->flow_stack);
	cuptrace_u64map_init(&s->corr_stack);
	cuptrace_u64map_init(&s->row_of);
	cuptrace_u64map_init(&s->work_of);
	if (nskip + nkeep && !(s->pats = calloc(nskip + nkeep, sizeof(*s->pats))))
		goto fail;
	/* No pointer arithmetic on a NULL pats (no patterns). */
	s->opts = (struct cuptrace_lines_opts){
	    .skip = (const char *const *)s->pats,
	    .keep = s->pats ? (const char *const *)s->pats + nskip : NULL};
	for (size_t i = 0; i < nskip + nkeep; i++) {
		const char *p = i < nskip ? opts->skip[i] : opts->keep[i - nskip];
		if (!(s->pats[i] = strdup(p ? p : "")))
			goto fail;
		if (i < nskip)
			s->opts.nskip++;
		else
			s->opts.nkeep++;
	}
	s->no_stack = cuptrace_strtab_intern(&s->strs, CUPTRACE_LINES_NO_STACK,
	                                     strlen(CUPTRACE_LINES_NO_STACK));
	if (!s->no_stack)
		goto fail;
	return &s->fwd.base;
fail:
	ln_destroy(&s->fwd.base);
	errno = ENOMEM;
	return NULL;
}

void cuptrace_lines_free(struct cuptrace_lines *l)
{
	if (!l)
		return;
	for (size_t i = 0; l->rows && i < l->nrows; i++) {
		for (size_t k = 0; l->rows[i].work && k < l->rows[i].nwork; k++)
			free(l->rows[i].work[k].name);
		free(l->rows[i].work);
		free(l->rows[i].line);
	}
	free(l->rows);
	memset(l, 0, sizeof(*l));
}
