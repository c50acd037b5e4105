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
		case PF_TRACK_UUID:
			t.uuid = f.v;
			has_uuid = f.wt == PF_WT_VARINT;
			break;
		case PF_TRACK_NAME:
		case PF_TRACK_STATIC_NAME:
		case PF_TRACK_ATRACE_NAME:
			if (f.wt == PF_WT_LEN && !t.name)
				t.name = sid(r, f.b, f.n);
			break;
		case PF_TRACK_PARENT_UUID:
			t.has_parent = f.wt == PF_WT_VARINT;
			t.parent = f.v;
			break;
		case PF_TRACK_CHILD_ORDERING:
			t.has_order = f.wt == PF_WT_VARINT;
			break;
		case PF_TRACK_SIBLING_ORDER_RANK:
			t.rank = (int32_t)f.v;
			break;
		case PF_TRACK_DESCRIPTION:
			if (f.wt == PF_WT_LEN)
				t.desc = sid(r, f.b, f.n);
			break;
		case PF_TRACK_PROCESS:
		case PF_TRACK_THREAD:
		case PF_TRACK_COUNTER:
			if (f.wt != PF_WT_LEN)
				break;
			t.has_process |= f.id == PF_TRACK_PROCESS;
			t.has_thread |= f.id == PF_TRACK_THREAD;
			t.has_counter |= f.id == PF_TRACK_COUNTER;
			e = pb_of(f.b, f.n);
			while ((rc = pb_next(&e, &g)) > 0) {
				if (f.id == PF_TRACK_COUNTER) {
					if (g.id == PF_COUNTER_UNIT && g.wt == PF_WT_VARINT)
						t.unit = (int)g.v;
					continue;
				}
				if (f.id == PF_TRACK_PROCESS && g.id == PF_PROCESS_LABELS)
					r->ck.process_labels++;
				/* ProcessDescriptor.pid and ThreadDescriptor.pid are both 1. */
				if (g.id == PF_PROCESS_PID && g.wt == PF_WT_VARINT) {
					t.pid = (int32_t)g.v;
					t.has_pid = 1;
				} else if (f.id == PF_TRACK_THREAD && g.id == PF_THREAD_TID &&
				           g.wt == PF_WT_VARINT) {
					t.tid = (int64_t)g.v;
					t.has_tid = 1;
				} else if (g.wt == PF_WT_LEN &&
				           ((f.id == PF_TRACK_PROCESS &&
				             g.id == PF_PROCESS_PROCESS_NAME) ||
				            (f.id == PF_TRACK_THREAD &&
				             g.id == PF_THREAD_THREAD_NAME))) {
					t.name = sid(r, g.b, g.n);
				} else if (f.id == PF_TRACK_PROCESS && g.id == PF_PROCESS_CMDLINE &&
				           g.wt == PF_WT_LEN) {
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
		if (f.id != PF_ATTRIBUTES_ATTRIBUTE || f.wt != PF_WT_LEN)
			continue;
		struct rmeta a = {0};
		int has_key = 0, has_val = 0;
		e = pb_of(f.b, f.n);
		while ((rc = pb_next(&e, &g)) > 0) {
			if (g.id == PF_ATTRIBUTE_KEY && g.wt == PF_WT_LEN) {
				a.key = sid(r, g.b, g.n);
				has_key = 1;
			} else if (g.id == PF_ATTRIBUTE_LONG_VALUE && g.wt == PF_WT_VARINT) {
				a.is_int = 1;
				a.i = (int64_t)g.v;
				a.s = 0;
				has_val = 1;
			} else if (g.id == PF_ATTRIBUTE_STRING_VALUE && g.wt == PF_WT_LEN) {
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
		if (f.id == PF_SYSINFO_MACHINE_NAME && f.wt == PF_WT_LEN && !r->hostname)
			r->hostname = sid(r, f.b, f.n);
	return rc;
}

int pf_parse_uuid(struct reader *r, const uint8_t *b, size_t n)
{
	struct pb m = pb_of(b, n);
	struct pbf f;
	int rc;

	while ((rc = pb_next(&m, &f)) > 0) {
		if (f.id == PF_UUID_MSB && f.wt == PF_WT_VARINT)
			r->uuid_hi = f.v;
		else if (f.id == PF_UUID_LSB && f.wt == PF_WT_VARINT)
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
		if (f.wt == PF_WT_LEN &&
		    (f.id == PF_ANNOTATION_NAME || f.id == PF_ANNOTATION_STRING_VALUE ||
		     f.id == PF_ANNOTATION_LEGACY_JSON_VALUE)) {
			uint32_t s = sid(r, f.b, f.n);
			if (f.id == PF_ANNOTATION_NAME) {
				a.key = s;
				has_name = 1;
			} else {
				a.type = CUPTRACE_ARG_STRING;
				a.v.s = s;
				has_val = 1;
			}
			continue;
		}
		if (f.wt == PF_WT_FIXED64 && f.id == PF_ANNOTATION_DOUBLE_VALUE) {
			a.type = CUPTRACE_ARG_DOUBLE;
			memcpy(&a.v.d, &f.v, sizeof(double));
			has_val = 1;
			continue;
		}
		if (f.wt != PF_WT_VARINT)
			continue;
		switch (f.id) {
		case PF_ANNOTATION_NAME_IID:
			a.key = lookup_iid(r, q, IT_KEY, f.v);
			has_name = 1;
			break;
		case PF_ANNOTATION_BOOL_VALUE:
			a.type = CUPTRACE_ARG_BOOL;
			a.v.i = !!f.v;
			has_val = 1;
			break;
		case PF_ANNOTATION_UINT_VALUE:
		case PF_ANNOTATION_POINTER_VALUE:
			a.type = f.id == PF_ANNOTATION_UINT_VALUE ? CUPTRACE_ARG_UINT
			                                          : CUPTRACE_ARG_POINTER;
			a.v.u = f.v;
			has_val = 1;
			break;
		case PF_ANNOTATION_INT_VALUE:
			a.type = CUPTRACE_ARG_INT;
			a.v.i = (int64_t)f.v;
			has_val = 1;
			break;
		case PF_ANNOTATION_STRING_VALUE_IID:
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
		if (f.wt != PF_WT_LEN ||
		    (f.id != PF_ANNOTATION_DICT_ENTRIES && f.id != PF_ANNOTATION_ARRAY_VALUES))
			continue;
		char sub[256];
		int w = f.id == PF_ANNOTATION_ARRAY_VALUES
		            ? snprintf(sub, sizeof(sub), "%s[%zu]", key, idx++)
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
	struct rev ev = {0};
	uint64_t corr = 0;
	uint32_t cats[16], stack = 0;
	size_t ncat = 0;
	int rc, has_track = 0, has_val = 0, has_flows = 0, has_terms = 0;
	size_t arg0 = r->nargs, flow0 = r->nflows;

	/* TP reads the deprecated varint flow fields (flow_ids_old, terminating_flow_ids_old) only
	 * when the fixed64 ones (flow_ids, terminating_flow_ids) are absent. */
	while ((rc = pb_next(&m, &f)) > 0) {
		has_flows |= f.id == PF_EVENT_FLOW_IDS && f.wt == PF_WT_FIXED64;
		has_terms |= f.id == PF_EVENT_TERMINATING_FLOW_IDS && f.wt == PF_WT_FIXED64;
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
	/* Then, still before the event is looked at, its time: TP converts it to the trace clock
	 * (a packet whose clock has no path is dropped first), and drops a TrackEvent whose time
	 * is negative there (track_event_invalid_timestamp, track_event_tokenizer.cc). A time on
	 * a clock that no snapshot relates yet is checked at the end (pf_decode), as TP defers
	 * such packets to the end of the file. The deprecated TrackEvent.timestamp_delta_us and
	 * timestamp_absolute_us, which TP would take instead, are not read. */
	int64_t trace_ts;
	if (k->time_err) {
		r->ck.clock_errors++;
		return 0;
	}
	if (!pf_trace_time(r, k->abs_ts, k->dom, &trace_ts) && trace_ts < 0) {
		r->ck.negative_timestamps++;
		return 0;
	}
	ev.arg0 = (uint32_t)arg0;
	ev.flow0 = (uint32_t)flow0;
	m = pb_of(k->payload.b, k->payload.n);
	while ((rc = pb_next(&m, &f)) > 0 && !r->err) {
		switch (f.id) {
		case PF_EVENT_TYPE:
			ev.type = f.wt == PF_WT_VARINT && f.v <= 5 ? (uint8_t)f.v : 0;
			break;
		case PF_EVENT_TRACK_UUID:
			ev.track = f.v;
			has_track = f.wt == PF_WT_VARINT;
			break;
		case PF_EVENT_CATEGORY_IIDS:
			if (f.wt == PF_WT_VARINT && ncat < 16)
				cats[ncat++] = lookup_iid(r, q, IT_CAT, f.v);
			break;
		case PF_EVENT_CATEGORIES:
			if (f.wt == PF_WT_LEN && ncat < 16)
				cats[ncat++] = sid(r, f.b, f.n);
			break;
		case PF_EVENT_NAME_IID:
			if (f.wt == PF_WT_VARINT)
				ev.name = lookup_iid(r, q, IT_NAME, f.v);
			break;
		case PF_EVENT_NAME:
			if (f.wt == PF_WT_LEN)
				ev.name = sid(r, f.b, f.n);
			break;
		case PF_EVENT_DEBUG_ANNOTATIONS:
			if (f.wt == PF_WT_LEN && parse_annotation(r, q, f.b, f.n, NULL, 0) < 0)
				goto bad;
			break;
		case PF_EVENT_COUNTER_VALUE:
			if (f.wt == PF_WT_VARINT) {
				ev.val.i = (int64_t)f.v;
				ev.is_double = 0;
				has_val = 1;
			}
			break;
		case PF_EVENT_DOUBLE_COUNTER_VALUE:
			if (f.wt == PF_WT_FIXED64) {
				memcpy(&ev.val.d, &f.v, sizeof(double));
				ev.is_double = 1;
				has_val = 1;
			}
			break;
		case PF_EVENT_FLOW_IDS:
		case PF_EVENT_FLOW_IDS_OLD:
			if (has_flows ? f.id == PF_EVENT_FLOW_IDS && f.wt == PF_WT_FIXED64
			              : f.id == PF_EVENT_FLOW_IDS_OLD && f.wt == PF_WT_VARINT) {
				uint64_t *slot = PUSH(r, flows, nflows, flowcap);
				if (slot)
					*slot = f.v;
			}
			break;
		case PF_EVENT_CORRELATION_ID:
			if (f.wt == PF_WT_VARINT)
				corr = f.v;
			break;
		case PF_EVENT_CALLSTACK_IID: /* a oneof with the inline form: the last one wins */
			if (f.wt == PF_WT_VARINT)
				stack = pf_callstack_iid(r, q, f.v);
			break;
		case PF_EVENT_CALLSTACK:
			if (f.wt == PF_WT_LEN && pf_parse_inline_callstack(r, f.b, f.n, &stack) < 0)
				goto bad;
			break;
		}
	}
	if (rc < 0)
		goto bad;
	if (r->err)
		return 0;
	if (stack) {
		struct rarg *a = PUSH(r, args, nargs, argcap);
		if (!a)
			return 0;
		*a = (struct rarg){.type = RARG_STACK, .v.u = stack};
	}
	ev.nargs = (uint32_t)(r->nargs - arg0);
	ev.nflows = (uint32_t)(r->nflows - flow0);
	m = pb_of(k->payload.b, k->payload.n);
	while ((rc = pb_next(&m, &f)) > 0 && !r->err) {
		if (has_terms ? f.id == PF_EVENT_TERMINATING_FLOW_IDS && f.wt == PF_WT_FIXED64
		              : f.id == PF_EVENT_TERMINATING_FLOW_IDS_OLD && f.wt == PF_WT_VARINT) {
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
	if (ev.type != TE_COUNTER)
		ev.val.corr = corr;
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
