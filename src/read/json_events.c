/* JSON reader, first pass: walks the document once and keeps what is replayed (slices,
 * instants, counter values, flow ends, process and thread names, devices, metadata) in compact
 * records with interned strings. Nothing is decided here about tracks: see json_tracks.c. */
#include "read/json_state.h"
#include "common/log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_META_TEXT 4096 /* a nested top-level value longer than this is not kept as meta */

uint32_t jr_key(struct jr *r, struct cuptrace_strtab *t, const void *k, size_t n)
{
	uint32_t id = cuptrace_strtab_intern(t, k, n);
	if (!id)
		r->err = -ENOMEM;
	return id;
}

/* ---- processes and threads ---- */

/* The key id of id within scope (0 for processes; a thread's process index + 1) in table t;
 * ids are 1, 2, ... in first-seen order: a new one is the next index + 1. */
static uint32_t id_key(struct jr *r, struct cuptrace_strtab *t, uint32_t scope,
                       const struct jr_id *id)
{
	uint8_t k[13] = {(uint8_t)id->is_str};
	memcpy(k + 1, &scope, sizeof(scope));
	if (id->is_str)
		memcpy(k + 5, &id->s, sizeof(id->s));
	else
		memcpy(k + 5, &id->i, sizeof(id->i));
	return jr_key(r, t, k, sizeof(k));
}

static uint32_t proc_of(struct jr *r, const struct jr_id *id, uint32_t fo)
{
	uint32_t kid = id_key(r, &r->proc_keys, 0, id);
	struct jr_proc *p = kid > r->nprocs ? JR_PUSH(r, procs, nprocs, proccap) : NULL;
	if (p)
		*p = (struct jr_proc){.id = *id, .first_fo = fo};
	return r->err ? 0 : kid;
}

static uint32_t thread_of(struct jr *r, uint32_t proc, const struct jr_id *id, uint32_t fo)
{
	uint32_t kid = id_key(r, &r->thread_keys, proc, id);
	struct jr_thread *t = kid > r->nthr ? JR_PUSH(r, thr, nthr, thrcap) : NULL;
	if (t)
		*t = (struct jr_thread){.proc = proc - 1, .id = *id, .first_fo = fo};
	return r->err ? 0 : kid;
}

/* The categories torch.profiler (Kineto) uses for work on a GPU (its events there have the
 * device as pid and the stream as tid), and for work of the host. */
static int gpu_category(const char *c)
{
	static const char *const gpu[] = {
	    "kernel",    "gpu_memcpy",          "gpu_memset", "gpu_user_annotation",
	    "cuda_sync", "cuda_profiler_range", "Kernel",     "Memcpy",
	    "Memset",    "mtia_ccp_events"};
	for (size_t i = 0; c && i < sizeof(gpu) / sizeof(gpu[0]); i++)
		if (!strcmp(c, gpu[i]))
			return 1;
	return 0;
}

static int host_category(const char *c)
{
	static const char *const host[] = {
	    "cpu_op",          "cuda_runtime",    "cuda_driver",
	    "python_function", "user_annotation", "cpu_instant_event",
	    "Operator",        "Runtime",         "Python"};
	for (size_t i = 0; c && i < sizeof(host) / sizeof(host[0]); i++)
		if (!strcmp(c, host[i]))
			return 1;
	return 0;
}

/* ---- metadata ---- */

int jr_meta_put(struct jr *r, struct jr_metas *t, const struct jr_meta *m)
{
	int created;
	uint64_t *slot = cuptrace_u64map_put(&t->of, m->key, &created);
	if (!slot) {
		r->err = -ENOMEM;
		return -1;
	}
	if (!created) {
		t->m[*slot - 1] = *m;
		return 0;
	}
	if (t->n >= JR_MAX_META) {
		cuptrace_u64map_del(&t->of, m->key);
		r->ck.meta_left_out++;
		return 0;
	}
	t->m = jr_grow(r, t->m, &t->cap, t->n + 1, sizeof(*t->m));
	if (r->err) {
		cuptrace_u64map_del(&t->of, m->key);
		return -1;
	}
	t->m[t->n++] = *m;
	*slot = t->n;
	return 0;
}

const struct jr_meta *jr_meta_get(const struct jr_metas *t, uint32_t key)
{
	uint64_t *v = cuptrace_u64map_get(&t->of, key);
	return v ? &t->m[*v - 1] : NULL;
}

void jr_metas_free(struct jr_metas *t)
{
	free(t->m);
	cuptrace_u64map_free(&t->of);
	memset(t, 0, sizeof(*t));
}

/* An arg as a metadata entry: ints as ints, the rest as text (a double in the fewest digits
 * that read back as it). 0, or -1 for a type metadata cannot hold. */
static int arg_meta(struct jr *r, const struct jr_arg *a, struct jr_meta *m)
{
	char buf[64];
	*m = (struct jr_meta){.key = a->key};
	switch (a->type) {
	case CUPTRACE_ARG_INT:
		m->is_int = 1;
		m->i = a->v.i;
		return 0;
	case CUPTRACE_ARG_STRING:
		m->s = a->v.s;
		return 0;
	case CUPTRACE_ARG_UINT:
		snprintf(buf, sizeof(buf), "%" PRIu64, a->v.u);
		break;
	case CUPTRACE_ARG_DOUBLE:
		for (int prec = 15; prec <= 17; prec++) {
			snprintf(buf, sizeof(buf), "%.*g", prec, a->v.d);
			if (strtod(buf, NULL) == a->v.d)
				break;
		}
		break;
	case CUPTRACE_ARG_BOOL:
		snprintf(buf, sizeof(buf), "%s", a->v.b ? "true" : "false");
		break;
	default:
		return -1;
	}
	m->s = jr_str(r, buf, strlen(buf));
	return 0;
}

/* The args of cuptrace's trace info or summary instant as metadata entries. */
static int meta_from_args(struct jr *r, uint32_t a0, uint32_t n, struct jr_metas *t)
{
	struct jr_meta m;
	for (uint32_t i = a0; i < a0 + n; i++)
		if (!arg_meta(r, &r->args[i], &m) && jr_meta_put(r, t, &m))
			return -1;
	return 0;
}

/* An int arg, or a string of a decimal int (the capture's metadata are strings). */
static int arg_int(const struct jr *r, const struct jr_arg *a, int64_t *v)
{
	if (!a)
		return 0;
	if (a->type == CUPTRACE_ARG_INT) {
		*v = a->v.i;
		return 1;
	}
	const char *s = a->type == CUPTRACE_ARG_STRING ? jr_s(r, a->v.s) : NULL;
	char *end;
	if (!s || !*s)
		return 0;
	errno = 0;
	long long x = strtoll(s, &end, 10);
	if (*end || errno)
		return 0;
	*v = x;
	return 1;
}

/* cuptrace's first event: the trace info (event.h's CUPTRACE_META_INFO). */
static void take_info(struct jr *r, uint32_t a0, uint32_t n)
{
	const struct jr_arg *a;
	int64_t v;

	r->have_info = 1;
	if (arg_int(r, jr_find_arg(r, a0, n, "pid"), &v))
		r->info_pid = (int32_t)v;
	if ((a = jr_find_arg(r, a0, n, "process_name")) && a->type == CUPTRACE_ARG_STRING)
		r->info_process = a->v.s;
	if ((a = jr_find_arg(r, a0, n, "hostname")) && a->type == CUPTRACE_ARG_STRING)
		r->info_host = a->v.s;
	arg_int(r, jr_find_arg(r, a0, n, "start_realtime_ns"), &r->info_realtime);
	arg_int(r, jr_find_arg(r, a0, n, "start_boottime_ns"), &r->info_boottime);
	if ((a = jr_find_arg(r, a0, n, "trace_uuid")) && a->type == CUPTRACE_ARG_STRING)
		r->info_uuid = a->v.s;
	meta_from_args(r, a0, n, &r->meta0);
}

/* 'M' events: names and sort order of processes and threads; the rest is not kept. */
static void take_metadata_event(struct jr *r, uint32_t name, const struct jr_id *pid,
                                const struct jr_id *tid, int have_tid, uint32_t a0, uint32_t n,
                                uint32_t fo)
{
	const char *what = jr_s(r, name);
	const struct jr_arg *v, *d = jr_find_arg(r, a0, n, "description");
	uint32_t p, t;

	if (!what || !(p = proc_of(r, pid, fo)))
		return;
	struct jr_proc *pr = &r->procs[p - 1];
	if (!strcmp(what, "process_name") || !strcmp(what, "process_labels")) {
		int labels = what[8] == 'l';
		v = jr_find_arg(r, a0, n, labels ? "labels" : "name");
		if (!v || v->type != CUPTRACE_ARG_STRING)
			return;
		uint32_t *slot = labels ? &pr->labels : &pr->name;
		if (!*slot) /* the first one: cuptrace writes one; Kineto, the same one again */
			*slot = v->v.s;
		if (!labels && d && d->type == CUPTRACE_ARG_STRING && !pr->desc)
			pr->desc = d->v.s;
	} else if (!strcmp(what, "process_sort_index")) {
		if ((v = jr_find_arg(r, a0, n, "sort_index")) && v->type == CUPTRACE_ARG_INT) {
			pr->sort_index = v->v.i;
			pr->has_sort = 1;
		}
	} else if (have_tid && !strcmp(what, "thread_name")) {
		v = jr_find_arg(r, a0, n, "name");
		if (v && v->type == CUPTRACE_ARG_STRING && (t = thread_of(r, p, tid, fo))) {
			struct jr_thread *th = &r->thr[t - 1];
			if (!th->name) /* Kineto may name a thread twice: the first is the more
			                  precise */
				th->name = v->v.s;
			if (d && d->type == CUPTRACE_ARG_STRING && !th->desc)
				th->desc = d->v.s;
		}
	} else if (have_tid && !strcmp(what, "thread_sort_index")) {
		v = jr_find_arg(r, a0, n, "sort_index");
		if (v && v->type == CUPTRACE_ARG_INT && (t = thread_of(r, p, tid, fo))) {
			r->thr[t - 1].sort_index = v->v.i;
			r->thr[t - 1].has_sort = 1;
		}
	}
}

/* ---- events ---- */

struct fields {
	char ph;
	int have_ph, have_ts, have_dur, have_pid, have_tid, have_id, bp_e;
	int have_bind, flow_in,
	    flow_out; /* Perfetto's v2 flows: "bind_id", "flow_in", "flow_out" */
	uint32_t name, cat;
	struct jnum ts, dur;
	struct jr_id pid, tid, id, bind;
	char scope;
};

static int parse_fields(struct jr *r, struct fields *f)
{
	struct jp *j = &r->jp;
	const char *k, *s;
	size_t kn, n;
	int rc;

	if (jp_object_begin(j))
		return -1;
	while ((rc = jp_object_next(j, &k, &kn)) > 0) {
		enum jtype t = jp_peek(j);
		if (t == JT_NONE)
			return -1;
		if (!strcmp(k, "ph") && t == JT_STRING) {
			if (jp_string(j, &s, &n))
				return -1;
			f->have_ph = 1;
			f->ph = n == 1 ? s[0] : '?';
		} else if ((!strcmp(k, "name") || !strcmp(k, "cat")) && t == JT_STRING) {
			if (jp_string(j, &s, &n))
				return -1;
			*(k[0] == 'n' ? &f->name : &f->cat) = jr_str(r, s, n);
		} else if ((!strcmp(k, "ts") || !strcmp(k, "dur")) && t == JT_NUMBER) {
			int is_ts = k[0] == 't';
			if (jp_number(j, is_ts ? &f->ts : &f->dur))
				return -1;
			*(is_ts ? &f->have_ts : &f->have_dur) = 1;
		} else if (!strcmp(k, "pid") || !strcmp(k, "tid")) {
			int is_pid = k[0] == 'p';
			if (jr_parse_id(r, is_pid ? &f->pid : &f->tid))
				return -1;
			*(is_pid ? &f->have_pid : &f->have_tid) = 1;
		} else if (!strcmp(k, "id") || !strcmp(k, "id2")) {
			if (jr_parse_id(r, &f->id))
				return -1;
			f->have_id = 1;
		} else if (!strcmp(k, "bind_id")) {
			if (jr_parse_id(r, &f->bind))
				return -1;
			f->have_bind = 1;
		} else if ((!strcmp(k, "flow_in") || !strcmp(k, "flow_out")) &&
		           (t == JT_TRUE || t == JT_FALSE)) {
			if (jp_bool(j, k[5] == 'i' ? &f->flow_in : &f->flow_out))
				return -1;
		} else if ((!strcmp(k, "bp") || !strcmp(k, "s")) && t == JT_STRING) {
			if (jp_string(j, &s, &n))
				return -1;
			if (k[0] == 'b')
				f->bp_e = n == 1 && s[0] == 'e';
			else
				f->scope = n == 1 ? s[0] : '?';
		} else if (!strcmp(k, "args")) {
			if (jr_parse_args(r))
				return -1;
		} else if (jp_skip(j)) {
			return -1;
		}
	}
	return rc;
}

static struct jr_ev *push_ev(struct jr *r, const struct fields *f, int64_t ts, uint32_t fo)
{
	struct jr_ev *e = JR_PUSH(r, evs, nevs, evcap);
	if (!e)
		return NULL;
	memset(e, 0, sizeof(*e));
	e->ph = f->ph == 'I' ? 'i' : f->ph;
	e->ts = ts;
	e->fo = fo;
	e->name = f->name;
	e->cat = f->cat;
	return e;
}

/* Moves the numeric arg named key out of an event's args into *out (cuptrace's
 * "correlation_id", which its Chrome writer adds to the args from the slice's field). */
static void take_corr(struct jr *r, struct jr_ev *e, const char *key, int remove)
{
	for (uint32_t i = e->arg0; i < e->arg0 + e->nargs; i++) {
		const struct jr_arg *a = &r->args[i];
		const char *k = jr_s(r, a->key);
		if (!k || strcmp(k, key))
			continue;
		if (a->type == CUPTRACE_ARG_INT && a->v.i > 0)
			e->corr = (uint64_t)a->v.i;
		else if (a->type == CUPTRACE_ARG_UINT)
			e->corr = a->v.u;
		else
			return;
		if (remove) {
			memmove(&r->args[i], &r->args[i + 1],
			        (e->arg0 + e->nargs - i - 1) * sizeof(r->args[0]));
			e->nargs--;
			r->nargs--;
		}
		return;
	}
}

/* Moves a slice's "stack" string arg (the call stack, one frame a line, innermost first, as
 * cuptrace's Chrome writer puts it) out of its args into a stack of r->stk. */
static void take_stack(struct jr *r, struct jr_ev *e)
{
	for (uint32_t i = e->arg0; i < e->arg0 + e->nargs; i++) {
		const struct jr_arg *a = &r->args[i];
		const char *k = jr_s(r, a->key), *v;
		if (!k || strcmp(k, "stack") || a->type != CUPTRACE_ARG_STRING ||
		    !(v = jr_s(r, a->v.s)))
			continue;
		if (!(e->stack = cuptrace_stacktab_add_text(&r->stk, v, strlen(v)))) {
			r->err = -ENOMEM;
			return;
		}
		memmove(&r->args[i], &r->args[i + 1],
		        (e->arg0 + e->nargs - i - 1) * sizeof(r->args[0]));
		e->nargs--;
		r->nargs--;
		return;
	}
}

/* The key of a flow: v1 flows ('s', 't', 'f') are one flow per (id, cat, name); v2 flows
 * ("bind_id") per id alone, apart from v1's (as Perfetto keeps them). 0 on error. */
static uint32_t flow_key(struct jr *r, int v2, uint32_t cat, uint32_t name, const struct jr_id *id)
{
	uint8_t k[17] = {(uint8_t)(id->is_str | (v2 << 1))};
	memcpy(k + 1, &cat, 4);
	memcpy(k + 5, &name, 4);
	if (id->is_str)
		memcpy(k + 9, &id->s, 4);
	else
		memcpy(k + 9, &id->i, 8);
	return jr_key(r, &r->flow_keys, k, sizeof(k));
}

/* Perfetto's v2 flow on slice x (index + 1) of thread t: "flow_out" starts it there,
 * "flow_in" ends an arrow there (bound to the slice itself), both is a step. */
static int v2_flow(struct jr *r, const struct fields *f, uint32_t t, uint32_t x, int64_t ts,
                   uint32_t fo)
{
	char ph = f->flow_in && f->flow_out ? 't' : f->flow_out ? 's' : f->flow_in ? 'f' : 0;
	if (!ph) {
		r->ck.skipped++; /* a bind_id with no direction: Perfetto drops it too */
		return 0;
	}
	uint32_t key = flow_key(r, 1, 0, 0, &f->bind);
	struct jr_ev *e = key ? push_ev(r, f, ts, fo) : NULL;
	if (!e)
		return -1;
	e->ph = ph;
	e->thr = t;
	e->key = key;
	e->bound = x;
	e->bp_e = 1;
	return 0;
}

/* 'E': ends the innermost 'B' open on thread t. An 'E' with none open is not read. */
static void end_b(struct jr *r, uint32_t t, int64_t ts)
{
	for (size_t i = r->nopen_b; i-- > 0;) {
		struct jr_ev *b = &r->evs[r->open_b[i] - 1];
		if (b->thr != t)
			continue;
		b->dur = ts >= b->ts ? ts - b->ts : 0;
		memmove(r->open_b + i, r->open_b + i + 1,
		        (r->nopen_b - i - 1) * sizeof(*r->open_b));
		r->nopen_b--;
		return;
	}
	r->ck.skipped++;
}

/* One element of traceEvents. Consumes it whatever it is; what is not read is counted. */
static int parse_event(struct jr *r, uint32_t fo)
{
	struct jp *j = &r->jp;
	struct fields f;
	uint32_t a0 = (uint32_t)r->nargs;
	int64_t ts = 0, dur = 0;

	r->elements++;
	if (jp_peek(j) != JT_OBJECT) {
		r->ck.skipped++;
		return jp_skip(j);
	}
	memset(&f, 0, sizeof(f));
	if (parse_fields(r, &f) || r->err)
		return -1;
	uint32_t na = (uint32_t)(r->nargs - a0);
	if (f.have_ph)
		r->ph_seen++;
	if (f.have_ts && jnum_scaled(&f.ts, 3, &ts)) {
		r->ck.skipped++; /* a time beyond +-292 years */
		goto drop_args;
	}
	if (f.have_dur && jnum_scaled(&f.dur, 3, &dur)) {
		r->ck.skipped++;
		goto drop_args;
	}
	const char *name = jr_s(r, f.name), *cat = jr_s(r, f.cat);

	switch (f.ph) {
	case 'M':
		if (f.have_pid)
			take_metadata_event(r, f.name, &f.pid, &f.tid, f.have_tid, a0, na, fo);
		goto drop_args;
	case 'E':
		if (f.have_ts && f.have_pid) {
			uint32_t p = proc_of(r, &f.pid, fo),
			         t = p ? thread_of(r, p, &f.tid, fo) : 0;
			if (!t)
				return -1;
			end_b(r, t, ts);
		} else {
			r->ck.skipped++;
		}
		goto drop_args;
	case 'B': /* read as an 'X' whose duration its 'E' sets */
	case 'X':
	case 'i':
	case 'I': {
		if (!f.have_ts) {
			r->ck.skipped++;
			goto drop_args;
		}
		if (f.ph != 'X' && cat && name && !strcmp(cat, CUPTRACE_META_CATEGORY)) {
			if (!strcmp(name, CUPTRACE_META_INFO) && fo == 0) {
				r->flavor = JR_CUPTRACE;
				take_info(r, a0, na);
				goto drop_args;
			}
			if (!strcmp(name, CUPTRACE_META_SUMMARY) && r->flavor == JR_CUPTRACE) {
				meta_from_args(r, a0, na, &r->meta);
				goto drop_args;
			}
		}
		uint32_t p = proc_of(r, &f.pid, fo), t = 0;
		/* Slices are a thread's: an "s" (an instant's scope) on one is ignored. */
		char scope = f.ph == 'X' || f.ph == 'B' || f.ph == 'E' ? 't'
		             : f.scope                                 ? f.scope
		                                                       : 't';
		if (scope != 't' && scope != 'p' && scope != 'g')
			scope = 't';
		if (!p || (scope == 't' && !(t = thread_of(r, p, &f.tid, fo))))
			return -1;
		struct jr_ev *e = push_ev(r, &f, ts, fo);
		if (!e)
			return -1;
		e->arg0 = a0;
		e->nargs = na;
		e->scope = scope;
		e->thr = t;
		e->proc = scope == 'p' ? p : 0;
		if (f.ph == 'B') {
			uint32_t *ob = jr_grow(r, r->open_b, &r->open_b_cap, r->nopen_b + 1,
			                       sizeof(*r->open_b));
			if (!ob)
				return -1;
			r->open_b = ob;
			r->open_b[r->nopen_b++] = (uint32_t)r->nevs;
			e->ph = 'X';
			dur = 0;
		}
		if (e->ph == 'X') {
			if (dur < 0) {
				r->ck.negative_dur++;
				dur = 0;
			}
			e->dur = dur;
			r->last_x = (uint32_t)r->nevs;
			if (gpu_category(cat))
				r->procs[p - 1].gpu_events++;
			else if (host_category(cat))
				r->procs[p - 1].host_events++;
		}
		if (scope != 'g') {
			r->procs[p - 1].events++;
			if (t)
				r->thr[t - 1].events++;
		}
		if (r->flavor == JR_CUPTRACE)
			take_corr(r, e, "correlation_id", 1);
		else
			take_corr(r, e, "correlation", 0);
		if (e->ph == 'X')
			take_stack(r, e);
		if (f.have_bind && e->ph == 'X' && t)
			return v2_flow(r, &f, t, (uint32_t)r->nevs, ts, fo);
		return 0;
	}
	case 'C': {
		uint32_t p = f.have_ts ? proc_of(r, &f.pid, fo) : 0;
		if (!f.have_ts) {
			r->ck.skipped++;
			goto drop_args;
		}
		if (!p)
			return -1;
		r->procs[p - 1].events++;
		/* One counter track per numeric arg: cuptrace writes one, keyed by its unit. */
		for (uint32_t i = a0; i < a0 + na; i++) {
			const struct jr_arg a = r->args[i];
			if (a.type != CUPTRACE_ARG_INT && a.type != CUPTRACE_ARG_DOUBLE)
				continue;
			uint32_t k[3] = {p, f.name, a.key};
			uint32_t c = jr_key(r, &r->counter_keys, k, sizeof(k));
			if (!c)
				return -1;
			if (c > r->nctrs) {
				struct jr_counter *ct = JR_PUSH(r, ctrs, nctrs, ctrcap);
				if (!ct)
					return -1;
				memset(ct, 0, sizeof(*ct));
				ct->proc = p - 1;
				ct->first_fo = fo;
				ct->key = a.key;
				ct->name = f.name;
			}
			struct jr_ev *e = push_ev(r, &f, ts, fo);
			if (!e)
				return -1;
			e->key = c;
			e->proc = p;
			e->is_double = a.type == CUPTRACE_ARG_DOUBLE;
			if (e->is_double)
				e->val.d = a.v.d;
			else
				e->val.i = a.v.i;
		}
		goto drop_args;
	}
	case 's':
	case 't':
	case 'f': {
		if (!f.have_ts || !f.have_id) {
			r->ck.skipped++;
			goto drop_args;
		}
		uint32_t p = proc_of(r, &f.pid, fo), t = p ? thread_of(r, p, &f.tid, fo) : 0;
		uint32_t key = t ? flow_key(r, 0, f.cat, f.name, &f.id) : 0;
		if (!key)
			return -1;
		struct jr_ev *e = push_ev(r, &f, ts, fo);
		if (!e)
			return -1;
		e->thr = t;
		e->key = key;
		e->prev_x = r->last_x;
		e->bp_e = f.ph == 's' || f.bp_e;
		goto drop_args;
	}
	default:
		/* Async and object events, samples, marks: not read. */
		r->ck.skipped++;
		goto drop_args;
	}
drop_args:
	r->nargs = a0;
	return r->err ? -1 : 0;
}

/* The events array (the document itself, or its "traceEvents"). A document that is an array
 * and ends early (cuptrace's writer killed, the way trace_processor takes it) is read up to its
 * last whole event; anything else cut is an error. */
static int parse_events(struct jr *r, int top_level)
{
	struct jp *j = &r->jp;

	if (jp_array_begin(j))
		return -1;
	for (;;) {
		/* What a partial last event would leave behind, to take back. */
		size_t nevs = r->nevs, nargs = r->nargs;
		uint32_t last_x = r->last_x;
		uint64_t elements = r->elements, ph_seen = r->ph_seen;
		struct cuptrace_json_check ck = r->ck;
		size_t at = (size_t)(j->p - j->base); /* where a cut last event starts */
		int rc = jp_array_next(j);
		if (!rc)
			return 0;
		if (rc > 0 && r->elements >= UINT32_MAX - 1)
			return jp_fail(j, "more than %u events", UINT32_MAX - 2);
		if (rc > 0 && !parse_event(r, (uint32_t)r->elements))
			continue;
		/* A cut inside the events array, whether the document is the array or an object
		 * holding it ("traceEvents": torch.profiler's), keeps the whole events before. */
		(void)top_level;
		if (r->err || !jp_cut(j) || !elements)
			return -1;
		r->nevs = nevs;
		r->nargs = nargs;
		r->last_x = last_x;
		r->elements = elements;
		r->ph_seen = ph_seen;
		r->ck = ck;
		r->ck.truncated = 1;
		r->ck.truncated_at = at;
		j->failed = 0; /* taken as the end of the document (cuptrace_read_trace says so) */
		return 0;
	}
}

/* The members of torch.profiler's "distributedInfo" that say where a rank stands, from the
 * compact text that parse_top_meta kept (nothing if it is not an object). */
static void parse_dist(struct jr *r, const char *text)
{
	struct jp j;
	const char *k, *s;
	size_t kn, n;
	int rc;

	jp_init(&j, text, strlen(text), r->name);
	if (jp_peek(&j) != JT_OBJECT || jp_object_begin(&j))
		goto out;
	while ((rc = jp_object_next(&j, &k, &kn)) > 0) {
		enum jtype t = jp_peek(&j);
		int64_t *slot = !strcmp(k, "rank")         ? &r->dist_rank
		                : !strcmp(k, "world_size") ? &r->dist_world
		                                           : NULL;
		struct jnum num;
		if (slot && t == JT_NUMBER) {
			if (jp_number(&j, &num))
				break;
			if (num.is_int && num.i >= 0 && num.i <= INT32_MAX)
				*slot = num.i;
		} else if (!strcmp(k, "backend") && t == JT_STRING) {
			if (jp_string(&j, &s, &n))
				break;
			r->dist_backend = jr_str(r, s, n);
		} else if (jp_skip(&j)) {
			break;
		}
	}
out:
	jp_free(&j);
}

/* "deviceProperties": Kineto's list of GPUs ("computeProperties" in its 2021 format, with
 * "major", "minor" and "multiProcessorCount"). */
static int parse_devices(struct jr *r)
{
	struct jp *j = &r->jp;
	const char *k, *s;
	size_t kn, n;
	int rc, rc2;

	if (jp_peek(j) != JT_ARRAY)
		return jp_skip(j);
	if (jp_array_begin(j))
		return -1;
	while ((rc = jp_array_next(j)) > 0) {
		struct jr_device d = {.id = -1, .has = 1};
		if (jp_peek(j) != JT_OBJECT) {
			if (jp_skip(j))
				return -1;
			continue;
		}
		if (jp_object_begin(j))
			return -1;
		while ((rc2 = jp_object_next(j, &k, &kn)) > 0) {
			enum jtype t = jp_peek(j);
			int64_t *slot =
			    !strcmp(k, "id")                                            ? &d.id
			    : !strcmp(k, "computeMajor") || !strcmp(k, "major")         ? &d.major
			    : !strcmp(k, "computeMinor") || !strcmp(k, "minor")         ? &d.minor
			    : !strcmp(k, "numSms") || !strcmp(k, "multiProcessorCount") ? &d.sms
			    : !strcmp(k, "totalGlobalMem")                              ? &d.mem
			                                                                : NULL;
			if (slot && t == JT_NUMBER) {
				struct jnum num;
				if (jp_number(j, &num))
					return -1;
				*slot = num.is_int ? num.i : 0;
			} else if (!strcmp(k, "name") && t == JT_STRING) {
				if (jp_string(j, &s, &n))
					return -1;
				d.name = jr_str(r, s, n);
			} else if (jp_skip(j)) {
				return -1;
			}
		}
		if (rc2 < 0)
			return -1;
		if (d.id >= 0 && d.id < JR_MAX_DEVICES)
			r->dev[d.id] = d;
	}
	return rc;
}

/* Any other member of the top-level object: kept as metadata as it is (nested values as their
 * compact JSON text, up to MAX_META_TEXT bytes). */
static int parse_top_meta(struct jr *r, const char *key, size_t kn)
{
	struct jr_arg a = {.key = jr_str(r, key, kn)};
	struct jr_meta m;
	int t = jr_parse_value(r, &a, MAX_META_TEXT);

	if (t <= 0 || arg_meta(r, &a, &m))
		return t < 0 ? -1 : 0;
	if (m.is_int && !strcmp(key, "baseTimeNanoseconds")) {
		r->have_base_time = 1;
		r->base_time_ns = m.i;
	}
	if (!m.is_int && !strcmp(key, "distributedInfo") && jr_s(r, m.s))
		parse_dist(r, jr_s(r, m.s));
	if (!m.is_int && (!strcmp(key, "host_name") || !strcmp(key, "hostname")) && !r->top_host)
		r->top_host = m.s;
	return jr_meta_put(r, &r->meta0, &m);
}

int jr_parse(struct jr *r)
{
	struct jp *j = &r->jp;
	const char *k;
	size_t kn;
	int rc = 0, have_events = 0;

	switch (jp_peek(j)) {
	case JT_ARRAY:
		have_events = 1;
		rc = parse_events(r, 1);
		if (!rc && !r->ck.truncated)
			rc = jp_finish(j);
		break;
	case JT_OBJECT:
		if (jp_object_begin(j))
			break;
		while ((rc = jp_object_next(j, &k, &kn)) > 0) {
			if (!strcmp(k, "traceEvents") && !have_events) {
				have_events = 1;
				if (jp_peek(j) != JT_ARRAY) {
					rc = jp_fail(j, "\"traceEvents\" is not an array");
					break;
				}
				rc = parse_events(r, 0);
				if (!rc && r->ck.truncated)
					break; /* the document ends inside its events */
			} else if (!strcmp(k, "deviceProperties") ||
			           !strcmp(k, "computeProperties")) {
				rc = parse_devices(r);
			} else {
				rc = parse_top_meta(r, k, kn);
			}
			if (rc)
				break;
		}
		if (!rc && !r->ck.truncated)
			rc = jp_finish(j);
		break;
	case JT_NONE:
		break;
	default:
		jp_fail(j, "a JSON value that is not a trace (a trace is an array of events, or an "
		           "object with \"traceEvents\")");
		break;
	}
	if (r->err) {
		cuptrace_err("%s: out of memory", r->name);
		return r->err;
	}
	if (j->failed) {
		cuptrace_err("%s", jp_error(j));
		return -EINVAL;
	}
	if (!have_events) {
		cuptrace_err(
		    "%s: a JSON object without \"traceEvents\": not a Chrome or torch.profiler "
		    "trace",
		    r->name);
		return -EINVAL;
	}
	if (r->elements && !r->ph_seen) {
		cuptrace_err("%s: none of the %" PRIu64 " elements of the events array is a trace "
		             "event (an object with \"ph\"): not a trace",
		             r->name, r->elements);
		return -EINVAL;
	}
	r->ck.events = r->elements;
	return 0;
}
