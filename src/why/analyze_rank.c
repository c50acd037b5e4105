/* Who each process of one file is, and its part of the job's rank figures (compute_state.h): the
 * ranks with the rank and host the trace says, the steps' ranks and numbers, what each step spent
 * in collectives, and each rank's GPU, collective and step figures. What needs every rank at once
 * (the straggler, the job's steps) is analyze_job.c's, over the summaries made here. Calls only
 * analyze_query.c. */
#include "why/compute_state.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int anx_is_collective(const char *n)
{
	static const char *const words[] = {"allreduce",  "all_reduce",        "allgather",
	                                    "all_gather", "reduce_scatter",    "alltoall",
	                                    "all_to_all", "record_param_comms"};
	if (!strncmp(n, "c10d::", 6) || !strncmp(n, "nccl:", 5) || !strncmp(n, "gloo:", 5))
		return 1;
	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (strstr(n, words[i]))
			return 1;
	return 0;
}

/* The rank of (file, pid), made on first sight; SIZE_MAX when out of memory. */
static size_t rank_get(struct anx *x, size_t file, int32_t pid)
{
	struct cuptrace_analysis *o = x->out;
	int created;
	uint64_t *v = cuptrace_u64map_put(&x->rank_of, an_key(file, (uint64_t)pid, 6), &created);
	if (!v)
		return SIZE_MAX;
	if (created) {
		struct cuptrace_an_rank *r =
		    cuptrace_grow(o->ranks, &x->rankcap, o->nranks + 1, sizeof(*r));
		if (!r) {
			cuptrace_u64map_del(&x->rank_of, an_key(file, (uint64_t)pid, 6));
			return SIZE_MAX;
		}
		o->ranks = r;
		o->ranks[o->nranks] =
		    (struct cuptrace_an_rank){.pid = pid, .file = file, .rank = -1};
		*v = ++o->nranks;
	}
	return (size_t)*v - 1;
}

/* What the trace says of each rank: its process's own (a merged trace), else the file's where
 * the file holds one process that matters (GPU work or steps): a merged trace's metadata is its
 * first input's, which would name every process after one rank. */
static void identities(struct anx *x, const uint8_t *matters)
{
	const struct an *an = x->an;
	struct cuptrace_analysis *o = x->out;
	size_t n = 0;
	for (size_t i = 0; i < o->nranks; i++)
		n += matters[i];
	for (size_t i = 0; i < o->nranks; i++) {
		struct cuptrace_an_rank *r = &o->ranks[i];
		uint64_t *v =
		    cuptrace_u64map_get(&an->who_of, an_key(r->file, (uint64_t)r->pid, 5));
		const struct an_who *w = v ? &an->who[*v - 1] : NULL;
		if (w && w->rank >= 0) {
			r->rank = w->rank;
			r->host = w->host ? anx_str(x, w->host) : NULL;
		} else if (an->file_rank >= 0 && (n == 1 ? matters[i] : o->nranks == 1)) {
			r->rank = an->file_rank;
			r->host = an->file_host ? anx_str(x, an->file_host) : NULL;
		}
	}
}

size_t anx_step_at(const struct anx *x, size_t rank, int64_t t)
{
	const struct cuptrace_analysis *o = x->out;
	size_t first = x->rank_step_first[rank], n = x->rank_steps[rank];
	size_t lo = first, hi = first + n;
	if (!n)
		return SIZE_MAX;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (o->steps[mid].ts <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == first)
		return SIZE_MAX;
	const struct cuptrace_an_step *s = &o->steps[lo - 1];
	return t < s->ts + s->dur ? lo - 1 : SIZE_MAX;
}

/* Each step's collectives and other work, by what was launched inside it; each rank's host time
 * in collective calls (per thread the union of its collective ranges: host is sorted by thread,
 * then start, the outer first). */
static int step_collectives(struct anx *x)
{
	const struct an *an = x->an;
	struct cuptrace_analysis *o = x->out;
	int64_t *host_arrive = calloc(o->nsteps + 1, sizeof(*host_arrive));
	if (!host_arrive)
		return -ENOMEM;
	for (size_t i = 0; i < o->nsteps; i++)
		o->steps[i].arrive_ns = host_arrive[i] = -1;
	for (size_t i = 0; i < an->nwork; i++) {
		const struct an_work *w = &an->work[i];
		size_t r = x->rank_of_gpu[an->streams[w->stream].gpu];
		int64_t t = w->launch ? an->host[w->launch - 1].ts : w->ts;
		size_t k = anx_step_at(x, r, t);
		if (k == SIZE_MAX)
			continue;
		/* Its GPU work and collectives' GPU time are the step finder's (steps_find.c). */
		struct cuptrace_an_step *s = &o->steps[k];
		if (w->flags & WF_NCCL) {
			int64_t a = w->ts > s->ts ? w->ts - s->ts : 0;
			if (s->arrive_ns < 0 || a < s->arrive_ns)
				s->arrive_ns = a;
		}
	}
	uint32_t thr = UINT32_MAX;
	int64_t end = INT64_MIN;
	for (size_t i = 0; i < an->nhost; i++) {
		const struct an_host *h = &an->host[i];
		if (h->cls != H_RANGE || !anx_is_collective(anx_str(x, h->name)))
			continue;
		if (h->thread != thr) {
			thr = h->thread;
			end = INT64_MIN;
		}
		int64_t s0 = h->ts > end ? h->ts : end, e = h->ts + h->dur;
		if (e <= s0)
			continue;
		size_t r = x->rank_of_thread[h->thread];
		o->ranks[r].host_comm_ns += e - s0;
		end = e;
		size_t k = anx_step_at(x, r, h->ts);
		if (k == SIZE_MAX)
			continue;
		o->steps[k].host_comm_ns += e - s0;
		if (host_arrive[k] < 0)
			host_arrive[k] = h->ts - o->steps[k].ts;
	}
	/* Without NCCL kernels (gloo, ranks sharing a GPU) a step arrives at its first call. */
	for (size_t i = 0; i < o->nsteps; i++)
		if (!o->steps[i].comm_ns)
			o->steps[i].arrive_ns = host_arrive[i];
	free(host_arrive);
	return 0;
}

int anx_ranks(struct anx *x)
{
	const struct an *an = x->an;
	struct cuptrace_analysis *o = x->out;
	uint8_t *matters = NULL;
	int err = -ENOMEM;

	cuptrace_u64map_init(&x->rank_of);
	if (!(x->rank_of_thread = calloc(an->nthreads + 1, sizeof(size_t))) ||
	    !(x->rank_of_gpu = calloc(an->ngpus + 1, sizeof(size_t))))
		return -ENOMEM;
	/* GPUs first: a rank file's process with GPU work is its first rank. */
	for (size_t i = 0; i < an->ngpus; i++)
		if ((x->rank_of_gpu[i] = o->gpus[i].rank =
		         rank_get(x, an->gpus[i].file, an->gpus[i].pid)) == SIZE_MAX)
			return -ENOMEM;
	for (size_t i = 0; i < o->nsteps; i++)
		if ((o->steps[i].rank = rank_get(x, o->steps[i].file, o->steps[i].pid)) == SIZE_MAX)
			return -ENOMEM;
	for (size_t i = 0; i < an->nthreads; i++)
		if ((x->rank_of_thread[i] = rank_get(x, an->threads[i].file, an->threads[i].pid)) ==
		    SIZE_MAX)
			return -ENOMEM;
	if (!(matters = calloc(o->nranks + 1, 1)) ||
	    !(x->rank_step_first = calloc(o->nranks + 1, sizeof(size_t))) ||
	    !(x->rank_steps = calloc(o->nranks + 1, sizeof(size_t)))) {
		free(matters);
		return -ENOMEM;
	}
	for (size_t i = o->nsteps; i-- > 0;) { /* a rank's steps are contiguous, by start */
		x->rank_step_first[o->steps[i].rank] = i;
		x->rank_steps[o->steps[i].rank]++;
	}
	for (size_t i = 0; i < an->ngpus; i++)
		matters[x->rank_of_gpu[i]] = 1;
	for (size_t i = 0; i < o->nsteps; i++)
		matters[o->steps[i].rank] = 1;
	/* Steps carry their numbers from the step finder (steps_find.c): from their names, else
	 * their place on their thread, an optimizer step being its loop iteration. */
	identities(x, matters);
	err = step_collectives(x);
	free(matters);
	return err;
}

int anx_rank_figures(struct anx *x)
{
	struct cuptrace_analysis *o = x->out;
	/* Over its GPUs' windows (its steady state where it has steps, as the GPU table). */
	for (size_t g = 0; g < o->ngpus; g++) {
		struct cuptrace_an_rank *r = &o->ranks[o->gpus[g].rank];
		r->busy_ns += o->gpus[g].busy_ns;
		r->comm_ns += o->gpus[g].comm_ns;
		r->compute_ns += o->gpus[g].compute_ns;
		r->overlap_ns += o->gpus[g].overlap_ns;
	}
	for (size_t s = 0; s < o->nsteps; s++) {
		struct cuptrace_an_rank *r = &o->ranks[o->steps[s].rank];
		r->nsteps++;
		r->step_median_ns += o->steps[s].dur; /* a sum for now */
	}
	for (size_t i = 0; i < o->nranks; i++)
		if (o->ranks[i].nsteps)
			o->ranks[i].step_median_ns /= (int64_t)o->ranks[i].nsteps;
	for (size_t i = 0; i < o->nidle; i++)
		o->idle[i].rank = o->gpus[o->idle[i].gpu].rank;
	return 0;
}
