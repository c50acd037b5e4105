/* Perfetto reader, message level: decodes the payloads that are replayed (TrackEvent,
 * TrackDescriptor, TraceAttributes, SystemInfo, TraceUuid) into the records of struct reader. */
#include "common/util.h"
#include "read/perfetto_state.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define MAX_ANN_DEPTH 8 /* nested debug annotations flattened this deep */

static uint32_t lookup_iid(struct reader *r, struct rseq *q, int k, uint64_t iid)
{
	uint64_t *v = q ? cuptrace_u64map_get(&q->tab[k], iid) : NULL;
	if (!v) {
		r->ck.unknown_iid++;
		return 0;
	}
	return (uint32_t)*v;
}

/* ---- descriptors and metadata ---- */

int pf_parse_track(struct reader *r, const uint8_t *b, size_t n)
{
	struct rtrack t = {0};
	struct pb m = pb_of(b, n), e;
	struct pbf f, g;
	int rc, has_uuid = 0;
	size_t cmd_start = r->ncmds;

	while ((rc = pb_next(&m, &f)) > 0) {
		switch (f.id) {
		case 1:
			t.uuid = f.v;
			has_uuid = f.wt == 0;
			break;
		case 2:
		case 10:
		case 13:
			if (f.wt == 2 && !t.name)
				t.name = sid(r, f.b, f.n);
			break;
		case 5:
			t.has_parent = f.wt == 0;
			t.parent = f.v;
			break;
		case 11:
			t.has_order = f.wt == 0;
			break;
		case 12:
			t.rank = (int32_t)f.v;
			break;
		case 14:
			if (f.wt == 2)
				t.desc = sid(r, f.b, f.n);
			break;
		case 3:
		case 4:
		case 8:
			if (f.wt != 2)
				break;
			t.has_process |= f.id == 3;
			t.has_thread |= f.id == 4;
			t.has_counter |= f.id == 8;
			e = pb_of(f.b, f.n);
			while ((rc = pb_next(&e, &g)) > 0) {
				if (f.id == 8) {
					if (g.id == 3 && g.wt == 0)
						t.unit = (int)g.v;
					continue;
				}
				if (g.id == 1 && g.wt == 0) {
					t.pid = (int32_t)g.v;
					t.has_pid = 1;
				} else if (f.id == 4 && g.id == 2 && g.wt == 0) {
					t.tid = (int64_t)g.v;
					t.has_tid = 1;
				} else if (g.wt == 2 &&
				           ((f.id == 3 && g.id == 6) || (f.id == 4 && g.id == 5))) {
					t.name = sid(r, g.b, g.n);
				} else if (f.id == 3 && g.id == 2 && g.wt == 2) {
					uint32_t *c = PUSH(r, cmds, ncmds, cmdcap);
					if (c)
						*c = sid(r, g.b, g.n);
				}
			}
			if (rc < 0)
				goto bad;
			break;
		}
	}
	if (rc < 0)
		goto bad;
	if (!has_uuid || !t.uuid || cuptrace_u64map_get(&r->trk_of, t.uuid))
		goto skip; /* TP drops a uuid-less descriptor; a repeated one adds nothing we keep
		            */
	t.cmd0 = (uint32_t)cmd_start;
	t.ncmd = (uint32_t)(r->ncmds - cmd_start);
	if (t.has_thread && t.has_pid && t.has_tid) {
		uint64_t key =
		    cuptrace_hash64((uint64_t)(uint32_t)t.pid ^ cuptrace_hash64((uint64_t)t.tid));
		int created;
		uint64_t *v = cuptrace_u64map_put(&r->tid_of, key, &created);
		if (v && created)
			*v = t.uuid;
		else if (v && *v != t.uuid)
			r->ck.duplicate_thread_uuid++;
	} else if (t.has_process && t.has_pid && !t.has_thread) {
		int created;
		uint64_t *v = cuptrace_u64map_put(&r->pid_of, (uint64_t)(uint32_t)t.pid, &created);
		if (v && created)
			*v = t.uuid;
		else if (v && *v != t.uuid)
			r->ck.duplicate_process_uuid++;
	}
	struct rtrack *slot = PUSH(r, trk, ntrk, trkcap);
	uint64_t *v = slot ? cuptrace_u64map_put(&r->trk_of, t.uuid, NULL) : NULL;
	if (!v) {
		r->err = -ENOMEM;
		return 0;
	}
	*slot = t;
	*v = r->ntrk;
	return 0;
skip:
	r->ncmds = cmd_start;
	return 0;
bad:
	r->ncmds = cmd_start;
	return -1;
}

static int meta_put(struct reader *r, struct rmeta **arr, size_t *n, size_t *cap,
                    const struct rmeta *m)
{
	for (size_t i = 0; i < *n; i++) {
		if ((*arr)[i].key == m->key) {
			(*arr)[i] = *m;
			return 0;
		}
	}
	struct rmeta *a = cuptrace_grow(*arr, cap, *n + 1, sizeof(*a));
	if (!a)
		return r->err = -ENOMEM;
	*arr = a;
	a[(*n)++] = *m;
	return 0;
}

int pf_parse_attributes(struct reader *r, const uint8_t *b, size_t n)
{
	struct pb m = pb_of(b, n), e;
	struct pbf f, g;
	int rc, first = !r->have_meta0;

	r->have_meta0 = 1;
	while ((rc = pb_next(&m, &f)) > 0) {
		if (f.id != 1 || f.wt != 2)
			continue;
		struct rmeta a = {0};
		int has_key = 0, has_val = 0;
		e = pb_of(f.b, f.n);
		while ((rc = pb_next(&e, &g)) > 0) {
			if (g.id == 1 && g.wt == 2) {
				a.key = sid(r, g.b, g.n);
				has_key = 1;
			} else if (g.id == 2 && g.wt == 0) {
				a.is_int = 1;
				a.i = (int64_t)g.v;
				a.s = 0;
				has_val = 1;
			} else if (g.id == 3 && g.wt == 2) {
				a.is_int = 0;
				a.s = sid(r, g.b, g.n);
				has_val = 1;
			}
		}
		if (rc < 0)
			return -1;
		if (!has_key || !has_val || r->err)
			continue;
		if (first)
			meta_put(r, &r->meta0, &r->nmeta0, &r->meta0cap, &a);
		meta_put(r, &r->meta, &r->nmeta, &r->metacap, &a);
	}
	return rc;
}

int pf_parse_sysinfo(struct reader *r, const uint8_t *b, size_t n)
{
	struct pb m = pb_of(b, n);
	struct pbf f;
	int rc;

	while ((rc = pb_next(&m, &f)) > 0)
		if (f.id == 17 && f.wt == 2 && !r->hostname)
			r->hostname = sid(r, f.b, f.n);
	return rc;
}

int pf_parse_uuid(struct reader *r, const uint8_t *b, size_t n)
{
	struct pb m = pb_of(b, n);
	struct pbf f;
	int rc;

	while ((rc = pb_next(&m, &f)) > 0) {
		if (f.id == 1 && f.wt == 0)
			r->uuid_hi = f.v;
		else if (f.id == 2 && f.wt == 0)
			r->uuid_lo = f.v;
	}
	return rc;
}

/* ---- track events ---- */

/* One DebugAnnotation as args; dicts and arrays are flattened to "a.b" and "a[0]" keys, as TP
 * names them (without its "debug." prefix), down to MAX_ANN_DEPTH. */
static int parse_annotation(struct reader *r, struct rseq *q, const uint8_t *b, size_t n,
                            const char *prefix, int depth)
{
	struct pb m = pb_of(b, n);
	struct pbf f;
	struct rarg a = {0};
	int rc, has_val = 0, has_name = 0;
	char key[256];

	while ((rc = pb_next(&m, &f)) > 0) {
		if (f.wt == 2 && (f.id == 10 || f.id == 6 || f.id == 9)) {
			uint32_t s = sid(r, f.b, f.n);
			if (f.id == 10) {
				a.key = s;
				has_name = 1;
			} else {
				a.type = CUPTRACE_ARG_STRING;
				a.v.s = s;
				has_val = 1;
			}
			continue;
		}
		if (f.wt == 1 && f.id == 5) {
			a.type = CUPTRACE_ARG_DOUBLE;
			memcpy(&a.v.d, &f.v, sizeof(double));
			has_val = 1;
			continue;
		}
		if (f.wt != 0)
			continue;
		switch (f.id) {
		case 1:
			a.key = lookup_iid(r, q, IT_KEY, f.v);
			has_name = 1;
			break;
		case 2:
			a.type = CUPTRACE_ARG_BOOL;
			a.v.i = !!f.v;
			has_val = 1;
			break;
		case 3:
		case 7:
			a.type = f.id == 3 ? CUPTRACE_ARG_UINT : CUPTRACE_ARG_POINTER;
			a.v.u = f.v;
			has_val = 1;
			break;
		case 4:
			a.type = CUPTRACE_ARG_INT;
			a.v.i = (int64_t)f.v;
			has_val = 1;
			break;
		case 17:
			a.type = CUPTRACE_ARG_STRING;
			a.v.s = lookup_iid(r, q, IT_VAL, f.v);
			has_val = a.v.s != 0;
			break;
		}
	}
	if (rc < 0)
		return -1;
	if (has_name && !a.key) /* an unknown name iid: already counted */
		return 0;
	const char *name = has_name ? str(r, a.key) : "";
	if (prefix)
		snprintf(key, sizeof(key), "%s%s%s", prefix, has_name ? "." : "", name);
	else
		snprintf(key, sizeof(key), "%s", name);
	if (has_val) {
		struct rarg *slot;
		a.key = prefix ? sid(r, key, strlen(key)) : a.key;
		if (!a.key && !has_name)
			a.key = sid(r, "", 0);
		if ((slot = PUSH(r, args, nargs, argcap)))
			*slot = a;
		return 0;
	}
	if (depth >= MAX_ANN_DEPTH)
		return 0;
	/* Children: dict entries carry their own names; array values get [i]. */
	size_t idx = 0;
	m = pb_of(b, n);
	while ((rc = pb_next(&m, &f)) > 0 && !r->err) {
		if (f.wt != 2 || (f.id != 11 && f.id != 12))
			continue;
		char sub[256];
		int w = f.id == 12 ? snprintf(sub, sizeof(sub), "%s[%zu]", key, idx++)
		                   : snprintf(sub, sizeof(sub), "%s", key);
		if (w < 0)
			continue; /* a long key is cut, which is fine */
		if (parse_annotation(r, q, f.b, f.n, sub, depth + 1) < 0)
			return -1;
	}
	return rc < 0 ? -1 : 0;
}

/* Joins the category names of an event with ',' as TP does. */
static uint32_t join_cats(struct reader *r, const uint32_t *ids, size_t n)
{
	char buf[1024];
	size_t len = 0;

	if (n == 1)
		return ids[0];
	for (size_t i = 0; i < n; i++) {
		const char *s = str(r, ids[i]);
		int w = snprintf(buf + len, sizeof(buf) - len, "%s%s", i ? "," : "", s ? s : "");
		if (w < 0 || (size_t)w >= sizeof(buf) - len) {
			len = sizeof(buf) - 1;
			break;
		}
		len += (size_t)w;
	}
	return sid(r, buf, len);
}

int pf_parse_event(struct reader *r, struct rseq *q, const struct pkt *k)
{
	struct pb m = pb_of(k->payload.b, k->payload.n);
	struct pbf f;
	struct rev ev = {.fo = r->fo++};
	uint32_t cats[16];
	size_t ncat = 0;
	int rc, has_track = 0, has_val = 0, has47 = 0, has48 = 0;
	size_t arg0 = r->nargs, flow0 = r->nflows;

	/* TP reads the deprecated varint flow fields (36, 42) only when the fixed64 ones (47, 48)
	 * are absent. */
	while ((rc = pb_next(&m, &f)) > 0) {
		has47 |= f.id == 47 && f.wt == 1;
		has48 |= f.id == 48 && f.wt == 1;
	}
	if (rc < 0)
		return -1;
	/* The checks TP makes at tokenization (file order), before anything is resolved. */
	if (!k->has_seq) {
		r->ck.missing_sequence_id++;
		return 0;
	}
	if (!k->has_ts) {
		r->ck.missing_timestamp++;
		return 0;
	}
	ev.arg0 = (uint32_t)arg0;
	ev.flow0 = (uint32_t)flow0;
	m = pb_of(k->payload.b, k->payload.n);
	while ((rc = pb_next(&m, &f)) > 0 && !r->err) {
		switch (f.id) {
		case 9:
			ev.type = f.wt == 0 && f.v <= 5 ? (uint8_t)f.v : 0;
			break;
		case 11:
			ev.track = f.v;
			has_track = f.wt == 0;
			break;
		case 3:
			if (f.wt == 0 && ncat < 16)
				cats[ncat++] = lookup_iid(r, q, IT_CAT, f.v);
			break;
		case 22:
			if (f.wt == 2 && ncat < 16)
				cats[ncat++] = sid(r, f.b, f.n);
			break;
		case 10:
			if (f.wt == 0)
				ev.name = lookup_iid(r, q, IT_NAME, f.v);
			break;
		case 23:
			if (f.wt == 2)
				ev.name = sid(r, f.b, f.n);
			break;
		case 4:
			if (f.wt == 2 && parse_annotation(r, q, f.b, f.n, NULL, 0) < 0)
				goto bad;
			break;
		case 30:
			if (f.wt == 0) {
				ev.val.i = (int64_t)f.v;
				ev.is_double = 0;
				has_val = 1;
			}
			break;
		case 44:
			if (f.wt == 1) {
				memcpy(&ev.val.d, &f.v, sizeof(double));
				ev.is_double = 1;
				has_val = 1;
			}
			break;
		case 47:
		case 36:
			if ((has47 && f.id == 47 && f.wt == 1) || (!has47 && f.id == 36 && !f.wt)) {
				uint64_t *slot = PUSH(r, flows, nflows, flowcap);
				if (slot)
					*slot = f.v;
			}
			break;
		case 52:
			if (f.wt == 0)
				ev.corr = f.v;
			break;
		}
	}
	if (rc < 0)
		goto bad;
	if (r->err)
		return 0;
	ev.nargs = (uint32_t)(r->nargs - arg0);
	ev.nflows = (uint32_t)(r->nflows - flow0);
	m = pb_of(k->payload.b, k->payload.n);
	while ((rc = pb_next(&m, &f)) > 0 && !r->err) {
		if ((has48 && f.id == 48 && f.wt == 1) || (!has48 && f.id == 42 && !f.wt)) {
			uint64_t *slot = PUSH(r, flows, nflows, flowcap);
			if (slot)
				*slot = f.v;
		}
	}
	ev.nterm = (uint32_t)(r->nflows - flow0 - ev.nflows);
	if (!has_track && q && q->has_def_track) {
		ev.track = q->def_track;
		has_track = 1;
	}
	if (ncat)
		ev.cat = join_cats(r, cats, ncat);

	if (ev.type < TE_BEGIN || ev.type > TE_COUNTER)
		goto drop; /* legacy and TYPE_STATE events are not in our model */
	if (ev.type == TE_COUNTER) {
		struct rtrack *t = track_of(r, ev.track);
		if (!t || !t->has_counter) {
			r->ck.counter_before_descriptor++;
			goto drop;
		}
		if (!has_val)
			goto drop;
		r->nargs = arg0;
		r->nflows = flow0;
		ev.nargs = ev.nflows = ev.nterm = 0;
	}
	if (k->time_err) {
		r->ck.clock_errors++;
		goto drop;
	}
	if (k->abs_ts > INT64_MAX) {
		r->ck.negative_timestamps++; /* TP: track_event_invalid_timestamp */
		goto drop;
	}
	ev.ts = (int64_t)k->abs_ts;
	ev.dom = k->dom;
	struct rev *slot = PUSH(r, evs, nevs, evcap);
	if (slot)
		*slot = ev;
	return 0;
drop:
	r->nargs = arg0;
	r->nflows = flow0;
	return 0;
bad:
	r->nargs = arg0;
	r->nflows = flow0;
	return -1;
}
