/* Perfetto reader, call stacks: the interned callstacks, frames, mappings and their strings of a
 * sequence (InternedData fields 5, 6, 7, 16 to 19), and TrackEvent's inline callstack, turned
 * into the trace-wide stack table r->stk (ids in it are what slices carry). */
#include "common/util.h"
#include "read/perfetto_state.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FRAMES 4096 /* a stack deeper than this is cut at its innermost end */

/* Build ids are hex in our model: an InternedString that is already hex is lowercased, raw bytes
 * (what heapprofd writes) are encoded. Returns a string id. */
static uint32_t build_id_sid(struct reader *r, const uint8_t *b, size_t n)
{
	int hex = n && n % 2 == 0;
	for (size_t i = 0; i < n && hex; i++)
		hex =
		    (b[i] >= '0' && b[i] <= '9') || ((b[i] | 0x20) >= 'a' && (b[i] | 0x20) <= 'f');
	if (n > 1024)
		n = 1024;
	char buf[2049];
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (hex) {
			buf[k++] = (char)(b[i] >= 'A' && b[i] <= 'F' ? b[i] | 0x20 : b[i]);
		} else {
			buf[k++] = "0123456789abcdef"[b[i] >> 4];
			buf[k++] = "0123456789abcdef"[b[i] & 15];
		}
	}
	return sid(r, buf, k);
}

static uint32_t lookup(struct rseq *q, int k, uint64_t iid)
{
	uint64_t *v = iid ? cuptrace_u64map_get(&q->ctab[k], iid) : NULL;
	return v ? (uint32_t)*v : 0;
}

static int put(struct reader *r, struct rseq *q, int k, uint64_t iid, uint32_t val)
{
	uint64_t *v = iid && val ? cuptrace_u64map_put(&q->ctab[k], iid, NULL) : NULL;
	if (v)
		*v = val;
	else if (iid && val)
		r->err = -ENOMEM;
	return 0;
}

/* InternedString {iid, str}: one entry of the string tables. */
static int parse_string(struct reader *r, struct rseq *q, int k, const uint8_t *b, size_t n)
{
	struct pb m = pb_of(b, n);
	struct pbf g;
	uint64_t iid = 0;
	const uint8_t *s = NULL;
	size_t sn = 0;
	int rc;
	while ((rc = pb_next(&m, &g)) > 0) {
		if (g.id == PF_ENTRY_IID && g.wt == PF_WT_VARINT)
			iid = g.v;
		else if (g.id == PF_ENTRY_NAME && g.wt == PF_WT_LEN)
			s = g.b, sn = g.n;
	}
	if (rc < 0)
		return -1;
	uint32_t id = k == CT_BUILD ? build_id_sid(r, s, sn) : sid(r, s ? (const void *)s : "", sn);
	return put(r, q, k, iid, id);
}

static int parse_mapping(struct reader *r, struct rseq *q, const uint8_t *b, size_t n)
{
	struct pb m = pb_of(b, n);
	struct pbf g;
	struct rmapping mp = {0};
	uint64_t iid = 0;
	char path[4096];
	size_t pn = 0, parts = 0;
	int rc;
	while ((rc = pb_next(&m, &g)) > 0) {
		if (g.id == PF_MAPPING_IID && g.wt == PF_WT_VARINT) {
			iid = g.v;
		} else if (g.id == PF_MAPPING_BUILD_ID && g.wt == PF_WT_VARINT) {
			mp.build_id = lookup(q, CT_BUILD, g.v);
		} else if (g.id == PF_MAPPING_PATH_STRING_IDS && g.wt == PF_WT_VARINT) {
			/* Perfetto joins the components with '/'; one component is a whole path. */
			const char *c = str(r, lookup(q, CT_MPATH, g.v));
			size_t cn = c ? strlen(c) : 0;
			if (parts++ && pn < sizeof(path))
				path[pn++] = '/';
			if (cn > sizeof(path) - pn)
				cn = sizeof(path) - pn;
			memcpy(path + pn, c ? c : "", cn);
			pn += cn;
		}
	}
	if (rc < 0)
		return -1;
	if (parts) {
		if (parts > 1 && pn < sizeof(path) && path[0] != '/') {
			memmove(path + 1, path, pn < sizeof(path) - 1 ? pn : sizeof(path) - 1);
			path[0] = '/';
			pn += pn < sizeof(path) - 1;
		}
		mp.path = sid(r, path, pn);
	}
	struct rmapping *slot = PUSH(r, maps, nmaps, mapcap);
	if (!slot)
		return 0;
	*slot = mp;
	return put(r, q, CT_MAP, iid, (uint32_t)r->nmaps);
}

static int parse_frame(struct reader *r, struct rseq *q, const uint8_t *b, size_t n)
{
	struct pb m = pb_of(b, n);
	struct pbf g;
	struct rframe fr = {0};
	uint64_t iid = 0;
	int rc;
	while ((rc = pb_next(&m, &g)) > 0) {
		if (g.wt != PF_WT_VARINT)
			continue;
		switch (g.id) {
		case PF_FRAME_IID:
			iid = g.v;
			break;
		case PF_FRAME_FUNCTION_NAME_ID:
			fr.fn = lookup(q, CT_FN, g.v);
			break;
		case PF_FRAME_MAPPING_ID:
			fr.map = lookup(q, CT_MAP, g.v);
			break;
		case PF_FRAME_REL_PC:
			fr.rel_pc = g.v;
			break;
		case PF_FRAME_SOURCE_PATH_IID:
			fr.file = lookup(q, CT_SRC, g.v);
			break;
		case PF_FRAME_LINE_NUMBER:
			fr.line = (uint32_t)g.v;
			break;
		}
	}
	if (rc < 0)
		return -1;
	struct rframe *slot = PUSH(r, frames, nframes, framecap);
	if (!slot)
		return 0;
	*slot = fr;
	return put(r, q, CT_FRAME, iid, (uint32_t)r->nframes);
}

/* Our frame of a decoded one: native where it names a mapping, Python-like (function, file and
 * line only) otherwise. */
static struct cuptrace_frame to_frame(const struct reader *r, const struct rframe *f)
{
	const struct rmapping *mp = f->map && f->map <= r->nmaps ? &r->maps[f->map - 1] : NULL;
	struct cuptrace_frame o = {
	    .kind = mp ? CUPTRACE_FRAME_NATIVE : CUPTRACE_FRAME_PYTHON,
	    .function = str(r, f->fn),
	    .file = str(r, f->file),
	    .line = f->line,
	};
	if (mp) {
		o.module = str(r, mp->path);
		o.build_id = str(r, mp->build_id);
		o.rel_pc = f->rel_pc;
	}
	return o;
}

static int parse_callstack(struct reader *r, struct rseq *q, const uint8_t *b, size_t n,
                           struct cuptrace_frame *fb)
{
	struct pb m = pb_of(b, n);
	struct pbf g;
	uint64_t iid = 0;
	size_t nf = 0;
	int rc;
	while ((rc = pb_next(&m, &g)) > 0) {
		if (g.id == PF_CALLSTACK_IID && g.wt == PF_WT_VARINT) {
			iid = g.v;
		} else if (g.id == PF_CALLSTACK_FRAME_IDS && g.wt == PF_WT_VARINT) {
			uint32_t fi = lookup(q, CT_FRAME, g.v);
			if (!fi)
				r->ck.unknown_iid++;
			else if (nf < MAX_FRAMES)
				fb[nf++] = to_frame(r, &r->frames[fi - 1]);
		}
	}
	if (rc < 0)
		return -1;
	uint32_t id = cuptrace_stacktab_add(&r->stk, fb, nf);
	if (!id)
		r->err = -ENOMEM;
	return put(r, q, CT_STACK, iid, id);
}

int pf_parse_interned_stacks(struct reader *r, struct rseq *q, const uint8_t *b, size_t n)
{
	/* Callstacks name frames, frames name mappings and strings, mappings name strings: one
	 * pass per level, so that the order of the fields in the message does not matter. */
	static const int pass_of[][2] = {
	    {PF_INTERNED_FUNCTION_NAMES, 0}, {PF_INTERNED_SOURCE_PATHS, 0},
	    {PF_INTERNED_BUILD_IDS, 0},      {PF_INTERNED_MAPPING_PATHS, 0},
	    {PF_INTERNED_MAPPINGS, 1},       {PF_INTERNED_FRAMES, 2},
	    {PF_INTERNED_CALLSTACKS, 3},
	};
	struct cuptrace_frame *fb = NULL;
	int rc = 0;
	for (int pass = 0; pass < 4 && !rc && !r->err; pass++) {
		struct pb m = pb_of(b, n);
		struct pbf f;
		while (!r->err && (rc = pb_next(&m, &f)) > 0) {
			int k = -1;
			for (size_t i = 0; i < sizeof(pass_of) / sizeof(pass_of[0]); i++)
				if (pass_of[i][0] == (int)f.id && pass_of[i][1] == pass)
					k = (int)i;
			if (k < 0 || f.wt != PF_WT_LEN)
				continue;
			switch (f.id) {
			case PF_INTERNED_FUNCTION_NAMES:
				rc = parse_string(r, q, CT_FN, f.b, f.n);
				break;
			case PF_INTERNED_SOURCE_PATHS:
				rc = parse_string(r, q, CT_SRC, f.b, f.n);
				break;
			case PF_INTERNED_BUILD_IDS:
				rc = parse_string(r, q, CT_BUILD, f.b, f.n);
				break;
			case PF_INTERNED_MAPPING_PATHS:
				rc = parse_string(r, q, CT_MPATH, f.b, f.n);
				break;
			case PF_INTERNED_MAPPINGS:
				rc = parse_mapping(r, q, f.b, f.n);
				break;
			case PF_INTERNED_FRAMES:
				rc = parse_frame(r, q, f.b, f.n);
				break;
			case PF_INTERNED_CALLSTACKS:
				if (!fb && !(fb = malloc(MAX_FRAMES * sizeof(*fb)))) {
					r->err = -ENOMEM;
					break;
				}
				rc = parse_callstack(r, q, f.b, f.n, fb);
				break;
			}
			if (rc < 0)
				break;
			rc = 0;
		}
	}
	free(fb);
	return rc < 0 ? -1 : 0;
}

uint32_t pf_callstack_iid(struct reader *r, struct rseq *q, uint64_t iid)
{
	uint32_t id = q ? lookup(q, CT_STACK, iid) : 0;
	if (!id)
		r->ck.unknown_iid++;
	return id;
}

int pf_parse_inline_callstack(struct reader *r, const uint8_t *b, size_t n, uint32_t *out)
{
	struct pb m = pb_of(b, n), e;
	struct pbf f, g;
	struct cuptrace_frame *fb = malloc(MAX_FRAMES * sizeof(*fb));
	size_t nf = 0;
	int rc;
	*out = 0;
	if (!fb) {
		r->err = -ENOMEM;
		return 0;
	}
	while ((rc = pb_next(&m, &f)) > 0 && !r->err) {
		if (f.id != PF_INLINE_CALLSTACK_FRAMES || f.wt != PF_WT_LEN)
			continue;
		struct cuptrace_frame o = {.kind = CUPTRACE_FRAME_PYTHON};
		e = pb_of(f.b, f.n);
		while ((rc = pb_next(&e, &g)) > 0) {
			if (g.id == PF_INLINE_FRAME_FUNCTION_NAME && g.wt == PF_WT_LEN)
				o.function = str(r, sid(r, g.b, g.n));
			else if (g.id == PF_INLINE_FRAME_SOURCE_FILE && g.wt == PF_WT_LEN)
				o.file = str(r, sid(r, g.b, g.n));
			else if (g.id == PF_INLINE_FRAME_LINE_NUMBER && g.wt == PF_WT_VARINT)
				o.line = (uint32_t)g.v;
		}
		if (rc < 0)
			break;
		if (nf < MAX_FRAMES)
			fb[nf++] = o;
	}
	if (rc >= 0 && !r->err && !(*out = cuptrace_stacktab_add(&r->stk, fb, nf)))
		r->err = -ENOMEM;
	free(fb);
	return rc < 0 ? -1 : 0;
}

int pf_parse_perf_sample(struct reader *r, struct rseq *q, const struct pkt *k)
{
	struct pb m = pb_of(k->payload.b, k->payload.n);
	struct pbf f;
	uint64_t pid = 0, tid = 0, iid = 0;
	int rc;
	while ((rc = pb_next(&m, &f)) > 0) {
		if (f.wt != PF_WT_VARINT)
			continue;
		if (f.id == PF_PERF_SAMPLE_PID)
			pid = f.v;
		else if (f.id == PF_PERF_SAMPLE_TID)
			tid = f.v;
		else if (f.id == PF_PERF_SAMPLE_CALLSTACK_IID)
			iid = f.v;
	}
	if (rc < 0)
		return -1;
	int64_t t;
	if (!q || !q->has_def_track || !iid || !k->has_ts || k->time_err ||
	    (!pf_trace_time(r, k->abs_ts, k->dom, &t) && t < 0))
		return 0;
	uint32_t stack = pf_callstack_iid(r, q, iid);
	if (!stack)
		return 0;
	struct rev *slot = PUSH(r, evs, nevs, evcap);
	if (slot)
		*slot = (struct rev){
		    .ts = (int64_t)k->abs_ts,
		    .track = q->def_track,
		    .dom = k->dom,
		    .type = REV_SAMPLE,
		    .slice = stack,
		    .val.i = (int64_t)((pid & 0xffffffffu) << 32 | (tid & 0xffffffffu))};
	return 0;
}
