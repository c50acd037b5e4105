/* The trace's metadata as every stats summary, the diff, the merge and analyze read it: look-ups,
 * the header's known lines, the GPUs used, command line, start time, drops. See stats_meta.h. */
#include "stats/stats_meta.h"
#include "common/saturate.h"
#include "common/util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The keys are those that collect and convert write; GPUs come as "gpu0", "gpu1", ... */
const struct stats_known_line stats_known_lines[] = {
    {"Driver", "driver", {"driver_version"}},
    {"CUDA", "cuda", {"cuda_version", "cuda_driver_api_version"}},
    {"CUPTI", "cupti", {"cupti_version"}},
    {"Host", "host", {"hostname"}},
};
const size_t stats_nknown_lines = sizeof(stats_known_lines) / sizeof(stats_known_lines[0]);

/* Keys composed into other lines (Process, Command line, Start). */
static const char *const composed_keys[] = {"process_name", "pid", "cmdline", "start_realtime_ns",
                                            "gpus_used"};

const struct cuptrace_meta *stats_meta_get(const struct cuptrace_stats *st, const char *key)
{
	for (size_t i = 0; i < st->nmeta; i++)
		if (st->meta[i].key && !strcmp(st->meta[i].key, key))
			return &st->meta[i];
	return NULL;
}

void stats_meta_str(const struct cuptrace_meta *m, char *buf, size_t cap)
{
	if (m->is_int)
		snprintf(buf, cap, "%" PRId64, m->i);
	else
		snprintf(buf, cap, "%s", m->s ? m->s : "");
}

char *stats_meta_strdup(const struct cuptrace_stats *st, const char *key)
{
	const struct cuptrace_meta *g = stats_meta_get(st, key);
	char v[512];
	if (!g)
		return NULL;
	stats_meta_str(g, v, sizeof(v));
	return *v ? strdup(v) : NULL;
}

int stats_meta_int(const struct cuptrace_meta *m, int64_t *v)
{
	char *end;

	if (m->is_int) {
		*v = m->i;
		return 1;
	}
	if (!m->s || !*m->s)
		return 0;
	errno = 0;
	*v = strtoll(m->s, &end, 10);
	return !*end && !errno;
}

static int is_gpu_key(const char *key)
{
	if (strncmp(key, "gpu", 3))
		return 0;
	for (key += 3; *key >= '0' && *key <= '9'; key++)
		;
	return !*key;
}

/* Orders "gpu", "gpu0", "gpu2", "gpu10" by number, then by name. */
static int gpu_cmp(const struct cuptrace_meta *a, const struct cuptrace_meta *b)
{
	long na = a->key[3] ? strtol(a->key + 3, NULL, 10) : -1;
	long nb = b->key[3] ? strtol(b->key + 3, NULL, 10) : -1;
	return na != nb ? (na < nb ? -1 : 1) : strcmp(a->key, b->key);
}

int stats_meta_is_known(const char *key)
{
	if (is_gpu_key(key))
		return 1;
	for (size_t i = 0; i < stats_nknown_lines; i++)
		for (size_t k = 0; k < 2; k++)
			if (stats_known_lines[i].keys[k] &&
			    !strcmp(key, stats_known_lines[i].keys[k]))
				return 1;
	for (size_t i = 0; i < sizeof(composed_keys) / sizeof(composed_keys[0]); i++)
		if (!strcmp(key, composed_keys[i]))
			return 1;
	return 0;
}

/* A selection pass per GPU, whatever order their records came in: metadata is tens of
 * entries. */
const struct cuptrace_meta *stats_next_gpu(const struct cuptrace_stats *st,
                                           const struct cuptrace_meta *prev)
{
	const struct cuptrace_meta *next = NULL;
	for (size_t i = 0; i < st->nmeta; i++) {
		const struct cuptrace_meta *g = &st->meta[i];
		if (g->key && is_gpu_key(g->key) && (!prev || gpu_cmp(g, prev) > 0) &&
		    (!next || gpu_cmp(g, next) < 0))
			next = g;
	}
	return next;
}

static void add_used(int *idx, int cap, int *n, long d)
{
	if (d < 0 || d > INT32_MAX)
		return;
	for (int k = 0; k < *n && k < cap; k++)
		if (idx[k] == d)
			return;
	/* kept ascending: a trace lists few GPUs */
	int k = *n < cap ? *n : cap;
	while (k > 0 && idx[k - 1] > d) {
		if (k < cap)
			idx[k] = idx[k - 1];
		k--;
	}
	if (k < cap)
		idx[k] = (int)d;
	(*n)++;
}

int stats_gpus_used(const struct cuptrace_stats *st, int from_tracks, int *idx, int cap)
{
	const struct cuptrace_meta *m = stats_meta_get(st, "gpus_used");
	int n = 0;

	if (m && m->is_int) {
		add_used(idx, cap, &n, (long)m->i); /* a reader that took "1" for a number */
		return n;
	}
	if (m && m->s) {
		for (const char *p = m->s; *p;) {
			char *end;
			long d = strtol(p, &end, 10);
			if (end == p)
				break;
			add_used(idx, cap, &n, d);
			p = *end == ',' ? end + 1 : end;
		}
		return n;
	}
	if (!from_tracks)
		return -1;
	int any = 0;
	for (size_t i = 0; i < st->ntrk; i++) {
		const struct cuptrace_stats_track *t = &st->trk[i];
		long d;
		char *end;
		if (t->kind != CUPTRACE_TRACK_GROUP || !t->name || strncmp(t->name, "GPU ", 4))
			continue;
		d = strtol(t->name + 4, &end, 10);
		if (end == t->name + 4 || (*end && *end != ':'))
			continue;
		add_used(idx, cap, &n, d);
		any = 1;
	}
	return any ? n : -1;
}

const struct cuptrace_meta *stats_gpu_meta(const struct cuptrace_stats *st, int n, const char *what)
{
	char key[48];
	snprintf(key, sizeof(key), "gpu%d%s", n, what);
	return stats_meta_get(st, key);
}

int stats_gpus_used_text(const struct cuptrace_stats *st, int from_tracks, char *buf, size_t cap)
{
	int idx[64];
	int n = stats_gpus_used(st, from_tracks, idx, 64);
	size_t len = 0;

	if (cap)
		*buf = 0;
	if (n < 0 || !cap)
		return 0;
	if (!n)
		snprintf(buf, cap, "none");
	for (int k = 0; k < n && k < 64 && len < cap; k++) {
		const struct cuptrace_meta *model = stats_gpu_meta(st, idx[k], ""),
		                           *uuid = stats_gpu_meta(st, idx[k], "_uuid"),
		                           *pci = stats_gpu_meta(st, idx[k], "_pci_bus_id");
		char mv[256] = "", uv[128] = "", pv[64] = "";
		if (model)
			stats_meta_str(model, mv, sizeof(mv));
		mv[strcspn(mv, ",")] =
		    0; /* "NVIDIA H200, compute capability 9.0, ...": the model */
		if (uuid)
			stats_meta_str(uuid, uv, sizeof(uv));
		if (pci)
			stats_meta_str(pci, pv, sizeof(pv));
		len += (size_t)snprintf(buf + len, cap - len, "%sGPU %d%s%s", k ? "; " : "", idx[k],
		                        *mv ? ": " : "", mv);
		if ((*uv || *pv) && len < cap)
			len += (size_t)snprintf(buf + len, cap - len, " (%s%s%s%s)", uv,
			                        *uv && *pv ? ", " : "", *pv ? "PCI " : "", pv);
	}
	return 1;
}

const char *stats_cmdline(const struct cuptrace_stats *st, char *buf, size_t cap)
{
	const struct cuptrace_meta *m = stats_meta_get(st, "cmdline");
	if (m) {
		stats_meta_str(m, buf, cap);
		return buf;
	}
	for (size_t i = 0; i < st->ntrk; i++)
		if (st->trk[i].kind == CUPTRACE_TRACK_PROCESS && st->trk[i].cmdline)
			return st->trk[i].cmdline;
	return NULL;
}

int stats_start_utc(const struct cuptrace_stats *st, int64_t *ns, char *buf, size_t cap)
{
	const struct cuptrace_meta *m = stats_meta_get(st, "start_realtime_ns");
	char v[64];
	struct tm tm;

	/* 0: not recorded (a foreign trace, or a shared one whose start was removed). */
	if (!m || !stats_meta_int(m, ns) || !*ns)
		return 0;
	/* A foreign JSON's time axis may be a clock other than the wall clock (microseconds since
	 * boot, or from 0): before 1973 is not a date. */
	if (*ns < 100000000000000000)
		return 0;
	time_t sec = (time_t)(*ns / 1000000000);
	int64_t frac = *ns % 1000000000;
	if (frac < 0) {
		frac += 1000000000;
		sec--;
	}
	if (!gmtime_r(&sec, &tm) || !strftime(v, sizeof(v), "%Y-%m-%d %H:%M:%S", &tm))
		return 0;
	snprintf(buf, cap, "%s.%09" PRId64 " UTC", v, frac);
	return 1;
}

int stats_dropped(const struct cuptrace_stats *st, int64_t *sum)
{
	int seen = 0;

	*sum = 0;
	for (size_t i = 0; i < st->nmeta; i++) {
		if (st->meta[i].key && st->meta[i].is_int && strstr(st->meta[i].key, "dropped")) {
			*sum = sat_add(*sum, st->meta[i].i);
			seen = 1;
		}
	}
	return seen;
}
