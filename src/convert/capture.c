/* Raw capture files (.cupti): writer used by the injected library, reader used by
 * `cuptrace convert` and the tests. Format in capture.h. */
#include "convert/capture.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "convert/consumer.h"
#include "convert/convert.h"
#include "convert/stackrec.h"

#define CAP_MAGIC   "CUPTCAP"
#define CAP_VERSION 1u
#define WBUF_SIZE   (1u << 20)

struct cuptrace_capture_writer {
	int fd;
	int err;
	uint8_t *buf;
	size_t len;
	uint64_t written;
	uint64_t records;
	struct cuptrace_u64map strings; /* pointer -> hash of the text last written for it */
};

static int w_flush(struct cuptrace_capture_writer *w)
{
	size_t off = 0;
	while (off < w->len && !w->err) {
		ssize_t n = write(w->fd, w->buf + off, w->len - off);
		if (n < 0) {
			if (errno != EINTR)
				w->err = -errno;
			continue;
		}
		off += (size_t)n;
		w->written += (uint64_t)n;
	}
	w->len = 0;
	return w->err;
}

static int w_put(struct cuptrace_capture_writer *w, const void *p, size_t n)
{
	const uint8_t *b = p;
	while (n && !w->err) {
		if (w->len == WBUF_SIZE && w_flush(w))
			break;
		size_t k = WBUF_SIZE - w->len < n ? WBUF_SIZE - w->len : n;
		memcpy(w->buf + w->len, b, k);
		w->len += k;
		b += k;
		n -= k;
	}
	return w->err;
}

static int w_pad(struct cuptrace_capture_writer *w, size_t n)
{
	static const uint8_t zeros[8];
	return (n & 7) ? w_put(w, zeros, 8 - (n & 7)) : w->err;
}

static int w_item(struct cuptrace_capture_writer *w, uint32_t type, uint64_t len)
{
	uint32_t h[2] = {type, 0};
	w_put(w, h, sizeof(h));
	return w_put(w, &len, sizeof(len));
}

/* NULL and errno on failure. */
static struct cuptrace_capture_writer *writer_open(const char *path)
{
	struct cuptrace_capture_writer *w = calloc(1, sizeof(*w));
	if (!w || !(w->buf = malloc(WBUF_SIZE))) {
		free(w);
		errno = ENOMEM;
		return NULL;
	}
	cuptrace_u64map_init(&w->strings);
	w->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (w->fd < 0) {
		int e = errno;
		free(w->buf);
		free(w);
		errno = e;
		return NULL;
	}
	uint32_t hdr[4];
	memcpy(hdr, CAP_MAGIC "", 8);
	hdr[2] = CAP_VERSION;
	hdr[3] = CUPTI_API_VERSION;
	w_put(w, hdr, sizeof(hdr));
	return w;
}

/* ---- the items, as the consumer's operations (consumer.h) ---- */

static int cap_meta(void *self, const char *key, const char *value)
{
	struct cuptrace_capture_writer *w = self;
	size_t a = strlen(key) + 1, b = strlen(value) + 1;
	w_item(w, CUPTRACE_CAP_META, a + b);
	w_put(w, key, a);
	w_put(w, value, b);
	return w_pad(w, a + b);
}

static int cap_thread_name(void *self, int64_t tid, const char *name)
{
	struct cuptrace_capture_writer *w = self;
	size_t a = strlen(name) + 1;
	w_item(w, CUPTRACE_CAP_THREAD, 8 + a);
	w_put(w, &tid, 8);
	w_put(w, name, a);
	return w_pad(w, 8 + a);
}

static int put_string(struct cuptrace_capture_writer *w, const char *s)
{
	/* Re-emit when the text behind a pointer changes: CUPTI reuses name storage after module
	 * reloads. Hashing each time costs a strlen per record, off the application's threads. */
	size_t n = strlen(s);
	uint64_t h = cuptrace_hash_bytes(s, n) | 1;
	int created;
	uint64_t *slot = cuptrace_u64map_put(&w->strings, (uint64_t)(uintptr_t)s, &created);
	if (!slot)
		return w->err = -ENOMEM;
	if (!created && *slot == h)
		return 0;
	*slot = h;
	uint64_t ptr = (uint64_t)(uintptr_t)s;
	w_item(w, CUPTRACE_CAP_STRING, 8 + n + 1);
	w_put(w, &ptr, 8);
	w_put(w, s, n + 1);
	return w_pad(w, 8 + n + 1);
}

/* One CUPTI buffer's records, preceded by the text of any string pointer not written before (or
 * whose text changed). */
static int cap_records(void *self, const CUpti_Activity *const *recs, const uint32_t *sizes,
                       size_t n)
{
	struct cuptrace_capture_writer *w = self;
	uint64_t total = 8;
	for (size_t i = 0; i < n; i++) {
		const char *const *f[4];
		size_t nf = cuptrace_record_strings(recs[i], f);
		for (size_t j = 0; j < nf; j++)
			if (*f[j])
				put_string(w, *f[j]);
		total += 8 + ((sizes[i] + 7u) & ~7u);
	}
	w_item(w, CUPTRACE_CAP_RECORDS, total);
	uint32_t cnt[2] = {(uint32_t)n, 0};
	w_put(w, cnt, 8);
	for (size_t i = 0; i < n; i++) {
		uint32_t h[2] = {(uint32_t)recs[i]->kind, sizes[i]};
		w_put(w, h, 8);
		w_put(w, recs[i], sizes[i]);
		w_pad(w, sizes[i]);
	}
	w->records += n;
	return w->err;
}

static int cap_dropped(void *self, uint64_t cupti, uint64_t cuptrace)
{
	struct cuptrace_capture_writer *w = self;
	uint64_t v[2] = {cupti, cuptrace};
	w_item(w, CUPTRACE_CAP_DROPPED, sizeof(v));
	return w_put(w, v, sizeof(v));
}

static int cap_nvtx_startend(void *self, const uint64_t *ids, size_t n)
{
	struct cuptrace_capture_writer *w = self;
	w_item(w, CUPTRACE_CAP_NVTX_STARTEND, n * 8);
	return w_put(w, ids, n * 8);
}

static int cap_gpu_metrics(void *self, const struct cuptrace_gm_config *cfg)
{
	struct cuptrace_capture_writer *w = self;
	const char *dn = cfg->device_name ? cfg->device_name : "";
	uint64_t len = 24 + strlen(dn) + 1;
	for (size_t i = 0; i < cfg->nmetrics; i++)
		len += strlen(cfg->metrics[i]) + 1;
	uint32_t h[2] = {cfg->device, (uint32_t)cfg->nmetrics};
	w_item(w, CUPTRACE_CAP_GPU_METRICS, len);
	w_put(w, h, sizeof(h));
	w_put(w, &cfg->interval_ns, 8);
	w_put(w, &cfg->clock_offset_ns, 8);
	w_put(w, dn, strlen(dn) + 1);
	for (size_t i = 0; i < cfg->nmetrics; i++)
		w_put(w, cfg->metrics[i], strlen(cfg->metrics[i]) + 1);
	return w_pad(w, len);
}

static int cap_gpu_samples(void *self, uint32_t device, size_t nmetrics, const uint64_t *times,
                           const double *values, size_t n)
{
	struct cuptrace_capture_writer *w = self;
	uint32_t h[2] = {device, (uint32_t)nmetrics};
	uint64_t count = n;
	w_item(w, CUPTRACE_CAP_GPU_SAMPLES, 16 + n * 16 + n * nmetrics * 8);
	w_put(w, h, sizeof(h));
	w_put(w, &count, 8);
	w_put(w, times, n * 16);
	return w_put(w, values, n * nmetrics * 8);
}

/* What was written so far made durable against SIGKILL of the process (write(2) of the
 * buffer). */
static int cap_flush(void *self)
{
	return w_flush(self);
}

/* END, the last bytes, the file closed; the writer stays until cap_destroy. */
static int cap_finish(void *self)
{
	struct cuptrace_capture_writer *w = self;
	if (w->fd < 0)
		return w->err;
	w_item(w, CUPTRACE_CAP_END, 8);
	w_put(w, &w->records, 8);
	w_flush(w);
	if (close(w->fd) && !w->err)
		w->err = -errno;
	w->fd = -1;
	return w->err;
}

/* Unfinished (a file being given up): END is written all the same; the file is removed by its
 * owner. */
static void cap_destroy(void *self)
{
	struct cuptrace_capture_writer *w = self;
	cap_finish(w);
	cuptrace_u64map_free(&w->strings);
	free(w->buf);
	free(w);
}

static const struct cuptrace_consumer_ops capture_consumer_ops = {.records = cap_records,
                                                                  .thread_name = cap_thread_name,
                                                                  .meta = cap_meta,
                                                                  .dropped = cap_dropped,
                                                                  .nvtx_startend =
                                                                      cap_nvtx_startend,
                                                                  .gpu_metrics = cap_gpu_metrics,
                                                                  .gpu_samples = cap_gpu_samples,
                                                                  .flush = cap_flush,
                                                                  .finish = cap_finish,
                                                                  .destroy = cap_destroy};

int cuptrace_capture_open(const char *path, struct cuptrace_consumer *out)
{
	struct cuptrace_capture_writer *w = writer_open(path);
	if (!w)
		return -errno;
	*out = (struct cuptrace_consumer){.ops = &capture_consumer_ops, .self = w};
	return 0;
}

/* Reader: the file is read into memory whole (captures are what one run produced; convert
 * streams its output, so only the input is held). */
struct cuptrace_capture_reader {
	uint8_t *data;
	size_t len;
	uint32_t cupti_version;
	struct cuptrace_u64map strings; /* pointer -> offset of the text in data */
	const char *path;
	size_t bad_at;        /* the corrupt item's offset (see corrupt) */
	const char *bad_what; /* ... and what is wrong with it */
	/* Tailing (cuptrace_capture_tail_open): data holds only what is not replayed yet, so
	 * strings are kept apart, each a malloc'd copy (the map's values then point at them;
	 * every copy lives until close, as a replaced text may still be referenced). */
	int tail, fd, hdr_ok, ended;
	size_t cap;
	char **own;
	size_t nown, owncap;
};

/* The header of r->data (r->len >= 16 or not a capture): 0, or -1 with errno EINVAL after a
 * message. */
static int check_header(struct cuptrace_capture_reader *r)
{
	const char *path = r->path;
	if (r->len < 16 || memcmp(r->data, CAP_MAGIC, 8)) {
		cuptrace_err("%s: not a cuptrace capture (bad magic)", path);
		errno = EINVAL;
		return -1;
	}
	uint32_t ver;
	memcpy(&ver, r->data + 8, 4);
	memcpy(&r->cupti_version, r->data + 12, 4);
	if (ver != CAP_VERSION) {
		cuptrace_err("%s: capture format version %u, this cuptrace reads version %u", path,
		             ver, CAP_VERSION);
		errno = EINVAL;
		return -1;
	}
	/* Record structs are read with this build's CUPTI headers: same major.minor only. */
	if (r->cupti_version / 100 != CUPTI_API_VERSION / 100) {
		cuptrace_err("%s: captured with CUPTI API %u, this cuptrace was built for %u", path,
		             r->cupti_version, CUPTI_API_VERSION);
		errno = EINVAL;
		return -1;
	}
	return 0;
}

struct cuptrace_capture_reader *cuptrace_capture_reader_open(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	struct stat st;
	struct cuptrace_capture_reader *r = NULL;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		errno = EINVAL;
		cuptrace_err("%s: not a regular file", path);
		goto fail;
	}
	r = calloc(1, sizeof(*r));
	if (!r || !(r->data = malloc((size_t)st.st_size + 1))) {
		errno = ENOMEM;
		goto fail;
	}
	r->path = path;
	while (r->len < (size_t)st.st_size) {
		ssize_t n = read(fd, r->data + r->len, (size_t)st.st_size - r->len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		r->len += (size_t)n;
	}
	if (check_header(r))
		goto fail;
	cuptrace_u64map_init(&r->strings);
	close(fd);
	return r;
fail:
	close(fd);
	if (r)
		free(r->data);
	free(r);
	return NULL;
}

/* A corrupt item ends the replay there, as a cut would: what came before it is whole. */
static int corrupt(struct cuptrace_capture_reader *r, size_t off, const char *what)
{
	r->bad_at = off;
	r->bad_what = what;
	return -EBADMSG;
}

static int replay_records(struct cuptrace_capture_reader *r, const uint8_t *p, uint64_t len,
                          size_t off, const struct cuptrace_capture_ops *ops)
{
	if (len < 8)
		return corrupt(r, off, "short RECORDS item");
	uint32_t count;
	memcpy(&count, p, 4);
	if (count > len / 8)
		return corrupt(r, off, "record count larger than the item");
	const CUpti_Activity **recs = malloc((count ? count : 1) * sizeof(*recs));
	if (!recs)
		return -ENOMEM;
	uint64_t pos = 8;
	size_t n = 0;
	int ret = 0;
	for (uint32_t i = 0; i < count; i++) {
		uint32_t h[2];
		if (pos + 8 > len) {
			ret = corrupt(r, off, "record header past the item");
			break;
		}
		memcpy(h, p + pos, 8);
		uint64_t padded = ((uint64_t)h[1] + 7u) & ~(uint64_t)7u;
		if (pos + 8 + padded > len) {
			ret = corrupt(r, off, "record past the item");
			break;
		}
		const CUpti_Activity *a = (const CUpti_Activity *)(p + pos + 8);
		size_t need = cuptrace_record_min_size((CUpti_ActivityKind)h[0]);
		/* Kinds we read must be at least as large as our struct; others are passed on and
		 * ignored by the converter. */
		/* A call-stack record must lie inside its item (the converter trusts its size). */
		int stk = cuptrace_stackrec_kind(h[0]);
		int fits = !stk || (h[1] >= 8 && cuptrace_stackrec_bytes(a) <= h[1]);
		if (h[1] >= sizeof(CUpti_Activity) && (unsigned)a->kind == h[0] &&
		    (!need || h[1] >= need) && fits)
			recs[n++] = a;
		pos += 8 + padded;
	}
	if (!ret && ops->records && n)
		ret = ops->records(ops->ctx, recs, n);
	free(recs);
	return ret;
}

static int replay_gpu_metrics(struct cuptrace_capture_reader *r, const uint8_t *p, uint64_t len,
                              size_t off, const struct cuptrace_capture_ops *ops)
{
	if (len < 25 || p[len - 1])
		return corrupt(r, off, "bad GPU_METRICS");
	struct cuptrace_gm_config cfg;
	uint32_t h[2];
	memcpy(h, p, 8);
	memcpy(&cfg.interval_ns, p + 8, 8);
	memcpy(&cfg.clock_offset_ns, p + 16, 8);
	cfg.device = h[0];
	cfg.nmetrics = h[1];
	if (!cfg.nmetrics || cfg.nmetrics > 256)
		return corrupt(r, off, "bad GPU_METRICS");
	const char *names[256];
	const char *s = (const char *)p + 24, *end = (const char *)p + len;
	cfg.device_name = s;
	s += strlen(s) + 1;
	for (size_t i = 0; i < cfg.nmetrics; i++) {
		if (s >= end)
			return corrupt(r, off, "bad GPU_METRICS");
		names[i] = s;
		s += strlen(s) + 1; /* the last byte is 0: strlen stays inside */
	}
	cfg.metrics = names;
	return ops->gpu_metrics ? ops->gpu_metrics(ops->ctx, &cfg) : 0;
}

/* Replays the items of r->data from off; *cut_at: where a cut item starts (or where the items
 * stop without END), 0 after END; *stop: the offset after the last whole item replayed. */
static int replay_items(struct cuptrace_capture_reader *r, const struct cuptrace_capture_ops *ops,
                        size_t off, uint64_t *cut_at, size_t *stop)
{
	*cut_at = 0;
	*stop = off;
	int ended = 0;
	while (off < r->len) {
		if (r->len - off < 16) {
			*cut_at = off;
			break;
		}
		uint32_t h[2];
		uint64_t len;
		memcpy(h, r->data + off, 8);
		memcpy(&len, r->data + off + 8, 8);
		if (h[0] < CUPTRACE_CAP_META || h[0] > CUPTRACE_CAP_GPU_SAMPLES || h[1])
			return corrupt(r, off, "unknown item type");
		uint64_t padded = (len + 7u) & ~(uint64_t)7u;
		if (padded < len || padded > r->len - off - 16) {
			*cut_at = off;
			break;
		}
		/* data is malloc'd (16-aligned) and items are 8-padded: payloads are 8-aligned. */
		uint8_t *p = r->data + off + 16;
		int ret = 0;
		switch (h[0]) {
		case CUPTRACE_CAP_META: {
			char *k = (char *)p, *end = (char *)p + len;
			char *z1 = memchr(k, 0, len);
			char *z2 = z1 ? memchr(z1 + 1, 0, (size_t)(end - z1 - 1)) : NULL;
			if (!z2)
				return corrupt(r, off, "unterminated META");
			if (ops->meta)
				ret = ops->meta(ops->ctx, k, z1 + 1);
			break;
		}
		case CUPTRACE_CAP_STRING: {
			if (len < 9 || p[len - 1])
				return corrupt(r, off, "bad STRING");
			uint64_t ptr;
			memcpy(&ptr, p, 8);
			uint64_t *slot = cuptrace_u64map_put(&r->strings, ptr, NULL);
			if (!slot)
				return -ENOMEM;
			if (r->tail) {
				char *copy = strdup((const char *)p + 8);
				char **own = copy ? cuptrace_grow(r->own, &r->owncap, r->nown + 1,
				                                  sizeof(*own))
				                  : NULL;
				if (!own) {
					free(copy);
					return -ENOMEM;
				}
				r->own = own;
				r->own[r->nown++] = copy;
				*slot = (uint64_t)(uintptr_t)copy;
			} else {
				*slot = (uint64_t)(p + 8 - r->data);
			}
			break;
		}
		case CUPTRACE_CAP_THREAD: {
			if (len < 9 || p[len - 1])
				return corrupt(r, off, "bad THREAD");
			int64_t tid;
			memcpy(&tid, p, 8);
			if (ops->thread)
				ret = ops->thread(ops->ctx, tid, (const char *)p + 8);
			break;
		}
		case CUPTRACE_CAP_RECORDS:
			ret = replay_records(r, p, len, off, ops);
			break;
		case CUPTRACE_CAP_DROPPED: {
			if (len < 16)
				return corrupt(r, off, "bad DROPPED");
			uint64_t v[2];
			memcpy(v, p, 16);
			if (ops->dropped)
				ret = ops->dropped(ops->ctx, v[0], v[1]);
			break;
		}
		case CUPTRACE_CAP_END:
			ended = 1;
			break;
		case CUPTRACE_CAP_NVTX_STARTEND:
			if (len % 8)
				return corrupt(r, off, "bad NVTX_STARTEND");
			if (ops->nvtx_startend)
				ret = ops->nvtx_startend(ops->ctx, (const uint64_t *)p,
				                         (size_t)(len / 8));
			break;
		case CUPTRACE_CAP_GPU_METRICS:
			ret = replay_gpu_metrics(r, p, len, off, ops);
			break;
		case CUPTRACE_CAP_GPU_SAMPLES: {
			uint32_t g[2];
			uint64_t n;
			if (len < 16)
				return corrupt(r, off, "bad GPU_SAMPLES");
			memcpy(g, p, 8);
			memcpy(&n, p + 8, 8);
			/* Each sample takes 16 + 8 * nmetrics bytes; checked by division, so no
			 * product can wrap. */
			if (g[1] == 0 || g[1] > 256 || n > (len - 16) / (16 + 8 * (uint64_t)g[1]) ||
			    16 + n * (16 + 8 * (uint64_t)g[1]) != len)
				return corrupt(r, off, "bad GPU_SAMPLES");
			if (ops->gpu_samples && n)
				ret = ops->gpu_samples(
				    ops->ctx, g[0], g[1], (const uint64_t *)(p + 16),
				    (const double *)(p + 16 + n * 16), (size_t)n);
			break;
		}
		default:
			return corrupt(r, off, "unknown item type");
		}
		if (ret)
			return ret;
		off += 16 + padded;
		*stop = off;
		if (ended)
			break;
	}
	r->ended |= ended;
	if (!ended && !*cut_at)
		*cut_at = off; /* whole items, but not the one that ends a capture */
	return 0;
}

size_t cuptrace_capture_size(const struct cuptrace_capture_reader *r)
{
	return r->len;
}

int cuptrace_capture_replay(struct cuptrace_capture_reader *r,
                            const struct cuptrace_capture_ops *ops, uint64_t *cut_at,
                            const char **corrupt_what)
{
	*corrupt_what = NULL;
	size_t stop;
	int ret = replay_items(r, ops, 16, cut_at, &stop);
	if (ret != -EBADMSG)
		return ret;
	*cut_at = r->bad_at;
	*corrupt_what = r->bad_what;
	return 0;
}

const char *cuptrace_capture_resolve(void *reader, const char *ptr)
{
	struct cuptrace_capture_reader *r = reader;
	if (!ptr)
		return NULL;
	uint64_t *v = cuptrace_u64map_get(&r->strings, (uint64_t)(uintptr_t)ptr);
	if (!v)
		return NULL;
	return r->tail ? (const char *)(uintptr_t)*v : (const char *)r->data + *v;
}

uint32_t cuptrace_capture_cupti_version(const struct cuptrace_capture_reader *r)
{
	return r->cupti_version;
}

void cuptrace_capture_reader_close(struct cuptrace_capture_reader *r)
{
	if (!r)
		return;
	cuptrace_u64map_free(&r->strings);
	for (size_t i = 0; i < r->nown; i++)
		free(r->own[i]);
	free(r->own);
	if (r->tail && r->fd >= 0)
		close(r->fd);
	free(r->data);
	free(r);
}

struct cuptrace_capture_reader *cuptrace_capture_tail_open(const char *path)
{
	struct cuptrace_capture_reader *r = calloc(1, sizeof(*r));
	if (!r) {
		errno = ENOMEM;
		return NULL;
	}
	r->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (r->fd < 0) {
		free(r);
		return NULL;
	}
	r->tail = 1;
	r->path = path;
	cuptrace_u64map_init(&r->strings);
	return r;
}

int cuptrace_capture_tail_poll(struct cuptrace_capture_reader *r,
                               const struct cuptrace_capture_ops *ops, int *ended,
                               const char **corrupt_what)
{
	*corrupt_what = NULL;
	*ended = r->ended;
	if (r->ended)
		return 0;
	for (;;) {
		if (r->cap - r->len < 65536) {
			size_t ncap = r->cap ? r->cap * 2 : 1u << 20;
			uint8_t *d = realloc(r->data, ncap);
			if (!d)
				return -ENOMEM;
			r->data = d;
			r->cap = ncap;
		}
		ssize_t n = read(r->fd, r->data + r->len, r->cap - r->len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		r->len += (size_t)n;
	}
	size_t off = 0;
	if (!r->hdr_ok) {
		if (r->len < 16)
			return 0; /* the writer has not written its header yet */
		if (check_header(r))
			return -EINVAL;
		r->hdr_ok = 1;
		off = 16;
	}
	uint64_t cut_at;
	size_t stop;
	int ret = replay_items(r, ops, off, &cut_at, &stop);
	if (ret == -EBADMSG) {
		*corrupt_what = r->bad_what;
		return ret;
	}
	/* What was replayed goes: the rest (an item being written) moves to the start, where
	 * it keeps the 8-byte alignment the payloads need (items are 8-padded). */
	memmove(r->data, r->data + stop, r->len - stop);
	r->len -= stop;
	*ended = r->ended;
	return ret;
}
