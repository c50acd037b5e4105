/* Which CUPTI records belong to which capture window (window.h decides when windows open and
 * close; this decides what is in them).
 *
 * The rule users are promised: a kernel, copy or memset is in a window when the API call that
 * launched it began inside the window, however late the GPU ran it; API calls, NVTX marks and
 * memory records by their own start time. GPU records reach us in any order with respect to
 * their API record (CUPTI fills a buffer per thread), so a GPU record whose API record has not
 * been seen yet is held (copied) until it has, or until its window is final; one whose API
 * record never comes was launched while the API kinds were off, outside every window, and is
 * dropped (counted). Only when more than HELD_MAX wait is one placed by its own time.
 * Device, context, stream and name records describe the whole run and go to every window.
 *
 * Pure: CUPTI's record structs only, no CUPTI calls, so it is tested on synthetic records.
 * Threading: one owner (the writer thread). */
#ifndef CUPTRACE_WINDOW_WFILTER_H
#define CUPTRACE_WINDOW_WFILTER_H

#include <stddef.h>
#include <stdint.h>

#include <cupti_activity.h>

#include "common/util.h"

/* A verdict for one record: the window number (>= 1), or one of these. */
#define CUPTRACE_WF_DROP 0 /* outside every window */
#define CUPTRACE_WF_ALL                                                                            \
	(-1)                  /* describes the run (device, context, stream, names): every window  \
	                       */
#define CUPTRACE_WF_HELD (-2) /* held until its API record or its window's end decides */

struct cuptrace_wspan {
	uint64_t number;
	int64_t open, close; /* close: INT64_MAX while open */
	int final;           /* closed, and every record of it has been delivered */
};

struct cuptrace_wheld {
	CUpti_Activity *rec; /* a copy, owned by the filter */
	uint32_t size;
	uint32_t corr;
};

struct cuptrace_wfilter {
	struct cuptrace_wspan *spans;
	size_t nspans, capspans;
	struct cuptrace_u64map corr;   /* API correlation id -> window number, or DROPPED */
	struct cuptrace_u64map marker; /* NVTX range id -> window number of its START */
	struct cuptrace_wheld *held;
	size_t nheld, capheld;
	/* Released records (held ones now decided): copies the filter owns until the next call,
	 * with their windows. */
	CUpti_Activity **out;
	int64_t *outv;
	size_t nout, capout, capoutv;
	uint64_t held_total, dropped, placed_by_time;
};

void cuptrace_wfilter_init(struct cuptrace_wfilter *f);
void cuptrace_wfilter_free(struct cuptrace_wfilter *f);

/* Windows, in the order they open (numbers ascending). Returns 0 or -ENOMEM. */
int cuptrace_wfilter_open(struct cuptrace_wfilter *f, uint64_t number, int64_t t);
void cuptrace_wfilter_close(struct cuptrace_wfilter *f, uint64_t number, int64_t t);

/* The start time and correlation id (0: none) that place a record. Returns 0 for records that
 * describe the run rather than a moment of it. */
int cuptrace_wrecord_place(const CUpti_Activity *r, int64_t *t, uint32_t *corr);

/* One CUPTI buffer's records (sizes: each record's bytes). Fills verdict[i] for each. API
 * records are placed first, so GPU records in the same batch find them. Records HELD are
 * copied; the caller may reuse the buffer. */
int cuptrace_wfilter_batch(struct cuptrace_wfilter *f, const CUpti_Activity *const *recs,
                           const uint32_t *sizes, size_t n, int64_t *verdict);
/* Marks a window final (every record of it delivered): held records that ran by its close and
 * whose API record never came are dropped. */
void cuptrace_wfilter_final(struct cuptrace_wfilter *f, uint64_t number);
/* Held records decided since the last call (kept ones only; the dropped are counted), with
 * their window numbers. Valid until the next call of any function here. */
size_t cuptrace_wfilter_released(struct cuptrace_wfilter *f, const CUpti_Activity *const **recs,
                                 const int64_t **verdicts);

#endif
