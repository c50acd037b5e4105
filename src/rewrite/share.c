/* `cuptrace share`, the rewrite: a sink between a reader and a writer that passes on a copy safe
 * to post (see share.h; what is removed and why: README "Sharing a trace"). Every string that
 * reaches the writer goes through xform(), whose results are cached per distinct input: a trace
 * repeats its names millions of times. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/forward.h"
#include "rewrite/share.h"
#include "rewrite/share_state.h"
#include "common/privacy.h"
#include "common/sha256.h"
#include "common/util.h"

enum ctx { CTX_TEXT = 'T', CTX_NAME = 'N', CTX_TRACK = 'K', CTX_ARG = 'A', CTX_CAT = 'C' };

struct entry {
	uint32_t out;  /* id in outs */
	uint8_t flags; /* SHARE_* */
	uint32_t gen;  /* the last rewrite that counted it */
};

#define MAX_KEYS 32

struct rep {
	int host_removed;
	const char *dropped[MAX_KEYS]; /* interned in outs */
	size_t ndropped;
	struct {
		const char *key, *program;
		uint64_t args;
	} prog[8];
	size_t nprog;
	uint64_t proc_args; /* arguments of process tracks' command lines */
	const char *time[MAX_KEYS];
	size_t ntime;
	int clock_zeroed;
	uint64_t paths, urls, hosts, users, gpus, tokens;
	struct cuptrace_share_kept kept;
};

struct cuptrace_share {
	struct cuptrace_share_opts o;
	char *salt;
	const struct cuptrace_share_scan *sc;
	struct cuptrace_strtab keys, outs;
	struct entry *ent;
	size_t nent, entcap;
	uint32_t gen;
	struct share_buf kb, sb, tb;
	const char **procs; /* output process names, interned in outs */
	size_t nprocs, proccap;
	struct rep rep;
};

struct share_sink {
	struct fwd_sink f;
	struct cuptrace_share *sh;
	struct cuptrace_share_window w;
	struct cuptrace_u64map last_ctr; /* counter track -> its last sample time before w */
	struct cuptrace_u64map kinds;    /* track uuid -> kind */
	struct cuptrace_arg *args;
	size_t argcap;
	uint64_t *fout, *fin;
	size_t foutcap, fincap;
	struct cuptrace_meta *meta;
	size_t metacap;
	char note[256];
};

static const char *const vocabulary[] = {
    /* cuptrace's own categories, then torch.profiler's: what they name is public (CUDA API
     * calls, copies, memsets, waits, allocations, profiler overhead), not the user's code. */
    "cuda_runtime",
    "cuda_driver",
    "memcpy",
    "memset",
    "sync",
    "memory",
    "cupti_overhead",
    "overhead",
    "cuptrace",
    "Trace",
    "cpu_instant_event",
    "gpu_memcpy",
    "gpu_memset",
    "cuda_flow",
    "ac2g",
    "Runtime",
    "Memcpy",
    "Memset",
    "cuda_profiler_range",
    "graph"}; /* --cuda-graphs graph: "CUDA graph N" */

static int in_vocabulary(const char *cat)
{
	for (size_t i = 0; i < sizeof(vocabulary) / sizeof(vocabulary[0]); i++)
		if (!strcmp(cat, vocabulary[i]))
			return 1;
	return 0;
}

/* The token prefix of a category whose names are the user's, or NULL. */
static const char *mapped_prefix(const char *cat)
{
	static const struct {
		const char *cat, *prefix;
	} map[] = {
	    {"kernel", "kernel"},
	    {"Kernel", "kernel"},
	    {"nvtx", "nvtx"},
	    {"cpu_op", "op"},
	    {"operator", "op"},
	    {"user_annotation", "annotation"},
	    {"gpu_user_annotation", "annotation"},
	    {"python_function", "python"},
	};
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (!strcmp(cat, map[i].cat))
			return map[i].prefix;
	return NULL;
}

static int known_category(const char *cat)
{
	return mapped_prefix(cat) || in_vocabulary(cat);
}

/* The token prefix of a slice or instant name of category cat, or NULL to keep the name. Any
 * other category is an NVTX domain's name (cuptrace puts a domain's ranges under it). */
static const char *name_prefix(const char *cat)
{
	if (!cat)
		return "nvtx";
	const char *p = mapped_prefix(cat);
	return p ? p : in_vocabulary(cat) ? NULL : "nvtx";
}

/* String arguments whose values are numbers or fixed vocabulary, kept under --redact-names. */
static int arg_public(const char *key, const char *v)
{
	static const char *const keys[] = {
	    "kind", "src",   "dst",     "memory_kind", "address",    "pool",         "color",
	    "grid", "block", "cluster", "Input type",  "Input Dims", "Input Strides"};
	for (size_t i = 0; key && i < sizeof(keys) / sizeof(keys[0]); i++)
		if (!strcmp(key, keys[i]))
			return 1;
	for (; *v; v++)
		if ((*v >= 'a' && *v <= 'z') || (*v >= 'A' && *v <= 'Z'))
			return 0;
	return 1;
}

/* ---- strings ---- */

static int is_process(const struct cuptrace_share *sh, const char *name)
{
	for (size_t i = 0; i < sh->nprocs; i++)
		if (!strcmp(sh->procs[i], name))
			return 1;
	return 0;
}

static int add_token(struct cuptrace_share *sh, struct share_buf *b, const char *prefix,
                     const char *name, size_t n)
{
	char tok[64], *nm = strndup(name, n);
	if (!nm)
		return -ENOMEM;
	share_token(sh->salt, prefix, nm, tok, sizeof(tok));
	free(nm);
	return share_buf_add(b, tok, strlen(tok));
}

static int ends_paren(const char *t, size_t n, size_t *open)
{
	if (!n || t[n - 1] != ')')
		return 0;
	for (size_t i = n - 1; i-- > 1;)
		if (t[i] == '(' && t[i - 1] == ' ') {
			*open = i - 1;
			return 1;
		}
	return 0;
}

/* A track name with the user's names in it replaced (the converter's and readers' patterns
 * keep their fixed words, so that the UI still reads "Stream 7", "GPU 0: <model>"). Returns
 * 1 if a token went in, 0 if not, or -ENOMEM. */
static int track_tokens(struct cuptrace_share *sh, const char *t, int kind, int under_group,
                        struct share_buf *out)
{
	static const char *const fixed[] = {"NVTX ranges",
	                                    "Memory allocations",
	                                    "CUPTI overhead",
	                                    "PyTorch Profiler",
	                                    "Spans",
	                                    "Device memory in use",
	                                    "Graphs launched from the GPU"};
	size_t n = strlen(t), open = 0;
	unsigned a, b;
	int used = -1;
	char c;

	out->n = 0;
	if (kind == CUPTRACE_TRACK_PROCESS || kind == CUPTRACE_TRACK_COUNTER || is_process(sh, t))
		return share_buf_add(out, t, n);
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		if (!strcmp(t, fixed[i]))
			return share_buf_add(out, t, n);
	if ((sscanf(t, "Stream %u%n", &a, &used) == 1 && used == (int)n) ||
	    (sscanf(t, "Stream %u (context %u%c%n", &a, &b, &c, &used) == 3 && c == ')' &&
	     used == (int)n) ||
	    (sscanf(t, "thread %u%n", &a, &used) == 1 && used == (int)n) ||
	    (sscanf(t, "GPU %u%n", &a, &used) == 1 && used == (int)n))
		return share_buf_add(out, t, n);
	if (!strncmp(t, "thread ", 7) && ends_paren(t, n, &open) && open > 7) {
		/* "thread TID (NAME)" */
		char *nm = strndup(t + open + 2, n - open - 3);
		if (!nm)
			return -ENOMEM;
		int keep = is_process(sh, nm) || !strcmp(nm, "thread");
		int err = share_buf_add(out, t, open + 2) ||
		          (keep ? share_buf_add(out, nm, strlen(nm))
		                : add_token(sh, out, "thread", nm, strlen(nm))) ||
		          share_buf_add(out, ")", 1);
		free(nm);
		return err ? -ENOMEM : !keep;
	}
	if (!strncmp(t, "CUPTI overhead: ", 16) && ends_paren(t, n, &open) && open > 16) {
		/* "CUPTI overhead: NAME (TID)" */
		char *nm = strndup(t + 16, open - 16);
		if (!nm)
			return -ENOMEM;
		int keep = is_process(sh, nm) || !strcmp(nm, "thread");
		int err = share_buf_add(out, t, 16) ||
		          (keep ? share_buf_add(out, nm, strlen(nm))
		                : add_token(sh, out, "thread", nm, strlen(nm))) ||
		          share_buf_add(out, t + open, n - open);
		free(nm);
		return err ? -ENOMEM : !keep;
	}
	if (sscanf(t, "GPU %u: %n", &a, &used) == 1 && used > 0) {
		/* "GPU N: NAME (MODEL)" names a device; "GPU N: MODEL" is all public. */
		if (!ends_paren(t, n, &open) || open < (size_t)used)
			return share_buf_add(out, t, n);
		int err = share_buf_add(out, t, (size_t)used) ||
		          add_token(sh, out, "device", t + used, open - (size_t)used) ||
		          share_buf_add(out, t + open, n - open);
		return err ? -ENOMEM : 1;
	}
	if (ends_paren(t, n, &open) && sscanf(t + open, " (stream %u%c%n", &a, &c, &used) == 2 &&
	    c == ')' && open + (size_t)used == n) {
		int err =
		    add_token(sh, out, "stream", t, open) || share_buf_add(out, t + open, n - open);
		return err ? -ENOMEM : 1;
	}
	const char *prefix = kind == CUPTRACE_TRACK_THREAD ? "thread"
	                     : under_group                 ? "stream"
	                                                   : "track";
	return add_token(sh, out, prefix, t, n) ? -ENOMEM : 1;
}

static void count(struct cuptrace_share *sh, struct entry *e)
{
	if (e->gen == sh->gen)
		return;
	e->gen = sh->gen;
	sh->rep.paths += !!(e->flags & SHARE_PATH);
	sh->rep.urls += !!(e->flags & SHARE_URL);
	sh->rep.hosts += !!(e->flags & SHARE_HOST);
	sh->rep.users += !!(e->flags & SHARE_USER);
	sh->rep.gpus += !!(e->flags & SHARE_GPU);
	sh->rep.tokens += !!(e->flags & SHARE_TOKEN);
}

/* s as it may be shared in context ctx (prefix: the token's, for CTX_NAME, _ARG and _CAT;
 * kind and under_group: the track's, for CTX_TRACK). NULL only on allocation failure. */
static const char *xform(struct cuptrace_share *sh, int ctx, const char *prefix, const char *s,
                         int kind, int under_group)
{
	struct share_buf *k = &sh->kb;
	char c = (char)ctx;
	k->n = 0;
	if (share_buf_add(k, &c, 1) || share_buf_add(k, prefix, strlen(prefix)) ||
	    share_buf_add(k, "\x1f", 1) || share_buf_add(k, s, strlen(s)))
		return NULL;
	uint32_t id = cuptrace_strtab_intern(&sh->keys, k->p, k->n);
	if (!id)
		return NULL;
	if (id > sh->nent) {
		/* New: ids are given in order, so this is the next entry. */
		int flags = share_scrub_text(&sh->sc->secrets, s, &sh->sb);
		const char *r = sh->sb.p;
		size_t rn = sh->sb.n;
		if (flags < 0)
			return NULL;
		if (ctx == CTX_NAME || ctx == CTX_ARG || ctx == CTX_CAT) {
			char tok[64];
			share_token(sh->salt, prefix, sh->sb.p, tok, sizeof(tok));
			if (share_buf_add(&sh->tb, "", 0))
				return NULL;
			sh->tb.n = 0;
			if (share_buf_add(&sh->tb, tok, strlen(tok)))
				return NULL;
			r = sh->tb.p;
			rn = sh->tb.n;
			flags |= SHARE_TOKEN;
		} else if (ctx == CTX_TRACK) {
			int t = track_tokens(sh, sh->sb.p, kind, under_group, &sh->tb);
			if (t < 0)
				return NULL;
			r = sh->tb.p;
			rn = sh->tb.n;
			flags |= t ? SHARE_TOKEN : 0;
		}
		struct entry *e = cuptrace_grow(sh->ent, &sh->entcap, sh->nent + 1, sizeof(*e));
		if (!e)
			return NULL;
		sh->ent = e;
		uint32_t out = cuptrace_strtab_intern(&sh->outs, r, rn);
		if (!out)
			return NULL;
		e[sh->nent++] = (struct entry){out, (uint8_t)flags, 0};
	}
	count(sh, &sh->ent[id - 1]);
	return cuptrace_strtab_str(&sh->outs, sh->ent[id - 1].out);
}

static const char *text(struct cuptrace_share *sh, const char *s)
{
	return xform(sh, CTX_TEXT, "", s, 0, 0);
}

/* ---- the report ---- */

static int note_key(const char **list, size_t *n, const char *key)
{
	for (size_t i = 0; i < *n; i++)
		if (list[i] == key)
			return 0;
	if (*n < MAX_KEYS)
		list[(*n)++] = key;
	return 0;
}

static void note_program(struct cuptrace_share *sh, const char *key, const char *prog,
                         uint64_t args)
{
	struct rep *r = &sh->rep;
	size_t i = 0;
	while (i < r->nprog && r->prog[i].key != key)
		i++;
	if (i == sizeof(r->prog) / sizeof(r->prog[0]))
		return;
	r->nprog += i == r->nprog;
	r->prog[i].key = key;
	r->prog[i].program = prog;
	r->prog[i].args = args;
}

void cuptrace_share_report(const struct cuptrace_share *sh, FILE *f, const char *p)
{
	const struct rep *r = &sh->rep;
	int host = r->host_removed;
	for (size_t i = 0; i < r->ndropped; i++)
		host |= !strcmp(r->dropped[i], "hostname");
	if (host)
		fprintf(f, "%shostname: removed\n", p);
	for (size_t i = 0; i < r->ndropped; i++)
		if (strcmp(r->dropped[i], "hostname"))
			fprintf(f, "%s%s: removed\n", p, r->dropped[i]);
	for (size_t i = 0; i < r->nprog; i++)
		if (r->prog[i].args)
			fprintf(f, "%s%s: %" PRIu64 " argument%s removed (program \"%s\" kept)\n",
			        p, r->prog[i].key, r->prog[i].args, r->prog[i].args == 1 ? "" : "s",
			        r->prog[i].program);
	if (r->proc_args)
		fprintf(f, "%sprocess command lines: %" PRIu64 " argument%s removed\n", p,
		        r->proc_args, r->proc_args == 1 ? "" : "s");
	if (r->ntime || r->clock_zeroed) {
		fprintf(f, "%sstart time: removed (", p);
		for (size_t i = 0; i < r->ntime; i++)
			fprintf(f, "%s%s", i ? ", " : "", r->time[i]);
		fprintf(f, "%sthe clocks start at 0; --keep-time keeps them)\n",
		        r->ntime ? "; " : "");
	}
	if (r->hosts)
		fprintf(f, "%shost names: replaced in %" PRIu64 " string%s\n", p, r->hosts,
		        r->hosts == 1 ? "" : "s");
	if (r->users)
		fprintf(f, "%suser names: replaced in %" PRIu64 " string%s\n", p, r->users,
		        r->users == 1 ? "" : "s");
	if (r->gpus)
		fprintf(f, "%sGPU UUIDs: replaced in %" PRIu64 " string%s\n", p, r->gpus,
		        r->gpus == 1 ? "" : "s");
	if (r->paths)
		fprintf(f, "%spaths: reduced to base names in %" PRIu64 " string%s\n", p, r->paths,
		        r->paths == 1 ? "" : "s");
	if (r->urls)
		fprintf(f, "%sURLs: removed from %" PRIu64 " string%s\n", p, r->urls,
		        r->urls == 1 ? "" : "s");
	if (sh->o.redact_names)
		fprintf(f, "%snames: %" PRIu64 " replaced by tokens (%s)\n", p, r->tokens,
		        sh->salt[0] ? "salt from --salt" : "default salt");
}

struct cuptrace_share_kept cuptrace_share_kept(const struct cuptrace_share *sh)
{
	return sh->rep.kept;
}

/* ---- the sink ---- */

static struct share_sink *to_share(struct cuptrace_sink *s)
{
	return (struct share_sink *)s;
}

static int fail(struct share_sink *s, int err)
{
	return fwd_fail(&s->f, err);
}

/* The metadata as it may be shared, into s->meta (+ extra slots for the caller). */
static int rewrite_meta(struct share_sink *s, const struct cuptrace_meta *m, size_t n, size_t extra,
                        size_t *nout)
{
	struct cuptrace_share *sh = s->sh;
	struct cuptrace_meta *o = cuptrace_grow(s->meta, &s->metacap, n + extra + 1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	s->meta = o;
	*nout = 0;
	for (size_t i = 0; i < n; i++) {
		/* Keys too: a merged trace's keys are "<label>: <key>", and a label may name
		 * the host ("rank 3 @ node7"). */
		const char *key = m[i].key ? text(sh, m[i].key) : NULL;
		if (m[i].key && !key)
			return -ENOMEM;
		struct cuptrace_meta d = m[i];
		d.key = key;
		if (key && !strcmp(key, "shared"))
			continue; /* a copy shared again: begin() says what this one did */
		switch (cuptrace_meta_policy(m[i].key)) {
		case CUPTRACE_META_DROP:
			if (m[i].is_int || (m[i].s && *m[i].s)) /* "": a copy shared before */
				note_key(sh->rep.dropped, &sh->rep.ndropped, key);
			continue;
		case CUPTRACE_META_TIME:
			if (!sh->o.keep_time) {
				if (m[i].is_int ? m[i].i != 0 : m[i].s && *m[i].s)
					note_key(sh->rep.time, &sh->rep.ntime, key);
				continue;
			}
			break;
		case CUPTRACE_META_PROGRAM:
			if (!m[i].is_int && m[i].s) {
				char prog[256];
				uint64_t args =
				    cuptrace_cmdline_program(m[i].s, prog, sizeof(prog));
				if (!(d.s = text(sh, prog)))
					return -ENOMEM;
				note_program(sh, key, d.s, args);
			}
			break;
		case CUPTRACE_META_SCRUB:
		default:
			if (!m[i].is_int && m[i].s && !(d.s = text(sh, m[i].s)))
				return -ENOMEM;
			break;
		}
		o[(*nout)++] = d;
	}
	return 0;
}

static int sh_begin(struct cuptrace_sink *sk, const struct cuptrace_trace_info *info)
{
	struct share_sink *s = to_share(sk);
	struct cuptrace_share *sh = s->sh;
	if (s->f.err)
		return s->f.err;
	struct cuptrace_trace_info d = *info;
	size_t n;
	int err = rewrite_meta(s, info->meta, info->nmeta, 1, &n);
	if (err)
		return fail(s, err);
	s->meta[n++] = (struct cuptrace_meta){.key = "shared", .s = s->note};
	d.meta = s->meta;
	d.nmeta = n;
	/* "" and not NULL: a writer takes its own machine's name for NULL. */
	d.hostname = "";
	if (info->hostname && *info->hostname && strcmp(info->hostname, "?"))
		sh->rep.host_removed = 1;
	if (info->process_name && !(d.process_name = text(sh, info->process_name)))
		return fail(s, -ENOMEM);
	if (d.process_name && !is_process(sh, d.process_name)) {
		const char **p = cuptrace_grow(sh->procs, &sh->proccap, sh->nprocs + 1, sizeof(*p));
		if (!p)
			return fail(s, -ENOMEM);
		sh->procs = p;
		p[sh->nprocs++] = d.process_name;
	}
	if (!sh->o.keep_time) {
		sh->rep.clock_zeroed = info->start_realtime_ns || info->start_boottime_ns;
		d.start_realtime_ns = d.start_boottime_ns = 0;
	}
	/* A new identity, stable for one input and these options: the original's would tie the
	 * copy to the original (and cuptrace derives it from the host and the start time). */
	struct {
		uint64_t hi, lo;
		int64_t from, to;
		int32_t redact, keep, win, pad; /* no padding bytes: every byte is hashed */
	} id = {info->trace_uuid_hi, info->trace_uuid_lo, s->w.from, s->w.to,
	        sh->o.redact_names,  sh->o.keep_time,     s->w.on,   0};
	uint8_t h[32];
	cuptrace_hmac_sha256(sh->salt, strlen(sh->salt), &id, sizeof(id), h);
	memcpy(&d.trace_uuid_hi, h, 8);
	memcpy(&d.trace_uuid_lo, h + 8, 8);
	return fwd_begin(sk, &d);
}

static int sh_track(struct cuptrace_sink *sk, const struct cuptrace_track *t)
{
	struct share_sink *s = to_share(sk);
	struct cuptrace_share *sh = s->sh;
	if (s->f.err)
		return s->f.err;
	struct cuptrace_track d = *t;
	uint64_t *parent = t->parent_uuid ? cuptrace_u64map_get(&s->kinds, t->parent_uuid) : NULL;
	uint64_t *kind = cuptrace_u64map_put(&s->kinds, t->uuid, NULL);
	if (!kind)
		return fail(s, -ENOMEM);
	*kind = (uint64_t)t->kind;
	const char *name = t->name ? t->name : "";
	if (t->kind == CUPTRACE_TRACK_PROCESS) {
		if (!(d.name = text(sh, name)))
			return fail(s, -ENOMEM);
		if (!is_process(sh, d.name)) {
			const char **p =
			    cuptrace_grow(sh->procs, &sh->proccap, sh->nprocs + 1, sizeof(*p));
			if (!p)
				return fail(s, -ENOMEM);
			sh->procs = p;
			p[sh->nprocs++] = d.name;
		}
	} else if (sh->o.redact_names) {
		d.name = xform(sh, CTX_TRACK, "", name, (int)t->kind,
		               parent && *parent == CUPTRACE_TRACK_GROUP);
	} else {
		d.name = text(sh, name);
	}
	if (!d.name || (t->description && !(d.description = text(sh, t->description))))
		return fail(s, -ENOMEM);
	const char *prog = NULL;
	if (t->cmdline_len) {
		char buf[256];
		uint64_t args = cuptrace_cmdline_program(t->cmdline[0], buf, sizeof(buf));
		args += t->cmdline_len - 1;
		if (!(prog = text(sh, buf)))
			return fail(s, -ENOMEM);
		sh->rep.proc_args += args;
		d.cmdline = &prog;
		d.cmdline_len = 1;
	}
	return fwd_track(sk, &d);
}

static int overlaps(const struct share_sink *s, int64_t ts, int64_t end)
{
	return !s->w.on || (ts <= s->w.to && end >= s->w.from);
}

static int flow_kept(const struct share_sink *s, uint64_t id)
{
	const struct share_flow *f = share_scan_flow(s->sh->sc, id);
	return !s->w.on || !f ||
	       ((!(f->has & 1) || overlaps(s, f->out_ts, f->out_end)) &&
	        (!(f->has & 2) || overlaps(s, f->in_ts, f->in_end)));
}

/* The flows of one side of a slice that stay, into *buf. */
static int keep_flows(struct share_sink *s, const uint64_t *ids, size_t n, uint64_t **buf,
                      size_t *cap, const uint64_t **out, size_t *nout)
{
	if (!s->w.on || !n) {
		*out = ids;
		*nout = n;
		return 0;
	}
	uint64_t *b = cuptrace_grow(*buf, cap, n, sizeof(*b));
	if (!b)
		return -ENOMEM;
	*buf = b;
	*nout = 0;
	for (size_t i = 0; i < n; i++)
		if (flow_kept(s, ids[i]))
			b[(*nout)++] = ids[i];
	*out = b;
	return 0;
}

static int rewrite_args(struct share_sink *s, const struct cuptrace_arg *a, size_t n,
                        const struct cuptrace_arg **out)
{
	struct cuptrace_share *sh = s->sh;
	*out = a;
	if (!n)
		return 0;
	struct cuptrace_arg *d = cuptrace_grow(s->args, &s->argcap, n, sizeof(*d));
	if (!d)
		return -ENOMEM;
	s->args = d;
	for (size_t i = 0; i < n; i++) {
		d[i] = a[i];
		if (a[i].type != CUPTRACE_ARG_STRING || !a[i].v.s)
			continue;
		if (sh->o.redact_names && !arg_public(a[i].key, a[i].v.s))
			d[i].v.s = xform(sh, CTX_ARG, "arg", a[i].v.s, 0, 0);
		else
			d[i].v.s = text(sh, a[i].v.s);
		if (!d[i].v.s)
			return -ENOMEM;
	}
	*out = d;
	return 0;
}

/* Name and category of a slice or instant as they may be shared. */
static int rewrite_name(struct share_sink *s, const char *name, const char *cat, const char **nout,
                        const char **cout)
{
	struct cuptrace_share *sh = s->sh;
	const char *prefix = sh->o.redact_names ? name_prefix(cat) : NULL;
	*nout = name ? prefix ? xform(sh, CTX_NAME, prefix, name, 0, 0) : text(sh, name) : NULL;
	*cout = cat;
	/* Categories outside the fixed vocabulary are NVTX domains: the user's words too. */
	if (cat && !known_category(cat))
		*cout =
		    sh->o.redact_names ? xform(sh, CTX_CAT, "domain", cat, 0, 0) : text(sh, cat);
	return (name && !*nout) || (cat && !*cout) ? -ENOMEM : 0;
}

static int sh_slice(struct cuptrace_sink *sk, const struct cuptrace_slice *e)
{
	struct share_sink *s = to_share(sk);
	struct cuptrace_share_kept *k = &s->sh->rep.kept;
	if (s->f.err)
		return s->f.err;
	k->slices_in++;
	k->flows_in += e->nflows_out;
	if (!overlaps(s, e->ts, share_end(e->ts, e->dur)))
		return 0;
	struct cuptrace_slice d = *e;
	/* Call stacks name source files and modules by path: a shared copy has none (no stack()
	 * op either). */
	d.stack_id = 0;
	int err = rewrite_name(s, e->name, e->category, &d.name, &d.category);
	if (!err)
		err = rewrite_args(s, e->args, e->nargs, &d.args);
	if (!err)
		err = keep_flows(s, e->flows_out, e->nflows_out, &s->fout, &s->foutcap,
		                 &d.flows_out, &d.nflows_out);
	if (!err)
		err = keep_flows(s, e->flows_in, e->nflows_in, &s->fin, &s->fincap, &d.flows_in,
		                 &d.nflows_in);
	if (err)
		return fail(s, err);
	k->slices++;
	k->flows += d.nflows_out;
	return fwd_slice(sk, &d);
}

static int sh_instant(struct cuptrace_sink *sk, const struct cuptrace_instant *e)
{
	struct share_sink *s = to_share(sk);
	struct cuptrace_share_kept *k = &s->sh->rep.kept;
	if (s->f.err)
		return s->f.err;
	k->instants_in++;
	if (s->w.on && (e->ts < s->w.from || e->ts > s->w.to))
		return 0;
	struct cuptrace_instant d = *e;
	/* A merged trace's per-input trace info and summary ("cuptrace: trace info (A)") carry an
	 * input's whole metadata as arguments after the input's label: host, user, command line.
	 * The copy keeps the instant and its label (scrubbed below), not the rest: the metadata
	 * that share's rules let through is in the copy's metadata. */
	if (e->category && !strcmp(e->category, CUPTRACE_META_CATEGORY) && e->name &&
	    (!strncmp(e->name, CUPTRACE_META_INFO " (", strlen(CUPTRACE_META_INFO) + 2) ||
	     !strncmp(e->name, CUPTRACE_META_SUMMARY " (", strlen(CUPTRACE_META_SUMMARY) + 2)) &&
	    d.nargs > 1)
		d.nargs = 1;
	int err = rewrite_name(s, e->name, e->category, &d.name, &d.category);
	if (!err)
		err = rewrite_args(s, e->args, d.nargs, &d.args);
	if (err)
		return fail(s, err);
	k->instants++;
	return fwd_instant(sk, &d);
}

static int sh_counter(struct cuptrace_sink *sk, const struct cuptrace_counter *e)
{
	struct share_sink *s = to_share(sk);
	struct cuptrace_share_kept *k = &s->sh->rep.kept;
	if (s->f.err)
		return s->f.err;
	k->counters_in++;
	if (s->w.on && (e->ts < s->w.from || e->ts > s->w.to)) {
		/* The last value before the window is what the counter reads at its start. */
		uint64_t *last = cuptrace_u64map_get(&s->last_ctr, e->track_uuid);
		if (!last || (int64_t)*last != e->ts || e->ts > s->w.to)
			return 0;
	}
	k->counters++;
	return fwd_counter(sk, e);
}

static int sh_meta(struct cuptrace_sink *sk, const struct cuptrace_meta *m, size_t n)
{
	struct share_sink *s = to_share(sk);
	size_t k;
	if (s->f.err)
		return s->f.err;
	int err = rewrite_meta(s, m, n, 0, &k);
	return err ? fail(s, err) : k ? fwd_meta(sk, s->meta, k) : 0;
}

static void sh_destroy(struct cuptrace_sink *sk)
{
	struct share_sink *s = to_share(sk);
	if (!s)
		return;
	cuptrace_sink_destroy(s->f.inner);
	cuptrace_u64map_free(&s->last_ctr);
	cuptrace_u64map_free(&s->kinds);
	free(s->args);
	free(s->fout);
	free(s->fin);
	free(s->meta);
	free(s);
}

static const struct cuptrace_sink_ops share_ops = {
    .name = "share",
    .begin = sh_begin,
    .track = sh_track,
    .slice = sh_slice,
    .instant = sh_instant,
    .counter = sh_counter,
    .meta = sh_meta,
    .finish = fwd_finish,
    .destroy = sh_destroy,
};

struct cuptrace_sink *cuptrace_share_sink_new(struct cuptrace_share *sh,
                                              struct cuptrace_sink *inner,
                                              const struct cuptrace_share_window *w)
{
	struct share_sink *s = calloc(1, sizeof(*s));
	if (!s) {
		cuptrace_sink_destroy(inner);
		return NULL;
	}
	s->f.base.ops = &share_ops;
	s->f.inner = inner;
	s->sh = sh;
	cuptrace_u64map_init(&s->last_ctr);
	cuptrace_u64map_init(&s->kinds);
	if (w && w->on)
		s->w = *w;
	for (size_t i = 0; s->w.on && i < sh->sc->nctrs; i++) {
		const struct share_ctr *c = &sh->sc->ctrs[i];
		if (c->ts >= s->w.from)
			continue;
		int created;
		uint64_t *v = cuptrace_u64map_put(&s->last_ctr, c->track, &created);
		if (!v) {
			sh_destroy(&s->f.base);
			return NULL;
		}
		if (created || (int64_t)*v < c->ts)
			*v = (uint64_t)c->ts;
	}
	/* Said in the trace itself, so that a reader knows what is missing and why. */
	size_t n = (size_t)snprintf(s->note, sizeof(s->note),
	                            "cuptrace share: host, user, paths and arguments removed%s%s",
	                            sh->o.redact_names ? "; names replaced by tokens" : "",
	                            sh->o.keep_time ? "" : "; start time removed");
	if (s->w.on && n < sizeof(s->note))
		snprintf(s->note + n, sizeof(s->note) - n,
		         "; window %" PRId64 " ns to %" PRId64 " ns of the original", s->w.from,
		         s->w.to);
	sh->gen++;
	memset(&sh->rep, 0, sizeof(sh->rep));
	return &s->f.base;
}

struct cuptrace_share *cuptrace_share_new(const struct cuptrace_share_opts *o,
                                          const struct cuptrace_share_scan *sc)
{
	struct cuptrace_share *sh = calloc(1, sizeof(*sh));
	if (!sh)
		return NULL;
	memcpy(&sh->o, o, o->sz < sizeof(sh->o) ? o->sz : sizeof(sh->o));
	sh->o.sz = sizeof(sh->o);
	sh->sc = sc;
	cuptrace_strtab_init(&sh->keys);
	cuptrace_strtab_init(&sh->outs);
	if (!(sh->salt = strdup(o->salt ? o->salt : ""))) {
		free(sh);
		return NULL;
	}
	sh->o.salt = sh->salt;
	return sh;
}

void cuptrace_share_free(struct cuptrace_share *sh)
{
	if (!sh)
		return;
	cuptrace_strtab_free(&sh->keys);
	cuptrace_strtab_free(&sh->outs);
	free(sh->ent);
	free(sh->kb.p);
	free(sh->sb.p);
	free(sh->tb.p);
	free(sh->procs);
	free(sh->salt);
	free(sh);
}
