/* Compares two profiles (diff.h): rows per family and name, devices matched by their "GPU N"
 * part (or by position, across ranks), values divided per --per range, and the --fail-above
 * verdict. */
#include "compare/diff.h"
#include "common/util.h"

#include <errno.h>
#include <stddef.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A name takes part in --fail-above when its total in either run is at least this share of
 * that run's reference (GPU busy time, or its family's total for host-only families): a name
 * of BASE against BASE's, and one new in NEW against NEW's. */
#define SIGNIFICANT_SHARE 0.01

const char *cuptrace_family_key(enum cuptrace_family f)
{
	static const char *const keys[CUPTRACE_FAM_N] = {"kernels", "api_calls", "copies",
	                                                 "nvtx_ranges", "ops"};
	return f >= 0 && f < CUPTRACE_FAM_N ? keys[f] : "?";
}

static char *dup_or_null(const char *s, int *oom)
{
	char *d = s ? strdup(s) : NULL;
	if (s && !d)
		*oom = 1;
	return d;
}

/* Sort key of rows: |change in total| desc, then the larger total desc, then name. */
static int row_cmp(const void *pa, const void *pb)
{
	const struct cuptrace_diff_row *a = pa, *b = pb;
	double da = fabs(a->total_ns.new_ - a->total_ns.base);
	double db = fabs(b->total_ns.new_ - b->total_ns.base);
	if (da != db)
		return da > db ? -1 : 1;
	double ma = fmax(a->total_ns.base, a->total_ns.new_);
	double mb = fmax(b->total_ns.base, b->total_ns.new_);
	if (ma != mb)
		return ma > mb ? -1 : 1;
	return strcmp(a->name, b->name);
}

/* Both runs' names of one family, merged (each profile's names are sorted by strcmp). */
static int diff_family(const struct cuptrace_profile *a, const struct cuptrace_profile *b, int f,
                       double pa, double pb, struct cuptrace_diff *d)
{
	size_t i = 0, j = 0, n = 0, max = a->nnames[f] + b->nnames[f];
	struct cuptrace_diff_row *rows = max ? calloc(max, sizeof(*rows)) : NULL;

	if (max && !rows)
		return -ENOMEM;
	d->rows[f] = rows;
	while (i < a->nnames[f] || j < b->nnames[f]) {
		const struct cuptrace_profile_name *x = i < a->nnames[f] ? &a->names[f][i] : NULL;
		const struct cuptrace_profile_name *y = j < b->nnames[f] ? &b->names[f][j] : NULL;
		int c = !x ? 1 : !y ? -1 : strcmp(x->name, y->name);
		struct cuptrace_diff_row *r = &rows[n];
		r->status = c < 0   ? CUPTRACE_DIFF_REMOVED
		            : c > 0 ? CUPTRACE_DIFF_ADDED
		                    : CUPTRACE_DIFF_COMMON;
		if (c <= 0) {
			r->count.base = (double)x->count / pa;
			r->total_ns.base = (double)x->total_ns / pa;
			i++;
		}
		if (c >= 0) {
			r->count.new_ = (double)y->count / pb;
			r->total_ns.new_ = (double)y->total_ns / pb;
			j++;
		}
		if (!(r->name = strdup(c <= 0 ? x->name : y->name)))
			return -ENOMEM;
		d->nrows[f] = ++n;
	}
	if (n)
		qsort(rows, n, sizeof(*rows), row_cmp);
	return 0;
}

/* "GPU 0: NVIDIA H200" and "GPU 0: NVIDIA H100" are the same device of two runs: names match
 * on what comes before the first ':' (the whole name if there is none). */
static size_t device_key_len(const char *name)
{
	const char *c = strchr(name, ':');
	return c ? (size_t)(c - name) : strlen(name);
}

static int same_device(const char *x, const char *y)
{
	size_t n = device_key_len(x);
	return n == device_key_len(y) && !strncmp(x, y, n);
}

/* Devices pair by position when the "GPU N" index cannot be what relates them: the runs say
 * different ranks (each rank drives its own GPUs), or no GPU index of one run is in the other
 * (rank 0 on GPU 0 and rank 1 on GPU 1, whether or not the traces name their ranks). */
static int pair_by_position(const struct cuptrace_profile *a, const struct cuptrace_profile *b)
{
	if (!a->ndev || !b->ndev)
		return 0;
	if (a->has_rank && b->has_rank && a->rank != b->rank)
		return 1;
	for (size_t i = 0; i < a->ndev; i++)
		for (size_t j = 0; j < b->ndev; j++)
			if (same_device(a->dev[i].name, b->dev[j].name))
				return 0;
	return 1;
}

static int diff_devices(const struct cuptrace_profile *a, const struct cuptrace_profile *b,
                        double pa, double pb, struct cuptrace_diff *d)
{
	char *used = b->ndev ? calloc(b->ndev, 1) : NULL;
	int oom = 0, by_pos = pair_by_position(a, b);

	d->dev_by_position = by_pos;
	if (a->ndev + b->ndev && !(d->dev = calloc(a->ndev + b->ndev, sizeof(*d->dev))))
		oom = 1;
	if (b->ndev && !used)
		oom = 1;
	for (size_t i = 0; !oom && i < a->ndev; i++) {
		struct cuptrace_diff_device *v = &d->dev[d->ndev++];
		v->in_base = 1;
		v->busy_ns.base = (double)a->dev[i].busy_ns / pa;
		v->name = dup_or_null(a->dev[i].name, &oom);
		for (size_t j = by_pos ? i : 0; j < b->ndev; j++) {
			if (used[j] || (!by_pos && !same_device(a->dev[i].name, b->dev[j].name)))
				continue;
			used[j] = 1;
			v->in_new = 1;
			v->busy_ns.new_ = (double)b->dev[j].busy_ns / pb;
			if (strcmp(a->dev[i].name, b->dev[j].name))
				v->other_name = dup_or_null(b->dev[j].name, &oom);
			break;
		}
	}
	for (size_t j = 0; !oom && j < b->ndev; j++) {
		if (used[j])
			continue;
		struct cuptrace_diff_device *v = &d->dev[d->ndev++];
		v->in_new = 1;
		v->busy_ns.new_ = (double)b->dev[j].busy_ns / pb;
		v->name = dup_or_null(b->dev[j].name, &oom);
	}
	free(used);
	return oom ? -ENOMEM : 0;
}

/* Grew by more than pct: from 0 to anything above 0 counts as infinite growth. */
static int grew(struct cuptrace_diff_value v, double pct)
{
	if (v.new_ <= v.base)
		return 0;
	return v.base <= 0 || (v.new_ - v.base) / v.base * 100.0 > pct;
}

static int add_failure(struct cuptrace_diff *d, int family, const char *name,
                       struct cuptrace_diff_value v)
{
	int oom = 0;
	if (CUPTRACE_GROW(d->fail, d->failcap, d->nfail + 1))
		return -ENOMEM;
	struct cuptrace_diff_failure *f = d->fail;
	f[d->nfail] = (struct cuptrace_diff_failure){.family = family, .total_ns = v};
	f[d->nfail].name = dup_or_null(name, &oom);
	d->nfail++;
	return oom ? -ENOMEM : 0;
}

static int fail_above(struct cuptrace_diff *d)
{
	double pct = d->fail_above_pct;
	int err;

	if (grew(d->gpu_busy_ns, pct) && (err = add_failure(d, -1, NULL, d->gpu_busy_ns)))
		return err;
	for (int f = 0; f < CUPTRACE_FAM_N; f++) {
		/* Kernels and copies run on the GPU: measured against its busy time, unless the
		 * base run has none; ranges, ops and API calls against their family's total. */
		int gpu = f == CUPTRACE_FAM_KERNEL || f == CUPTRACE_FAM_COPY;
		double ref = gpu ? d->gpu_busy_ns.base : 0, ref_new = gpu ? d->gpu_busy_ns.new_ : 0;
		if (ref <= 0)
			for (size_t i = 0; i < d->nrows[f]; i++)
				ref += d->rows[f][i].total_ns.base;
		if (ref_new <= 0)
			for (size_t i = 0; i < d->nrows[f]; i++)
				ref_new += d->rows[f][i].total_ns.new_;
		for (size_t i = 0; i < d->nrows[f]; i++) {
			const struct cuptrace_diff_row *r = &d->rows[f][i];
			int big =
			    (r->total_ns.base > 0 && r->total_ns.base >= SIGNIFICANT_SHARE * ref) ||
			    (r->total_ns.new_ > 0 &&
			     r->total_ns.new_ >= SIGNIFICANT_SHARE * ref_new);
			if (!big || !grew(r->total_ns, pct))
				continue;
			if ((err = add_failure(d, f, r->name, r->total_ns)))
				return err;
		}
	}
	return 0;
}

static struct cuptrace_diff_value value(double a, double b, double pa, double pb)
{
	return (struct cuptrace_diff_value){a / pa, b / pb};
}

int cuptrace_diff_compute(const struct cuptrace_profile *a, const struct cuptrace_profile *b,
                          const struct cuptrace_diff_opts *o, struct cuptrace_diff *d)
{
	int oom = 0, err;

	memset(d, 0, sizeof(*d));
	d->fail_above_pct = -1;
	d->base_rank = d->new_rank = -1;
	if (!a || !b || !o)
		return -EINVAL;
	d->base_path = dup_or_null(o->base_path, &oom);
	d->new_path = dup_or_null(o->new_path, &oom);
	d->per_name = dup_or_null(o->per_name, &oom);
	if (oom)
		return -ENOMEM;
	d->group_by_base = o->group_by_base;
	d->group_by_op = o->sz >= offsetof(struct cuptrace_diff_opts, group_by_op) + sizeof(int) &&
	                 o->group_by_op;
	d->group_by_line = o->sz >= sizeof(*o) && o->group_by_line;
	d->top = o->top > 0 ? o->top : 20;
	d->fail_above_pct = o->fail_above_pct;
	d->base_per = o->per_name ? a->per_count : 1;
	d->new_per = o->per_name ? b->per_count : 1;
	if (!d->base_per || !d->new_per)
		return -ENOENT;
	double pa = (double)d->base_per, pb = (double)d->new_per;
	d->span_ns = value((double)a->span_ns, (double)b->span_ns, pa, pb);
	d->gpu_busy_ns = value((double)a->gpu_busy_ns, (double)b->gpu_busy_ns, pa, pb);
	d->kernels = value((double)a->kernels, (double)b->kernels, pa, pb);
	d->bytes_copied = value((double)a->bytes_copied, (double)b->bytes_copied, pa, pb);
	d->base_rank = a->has_rank ? a->rank : -1;
	d->new_rank = b->has_rank ? b->rank : -1;
	if ((a->damage && !(d->base_damage = strdup(a->damage))) ||
	    (b->damage && !(d->new_damage = strdup(b->damage))))
		return -ENOMEM;
	if ((err = diff_devices(a, b, pa, pb, d)))
		return err;
	for (int f = 0; f < CUPTRACE_FAM_N; f++)
		if ((err = diff_family(a, b, f, pa, pb, d)))
			return err;
	return d->fail_above_pct >= 0 ? fail_above(d) : 0;
}

void cuptrace_diff_free(struct cuptrace_diff *d)
{
	if (!d)
		return;
	free(d->base_path);
	free(d->new_path);
	free(d->base_damage);
	free(d->new_damage);
	free(d->per_name);
	for (size_t i = 0; d->dev && i < d->ndev; i++) {
		free(d->dev[i].name);
		free(d->dev[i].other_name);
	}
	free(d->dev);
	for (int f = 0; f < CUPTRACE_FAM_N; f++) {
		for (size_t i = 0; d->rows[f] && i < d->nrows[f]; i++)
			free(d->rows[f][i].name);
		free(d->rows[f]);
	}
	for (size_t i = 0; d->fail && i < d->nfail; i++)
		free(d->fail[i].name);
	free(d->fail);
	memset(d, 0, sizeof(*d));
	d->fail_above_pct = -1;
	d->base_rank = d->new_rank = -1;
}
