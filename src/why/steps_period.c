/* Iterations found in a sequence of GPU work (steps_period.h says what and how). */
#include "why/steps_period.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

enum {
	MAX_CAND = 8,        /* candidate periods tried */
	GAP_SAMPLE = 1024,   /* distances looked at per token */
	MODE_SAMPLE = 256,   /* iterations whose token counts give each token's mode */
	MODE_ITEMS = 200000, /* and at most about this many items in them */
	PHASE_SAMPLE = 64,   /* occurrences whose host gaps place the cut */
};

/* How far a distance may stray from a period and still count as it: a few kernels more or less
 * per iteration. */
static size_t tol(size_t g)
{
	return g / 10 + 1;
}

/* Scratch shared by the tries; per-token arrays are ntok long and left zeroed between uses. */
struct pf {
	const struct cuptrace_period_in *in;
	size_t *off, *pos; /* occurrences of token t: pos[off[t] .. off[t + 1]), in order */
	int64_t *wtok;     /* GPU weight of each token, all its items */
	uint32_t *cnt;     /* per token, in the current iteration */
	int64_t *wseg;     /* likewise, its weight */
	uint32_t *touched; /* tokens with cnt > 0 */
	size_t ntouched;
	uint32_t *mode;  /* per token: how often most iterations hold it (0: not a part) */
	uint64_t *pairs; /* (token, count) of the sampled iterations */
	size_t pairscap;
	int64_t wtotal;
};

struct
try {
	double score;       /* GPU weight explained in the core iterations / all weight */
	double frac;        /* the same over the core iterations' own weight */
	double alike;       /* the share of the core's items that repeat (by count, not weight) */
	size_t first, last; /* the core: the anchor's occurrences first..last start iterations */
	size_t end;         /* one past the last core iteration's last item */
	size_t period;
	int ok;
};

static int size_cmp(const void *pa, const void *pb)
{
	size_t a = *(const size_t *)pa, b = *(const size_t *)pb;
	return a < b ? -1 : a > b;
}

static int u64_cmp(const void *pa, const void *pb)
{
	uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
	return a < b ? -1 : a > b;
}

static int i64_cmp(const void *pa, const void *pb)
{
	int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
	return a < b ? -1 : a > b;
}

/* Counts the tokens of items [a, b) into cnt and wseg. */
static void count(struct pf *f, size_t a, size_t b)
{
	for (size_t i = a; i < b; i++) {
		uint32_t t = f->in->tok[i];
		if (!f->cnt[t]++)
			f->touched[f->ntouched++] = t;
		f->wseg[t] += f->in->w[i];
	}
}

static void reset(struct pf *f)
{
	for (size_t k = 0; k < f->ntouched; k++) {
		f->cnt[f->touched[k]] = 0;
		f->wseg[f->touched[k]] = 0;
	}
	f->ntouched = 0;
}

/* The weight of [a, b) whose tokens it holds as often as their mode, and its whole weight;
 * *ei: the number of those items. */
static void seg_stats(struct pf *f, size_t a, size_t b, int64_t *ew, int64_t *tw, size_t *ei)
{
	*ew = *tw = 0;
	*ei = 0;
	count(f, a, b);
	for (size_t k = 0; k < f->ntouched; k++) {
		uint32_t t = f->touched[k];
		*tw += f->wseg[t];
		if (f->mode[t] && f->cnt[t] == f->mode[t]) {
			*ew += f->wseg[t];
			*ei += f->cnt[t];
		}
	}
	reset(f);
}

/* Each token's mode over a sample of the iterations the anchor's occurrences occ[0..m) start
 * (the last, open-ended one left out). Sets f->mode (cleared first for the tokens it set). */
static int modes(struct pf *f, const size_t *occ, size_t m)
{
	size_t whole = m - 1, avg = (occ[m - 1] - occ[0]) / whole + 1;
	size_t s = whole < MODE_SAMPLE ? whole : MODE_SAMPLE;
	if (s > MODE_ITEMS / avg)
		s = MODE_ITEMS / avg > 8 ? MODE_ITEMS / avg : 8;
	if (s > whole)
		s = whole;
	size_t np = 0;
	for (size_t j = 0; j < s; j++) {
		size_t k = j * whole / s;
		count(f, occ[k], occ[k + 1]);
		if (np + f->ntouched > f->pairscap) {
			size_t cap = (np + f->ntouched) * 2;
			uint64_t *p = realloc(f->pairs, cap * sizeof(*p));
			if (!p) {
				reset(f);
				return -ENOMEM;
			}
			f->pairs = p;
			f->pairscap = cap;
		}
		for (size_t k2 = 0; k2 < f->ntouched; k2++) {
			uint32_t t = f->touched[k2];
			f->pairs[np++] = (uint64_t)t << 32 | f->cnt[t];
		}
		reset(f);
	}
	qsort(f->pairs, np, sizeof(*f->pairs), u64_cmp);
	for (size_t i = 0; i < np;) {
		uint32_t t = (uint32_t)(f->pairs[i] >> 32);
		size_t seen = 0, bestf = 0;
		uint32_t bestc = 0;
		while (i < np && (uint32_t)(f->pairs[i] >> 32) == t) {
			uint32_t c = (uint32_t)f->pairs[i];
			size_t run = 0;
			while (i < np && f->pairs[i] == ((uint64_t)t << 32 | c)) {
				run++;
				i++;
			}
			seen += run;
			if (run > bestf) {
				bestf = run;
				bestc = c;
			}
		}
		/* Absent from more sampled iterations than it is present in any one count: not a
		 * part of the iteration (start-up, logging every N iterations). */
		f->mode[t] = s - seen >= bestf ? 0 : bestc;
	}
	return 0;
}

static void clear_modes(struct pf *f)
{
	memset(f->mode, 0, f->in->ntok * sizeof(*f->mode));
}

/* Cuts the sequence at token t's occurrences and scores the cut (struct try). */
static int try_anchor(struct pf *f, uint32_t t, struct try *tr)
{
	const size_t *occ = f->pos + f->off[t];
	size_t m = f->off[t + 1] - f->off[t], n = f->in->n;
	int err = 0;
	memset(tr, 0, sizeof(*tr));
	if (m < 3)
		return 0;
	clear_modes(f);
	if ((err = modes(f, occ, m)))
		return err;
	if (f->in->compute) {
		uint32_t u = 0;
		while (u < f->in->ntok && !(f->mode[u] && f->in->compute[u]))
			u++;
		if (u == f->in->ntok)
			return 0; /* copies alone */
	}
	/* The last iteration runs to the last item that is part of an iteration (its token
	 * not yet past its mode): what follows is the program's tail. */
	size_t end = occ[m - 1];
	for (size_t i = occ[m - 1]; i < n; i++) {
		uint32_t u = f->in->tok[i];
		if (!f->cnt[u]++)
			f->touched[f->ntouched++] = u;
		if (f->mode[u] && f->cnt[u] <= f->mode[u])
			end = i + 1;
	}
	reset(f);
	double *e = malloc(m * sizeof(*e));
	int64_t *ew = malloc(m * sizeof(*ew)), *tw = malloc(m * sizeof(*tw));
	size_t *ei = malloc(m * sizeof(*ei));
	if (!e || !ew || !tw || !ei) {
		err = -ENOMEM;
		goto out;
	}
	size_t first = SIZE_MAX, last = 0;
	for (size_t k = 0; k < m; k++) {
		seg_stats(f, occ[k], k + 1 < m ? occ[k + 1] : end, &ew[k], &tw[k], &ei[k]);
		e[k] = tw[k] > 0 ? (double)ew[k] / (double)tw[k] : 0;
		if (e[k] >= 0.5) {
			if (first == SIZE_MAX)
				first = k;
			last = k;
		}
	}
	if (first == SIZE_MAX)
		goto out;
	int64_t sew = 0, stw = 0;
	size_t sei = 0;
	for (size_t k = first; k <= last; k++) {
		sew += ew[k];
		stw += tw[k];
		sei += ei[k];
	}
	tr->first = first;
	tr->last = last;
	tr->end = last + 1 < m ? occ[last + 1] : end;
	tr->score = f->wtotal > 0 ? (double)sew / (double)f->wtotal : 0;
	tr->frac = stw > 0 ? (double)sew / (double)stw : 0;
	tr->alike = tr->end > occ[first] ? (double)sei / (double)(tr->end - occ[first]) : 0;
	/* The median iteration length, in items. */
	size_t nc = last - first + 1, s = nc < MODE_SAMPLE ? nc : MODE_SAMPLE;
	size_t *len = (size_t *)e; /* e is no longer needed, and is as long */
	for (size_t j = 0; j < s; j++) {
		size_t k = first + j * nc / s;
		len[j] = (k + 1 < m ? occ[k + 1] : end) - occ[k];
	}
	qsort(len, s, sizeof(*len), size_cmp);
	tr->period = len[s / 2];
	tr->ok = 1;
out:
	free(e);
	free(ew);
	free(tw);
	free(ei);
	return err;
}

struct cand {
	size_t p;
	uint32_t tok;
	double r, vote;
};

static int cand_cmp(const void *pa, const void *pb)
{
	const struct cand *a = pa, *b = pb;
	if (a->p != b->p)
		return a->p < b->p ? -1 : 1;
	return a->tok < b->tok ? -1 : a->tok > b->tok;
}

static int vote_cmp(const void *pa, const void *pb)
{
	const struct cand *a = pa, *b = pb;
	if (a->vote != b->vote)
		return a->vote > b->vote ? -1 : 1;
	return a->p < b->p ? -1 : a->p > b->p;
}

/* Candidate periods: per token with 3 or more occurrences, the median distance between them
 * and the share of distances near it; tokens regular enough vote for their distance with their
 * weight. Neighbouring distances are one candidate, tried through its most regular token. */
static int candidates(struct pf *f, struct cand **outp, size_t *nout)
{
	const struct cuptrace_period_in *in = f->in;
	struct cand *c = NULL;
	size_t nc = 0, cap = 0;
	size_t *g = malloc(GAP_SAMPLE * sizeof(*g));
	if (!g)
		return -ENOMEM;
	for (uint32_t t = 0; t < in->ntok; t++) {
		size_t a = f->off[t], m = f->off[t + 1] - a;
		if (m < 3)
			continue;
		size_t ng = m - 1, s = ng < GAP_SAMPLE ? ng : GAP_SAMPLE;
		for (size_t j = 0; j < s; j++) {
			size_t k = a + j * ng / s;
			g[j] = f->pos[k + 1] - f->pos[k];
		}
		qsort(g, s, sizeof(*g), size_cmp);
		size_t med = g[s / 2], near = 0;
		for (size_t j = 0; j < s; j++)
			near += g[j] + tol(med) >= med && g[j] <= med + tol(med);
		double r = (double)near / (double)s;
		if (r < 0.5)
			continue;
		if (nc == cap) {
			size_t ncap = cap ? cap * 2 : 64;
			struct cand *x = realloc(c, ncap * sizeof(*x));
			if (!x) {
				free(c);
				free(g);
				return -ENOMEM;
			}
			c = x;
			cap = ncap;
		}
		c[nc++] = (struct cand){med, t, r, r * (double)f->wtok[t]};
	}
	free(g);
	if (nc)
		qsort(c, nc, sizeof(*c), cand_cmp);
	/* Clusters of near periods, in place: each keeps its most regular token (then the
	 * heaviest) and the sum of the votes. */
	size_t k = 0;
	for (size_t i = 0; i < nc;) {
		struct cand best = c[i];
		double vote = 0;
		size_t p0 = c[i].p, j = i;
		for (; j < nc && c[j].p <= p0 + tol(p0); j++) {
			vote += c[j].vote;
			if (c[j].r > best.r || (c[j].r == best.r && c[j].vote > best.vote))
				best = c[j];
		}
		best.vote = vote;
		c[k++] = best;
		i = j;
	}
	if (k)
		qsort(c, k, sizeof(*c), vote_cmp);
	*outp = c;
	*nout = k < MAX_CAND ? k : MAX_CAND;
	return 0;
}

/* The median host gap before token u's occurrences inside items [a, b) (sampled); -1 if it has
 * none there. */
static int64_t median_gap(const struct pf *f, uint32_t u, size_t a, size_t b)
{
	const size_t *p = f->pos + f->off[u], *q = f->pos + f->off[u + 1];
	const size_t *lo = p, *hi = q;
	while (lo < hi) { /* the first at or after a */
		const size_t *mid = lo + (hi - lo) / 2;
		if (*mid < a)
			lo = mid + 1;
		else
			hi = mid;
	}
	const size_t *s0 = lo;
	hi = q;
	while (lo < hi) { /* the first at or after b */
		const size_t *mid = lo + (hi - lo) / 2;
		if (*mid < b)
			lo = mid + 1;
		else
			hi = mid;
	}
	size_t n = (size_t)(lo - s0), s = n < PHASE_SAMPLE ? n : PHASE_SAMPLE;
	if (!s)
		return -1;
	int64_t v[PHASE_SAMPLE];
	for (size_t j = 0; j < s; j++)
		v[j] = f->in->gap[s0[j * n / s]];
	qsort(v, s, sizeof(*v), i64_cmp);
	return v[s / 2];
}

/* Among the tokens that occur once in most iterations of tr (anchor t), the one after the
 * longest host pause (the top of the loop: data loading, the Python between steps), or t. */
static uint32_t phase_token(struct pf *f, uint32_t t, const struct try *tr)
{
	const size_t *occ = f->pos + f->off[t];
	size_t a = occ[tr->first], b = tr->end, nit = tr->last - tr->first + 1;
	uint32_t best = t;
	int64_t bestg = median_gap(f, t, a, b);
	for (uint32_t u = 0; u < f->in->ntok; u++) {
		size_t m = f->off[u + 1] - f->off[u];
		if (f->mode[u] != 1 || u == t || m * 5 < nit * 4)
			continue;
		int64_t g = median_gap(f, u, a, b);
		if (g > bestg) {
			bestg = g;
			best = u;
		}
	}
	return best;
}

int cuptrace_period_find(const struct cuptrace_period_in *in, struct cuptrace_period *out)
{
	struct pf f = {.in = in};
	struct cand *c = NULL;
	size_t nc = 0;
	int err = -ENOMEM;

	memset(out, 0, sizeof(*out));
	if (in->n < 6 || !in->ntok)
		return 0;
	size_t nt = in->ntok;
	f.off = calloc(nt + 1, sizeof(*f.off));
	f.pos = malloc(in->n * sizeof(*f.pos));
	f.wtok = calloc(nt, sizeof(*f.wtok));
	f.cnt = calloc(nt, sizeof(*f.cnt));
	f.wseg = calloc(nt, sizeof(*f.wseg));
	f.touched = malloc(nt * sizeof(*f.touched));
	f.mode = calloc(nt, sizeof(*f.mode));
	if (!f.off || !f.pos || !f.wtok || !f.cnt || !f.wseg || !f.touched || !f.mode)
		goto out;
	/* Occurrences by token (a counting sort keeps each token's in sequence order). */
	for (size_t i = 0; i < in->n; i++) {
		f.off[in->tok[i] + 1]++;
		f.wtok[in->tok[i]] += in->w[i];
		f.wtotal += in->w[i];
	}
	for (size_t t = 0; t < nt; t++)
		f.off[t + 1] += f.off[t];
	for (size_t i = 0; i < in->n; i++)
		f.pos[f.off[in->tok[i]] + f.cnt[in->tok[i]]++] = i;
	memset(f.cnt, 0, nt * sizeof(*f.cnt));
	if ((err = candidates(&f, &c, &nc)))
		goto out;
	struct try best = {0}, tr;
	uint32_t best_tok = 0;
	double top = 0;
	struct try tries[MAX_CAND];
	int alike = 0;
	for (size_t i = 0; i < nc; i++) {
		if ((err = try_anchor(&f, c[i].tok, &tries[i])))
			goto out;
		alike |= tries[i].ok && tries[i].alike >= 0.5;
	}
	/* Iterations most of whose items do not repeat are no period where another cut's do: cut
	 * at a token that comes twice per step, a step's halves (unlike work) alternate, and
	 * the halves can explain more GPU time than the whole steps when one item of the first
	 * step, missing from the whole cut's first, is long (a collective's warm-up). */
	for (size_t i = 0; i < nc; i++) {
		if (alike && tries[i].alike < 0.5)
			tries[i].ok = 0;
		if (tries[i].ok && tries[i].score > top)
			top = tries[i].score;
	}
	/* The shortest period scoring within 2% of the best. */
	for (size_t i = 0; i < nc; i++)
		if (tries[i].ok && tries[i].score >= top - 0.02 &&
		    (!best.ok || tries[i].period < best.period ||
		     (tries[i].period == best.period && tries[i].score > best.score))) {
			best = tries[i];
			best_tok = c[i].tok;
		}
	err = 0;
	if (!best.ok)
		goto out;
	/* Cut where the host paused longest (modes are best_tok's again). */
	if ((err = try_anchor(&f, best_tok, &tr)))
		goto out;
	if (in->gap) {
		uint32_t u = phase_token(&f, best_tok, &best);
		if (u != best_tok) {
			if ((err = try_anchor(&f, u, &tr)))
				goto out;
			if (tr.ok && (!alike || tr.alike >= 0.5) && tr.score >= best.score - 0.02) {
				best = tr;
				best_tok = u;
			}
		}
	}
	size_t nit = best.last - best.first + 1;
	double few = nit >= 4 ? 1.0 : (double)(nit - 1) / 3.0;
	double held = best.score >= 0.25 ? 1.0 : 4 * best.score;
	out->coverage = best.score;
	out->confidence = best.frac * few * held;
	out->period = best.period;
	if (nit < 3 || out->confidence < CUPTRACE_PERIOD_MIN_CONFIDENCE)
		goto out;
	err = -ENOMEM;
	if (!(out->starts = malloc(nit * sizeof(*out->starts))))
		goto out;
	memcpy(out->starts, f.pos + f.off[best_tok] + best.first, nit * sizeof(*out->starts));
	out->nstarts = nit;
	out->end = best.end;
	err = 0;
out:
	free(c);
	free(f.off);
	free(f.pos);
	free(f.wtok);
	free(f.cnt);
	free(f.wseg);
	free(f.touched);
	free(f.mode);
	free(f.pairs);
	return err;
}

void cuptrace_period_free(struct cuptrace_period *p)
{
	if (!p)
		return;
	free(p->starts);
	memset(p, 0, sizeof(*p));
}
