/* The flight recorder's buffer ring (see ring.h). */
#include "window/ring.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

void cuptrace_ring_init(struct cuptrace_ring *r, int64_t keep_ns, size_t max_bytes)
{
	memset(r, 0, sizeof(*r));
	r->keep_ns = keep_ns;
	r->max_bytes = max_bytes;
}

void cuptrace_ring_free(struct cuptrace_ring *r)
{
	for (size_t i = 0; i < r->n; i++)
		free(r->bufs[i].buf);
	free(r->bufs);
	memset(r, 0, sizeof(*r));
}

static void drop_at(struct cuptrace_ring *r, size_t i)
{
	r->bytes -= r->bufs[i].valid;
	r->evicted++;
	r->evicted_bytes += r->bufs[i].valid;
	free(r->bufs[i].buf);
}

int cuptrace_ring_push(struct cuptrace_ring *r, uint8_t *buf, size_t valid, int64_t tmin,
                       int64_t tmax)
{
	if (valid > r->max_bytes) {
		r->refused++;
		free(buf);
		return 0;
	}
	void *p = cuptrace_grow(r->bufs, &r->cap, r->n + 1, sizeof(*r->bufs));
	if (!p) {
		free(buf);
		return -ENOMEM;
	}
	r->bufs = p;
	r->bufs[r->n++] = (struct cuptrace_ringbuf){buf, valid, tmin, tmax};
	r->bytes += valid;
	if (tmax > r->newest)
		r->newest = tmax;
	/* Aged out: nothing in it is within keep_ns of the newest record. Buffers arrive out of
	 * time order (one per thread), so every one is looked at, not only the first. */
	size_t keep = 0;
	for (size_t i = 0; i < r->n; i++) {
		if (r->bufs[i].tmax && r->bufs[i].tmax < r->newest - r->keep_ns)
			drop_at(r, i);
		else
			r->bufs[keep++] = r->bufs[i];
	}
	r->n = keep;
	/* Over budget: the oldest arrivals go first. */
	size_t first = 0;
	while (r->bytes > r->max_bytes && first < r->n) {
		drop_at(r, first++);
		r->evicted_for_room++;
	}
	if (first) {
		memmove(r->bufs, r->bufs + first, (r->n - first) * sizeof(*r->bufs));
		r->n -= first;
	}
	if (r->bytes > r->peak_bytes)
		r->peak_bytes = r->bytes;
	return 0;
}
