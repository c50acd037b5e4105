/* The flight recorder's memory (--ring T): completed CUPTI buffers kept, newest last, while
 * they hold records of the last T of the run and fit in a byte budget; older ones are freed.
 * A dump hands the kept buffers to a converter, oldest first, through the window filter.
 *
 * Threading: one owner (the writer thread). Ownership: the ring owns the buffers pushed into it
 * and frees them when they age out, when the budget needs room, or in cuptrace_ring_free(). */
#ifndef CUPTRACE_WINDOW_RING_H
#define CUPTRACE_WINDOW_RING_H

#include <stddef.h>
#include <stdint.h>

struct cuptrace_ringbuf {
	uint8_t *buf;
	size_t valid;
	int64_t tmin, tmax; /* the earliest and latest record time in it (0, 0: none) */
};

struct cuptrace_ring {
	int64_t keep_ns;
	size_t max_bytes;
	struct cuptrace_ringbuf *bufs; /* arrival order */
	size_t n, cap;
	size_t bytes;   /* held: the sum of valid */
	int64_t newest; /* the latest record time seen */
	uint64_t evicted, evicted_bytes, evicted_for_room, refused;
	size_t peak_bytes;
};

void cuptrace_ring_init(struct cuptrace_ring *r, int64_t keep_ns, size_t max_bytes);
void cuptrace_ring_free(struct cuptrace_ring *r);
/* Takes buf (malloc'd, valid bytes of records spanning [tmin, tmax]) and frees what aged out:
 * buffers whose latest record is older than keep_ns before the newest seen, then the oldest
 * while over max_bytes. A buffer larger than max_bytes by itself is refused (freed, counted).
 * Returns 0 or -ENOMEM (buf freed). */
int cuptrace_ring_push(struct cuptrace_ring *r, uint8_t *buf, size_t valid, int64_t tmin,
                       int64_t tmax);

#endif
