/* Rank alignment (align.h). */
#include "merge/align.h"
#include "common/saturate.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int64_t cuptrace_align_apply(const struct cuptrace_align_out *o, int64_t t)
{
	int64_t r = sat_add(t, o->offset_ns);
	if (o->drift != 0) {
		double d = o->drift * (double)sat_sub(t, o->anchor_ns);
		r = sat_add(r, (int64_t)llround(d));
	}
	return r;
}

static int i64_cmp(const void *pa, const void *pb)
{
	int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
	return a < b ? -1 : a > b;
}

/* The lower median of v[0..n) (n > 0); sorts v. */
static int64_t median(int64_t *v, size_t n)
{
	qsort(v, n, sizeof(*v), i64_cmp);
	return v[(n - 1) / 2];
}

/* One collective end of one rank, placed on the reference's axis. */
struct end {
	uint64_t key;
	size_t machine;
	size_t input;
	int64_t t;    /* after steps 1 and 2 */
	int64_t orig; /* as the rank recorded it */
	int symmetric;
};

static int end_cmp(const void *pa, const void *pb)
{
	const struct end *a = pa, *b = pb;
	if (a->key != b->key)
		return a->key < b->key ? -1 : 1;
	if (a->machine != b->machine)
		return a->machine < b->machine ? -1 : 1;
	return a->t < b->t ? -1 : a->t > b->t;
}

struct pair {
	double t, d; /* this machine's end (placed by steps 1, 2), the reference's minus it */
};

/* Fits d = a + b (t - tmid) to the pairs: the median when there are few or they span little
 * time, else least squares, refitted once without the points far off the first line (a
 * collective that one rank joined late, a mismatched occurrence). */
static void fit(struct pair *p, size_t n, double *a, double *b, double *tmid)
{
	int64_t *tmp = malloc(n * sizeof(*tmp));
	double tmin = p[0].t, tmax = p[0].t;
	for (size_t i = 0; i < n; i++) {
		tmin = fmin(tmin, p[i].t);
		tmax = fmax(tmax, p[i].t);
		if (tmp)
			tmp[i] = (int64_t)llround(p[i].d);
	}
	*tmid = (tmin + tmax) / 2;
	*a = tmp ? (double)median(tmp, n) : p[0].d;
	*b = 0;
	/* A drift shows only over time: 16 collectives over 2 s at least (a 10 ppm drift is then
	 * 20 us, well above the ends' jitter). */
	if (!tmp || n < 16 || tmax - tmin < 2e9) {
		free(tmp);
		return;
	}
	double fa = *a, fb = 0;
	for (int round = 0; round < 2; round++) {
		double cut = INFINITY;
		if (round) {
			for (size_t i = 0; i < n; i++)
				tmp[i] =
				    (int64_t)llround(fabs(p[i].d - (fa + fb * (p[i].t - *tmid))));
			cut = fmax(5 * 1.4826 * (double)median(tmp, n), 20e3);
		}
		double st = 0, sd = 0, stt = 0, std = 0;
		size_t k = 0;
		for (size_t i = 0; i < n; i++) {
			double x = p[i].t - *tmid;
			if (fabs(p[i].d - (fa + fb * x)) > cut)
				continue;
			st += x;
			sd += p[i].d;
			stt += x * x;
			std += x * p[i].d;
			k++;
		}
		double den = (double)k * stt - st * st;
		if (k < 16 || den <= 0)
			break;
		double nb = ((double)k * std - st * sd) / den;
		if (fabs(nb) > 1e-3) /* 1000 ppm: not a clock, a mismatch */
			break;
		fb = nb;
		fa = (sd - nb * st) / (double)k;
	}
	*a = fa;
	*b = fb;
	free(tmp);
}

/* Step 3's pairs for machine m against the reference machine ref, key by key (ends sorted by
 * key, then machine): a machine's end of a key is the median over its ranks (they share one
 * clock already). Only symmetric keys unless any. tmp holds nends values. Returns how many. */
static size_t machine_pairs(const struct end *ends, size_t nends, size_t ref, size_t m, int any,
                            int64_t *tmp, struct pair *pairs)
{
	size_t np = 0;
	for (size_t a = 0; a < nends;) {
		size_t b = a;
		while (b < nends && ends[b].key == ends[a].key)
			b++;
		/* [a, b): one key; find the reference machine's and m's runs in it */
		int64_t r = 0, mine = 0;
		int have_ref = 0, have_mine = 0;
		for (size_t x = a; x < b && (any || ends[a].symmetric);) {
			size_t y = x, k = 0;
			while (y < b && ends[y].machine == ends[x].machine)
				tmp[k++] = ends[y++].t;
			if (ends[x].machine == ref) {
				r = median(tmp, k);
				have_ref = 1;
			} else if (ends[x].machine == m) {
				mine = median(tmp, k);
				have_mine = 1;
			}
			x = y;
		}
		/* against this machine's own (placed) time: the map applies the drift to that */
		if (have_ref && have_mine)
			pairs[np++] = (struct pair){(double)mine, (double)(r - mine)};
		a = b;
	}
	return np;
}

/* The spread of the ends, per key seen on two ranks or more, of the keys of one kind. spread
 * holds nends values. */
static void spread_of(const struct end *ends, size_t nends, int symmetric,
                      const struct cuptrace_align_out *out, int64_t *spread,
                      struct cuptrace_align_spread *s)
{
	size_t ns = 0;
	for (size_t a = 0; a < nends;) {
		size_t b = a;
		int64_t hi = INT64_MIN, lo = INT64_MAX;
		for (; b < nends && ends[b].key == ends[a].key; b++) {
			int64_t t = cuptrace_align_apply(&out[ends[b].input], ends[b].orig);
			hi = t > hi ? t : hi;
			lo = t < lo ? t : lo;
		}
		if (b - a >= 2 && !ends[a].symmetric == !symmetric)
			spread[ns++] = sat_sub(hi, lo);
		a = b;
	}
	memset(s, 0, sizeof(*s));
	s->collectives = ns;
	if (ns) {
		qsort(spread, ns, sizeof(*spread), i64_cmp);
		s->median = spread[(ns - 1) / 2];
		s->p99 = spread[(size_t)((double)(ns - 1) * 0.99)];
		s->max = spread[ns - 1];
	}
}

int cuptrace_align(const struct cuptrace_align_in *in, size_t n, enum cuptrace_align_mode mode,
                   struct cuptrace_align_out *out, struct cuptrace_align_summary *sum)
{
	size_t *mach = calloc(n ? n : 1, sizeof(*mach));
	struct end *ends = NULL;
	struct pair *pairs = NULL;
	int64_t *spread = NULL;
	size_t nends = 0, nmach = 0;
	int err = -ENOMEM;

	memset(sum, 0, sizeof(*sum));
	memset(out, 0, n * sizeof(*out));
	if (!mach)
		goto done;
	/* Machines: inputs with equal machine strings; one without a string is a machine alone. */
	for (size_t i = 0; i < n; i++) {
		mach[i] = i;
		for (size_t j = 0; j < i && in[i].machine && *in[i].machine; j++)
			if (in[j].machine && !strcmp(in[i].machine, in[j].machine)) {
				mach[i] = mach[j];
				break;
			}
		nmach += mach[i] == i;
	}
	sum->machines = nmach;
	/* --align none keeps the files' own clock where every input's timestamps are on one
	 * (torch.profiler's absolute times), else starts each at 0. */
	int all_file = n > 0;
	for (size_t i = 0; i < n; i++)
		all_file &= in[i].file_clock;
	/* Steps 1 and 2: each rank on the reference's relative axis. */
	for (size_t i = 0; i < n; i++) {
		struct cuptrace_align_out *o = &out[i];
		size_t j = mach[i]; /* the first rank of i's machine */
		int file = in[i].file_clock || in[j].file_clock || in[0].file_clock;
		o->machine = j;
		if (mode == CUPTRACE_ALIGN_NONE) {
			o->offset_ns =
			    all_file ? sat_sub(in[i].start_realtime_ns, in[0].start_realtime_ns)
			             : -in[i].first_ts;
			o->clock = CUPTRACE_CLOCK_NONE;
			continue;
		}
		if (file) /* no BOOTTIME to go by: the file's clock is all there is */
			o->offset_ns = sat_sub(in[i].start_realtime_ns, in[0].start_realtime_ns);
		else if (mach[i] == mach[0])
			o->offset_ns = sat_sub(in[i].start_boottime_ns, in[0].start_boottime_ns);
		else
			o->offset_ns =
			    sat_add(sat_sub(in[i].start_boottime_ns, in[j].start_boottime_ns),
			            sat_sub(in[j].start_realtime_ns, in[0].start_realtime_ns));
		o->clock = !i                            ? CUPTRACE_CLOCK_REFERENCE
		           : mach[i] == mach[0] && !file ? CUPTRACE_CLOCK_BOOTTIME
		                                         : CUPTRACE_CLOCK_REALTIME;
	}
	/* Every collective end, placed so far. */
	size_t total = 0;
	for (size_t i = 0; i < n; i++)
		total += in[i].ncoll;
	if (total && !(ends = malloc(total * sizeof(*ends))))
		goto done;
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < in[i].ncoll; k++)
			ends[nends++] = (struct end){in[i].coll[k].key,
			                             mach[i],
			                             i,
			                             sat_add(in[i].coll[k].end, out[i].offset_ns),
			                             in[i].coll[k].end,
			                             !!in[i].coll[k].symmetric};
	if (nends) /* ends is NULL without collectives, and qsort's pointer must not be */
		qsort(ends, nends, sizeof(*ends), end_cmp);
	/* Step 3, per machine: its ends against the reference machine's, key by key. A machine's
	 * end of a key is the median over its ranks (they share one clock already). */
	if (mode == CUPTRACE_ALIGN_NCCL && nmach > 1) {
		if (nends && !(pairs = malloc(nends * sizeof(*pairs))))
			goto done;
		int64_t *tmp = malloc((nends ? nends : 1) * sizeof(*tmp));
		if (!tmp)
			goto done;
		for (size_t m = 1; m < n; m++) {
			if (mach[m] != m || mach[m] == mach[0])
				continue;
			/* The symmetric collectives first; the others only where there is none
			 * in common (align.h). */
			size_t np = 0;
			for (int any = 0; any < 2 && !np; any++)
				np = machine_pairs(ends, nends, mach[0], m, any, tmp, pairs);
			if (!np)
				continue; /* nothing in common: REALTIME only */
			double fa, fb, tmid;
			fit(pairs, np, &fa, &fb, &tmid);
			for (size_t i = 0; i < n; i++) {
				if (mach[i] != m)
					continue;
				struct cuptrace_align_out *o = &out[i];
				/* t' = t + delta + a + b (t + delta - tmid) */
				o->anchor_ns = sat_sub((int64_t)llround(tmid), o->offset_ns);
				o->offset_ns = sat_add(o->offset_ns, (int64_t)llround(fa));
				o->drift = fb;
				o->clock = CUPTRACE_CLOCK_NCCL;
				o->matched = np;
				o->realtime_error_ns = (int64_t)llround(fa);
			}
		}
		free(tmp);
	}
	/* The output axis: the earliest event of all at 0. */
	int64_t lo = INT64_MAX;
	for (size_t i = 0; i < n; i++) {
		int64_t f = cuptrace_align_apply(&out[i], in[i].first_ts);
		if (f < lo)
			lo = f;
	}
	for (size_t i = 0; i < n && lo != INT64_MAX; i++) {
		out[i].offset_ns = sat_sub(out[i].offset_ns, lo);
	}
	/* What is left: per key seen on two ranks or more, the spread of its ends, of each kind. */
	if (nends && !(spread = malloc(nends * sizeof(*spread))))
		goto done;
	spread_of(ends, nends, 1, out, spread, &sum->symmetric);
	spread_of(ends, nends, 0, out, spread, &sum->other);
	err = 0;
done:
	free(mach);
	free(ends);
	free(pairs);
	free(spread);
	return err;
}
