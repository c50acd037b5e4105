/* Output byte sinks (see output.h). Files are written with write(2), never stdio, so what was
 * flushed is in the kernel's hands and survives SIGKILL of the traced process.
 *
 * CHUNKS mode compresses on a small pool of threads: zlib was the slowest stage of the writer
 * thread, which must keep up with the traced program. Chunks are independent zlib streams, so
 * workers compress them in parallel and write them in order (each waits for its turn). The
 * caller fills one buffer while the workers hold the others; when none is free it waits, so
 * memory stays at (workers + 2) chunks. Errors from workers come back through a sticky error
 * that the caller reads under the lock.
 *
 * A chunk is compressed whole, so libdeflate (a whole-buffer DEFLATE compressor) does it where
 * the machine has it: loaded with dlopen, like libcurl, so nothing links against it. At level 5
 * it writes zlib streams about twice as fast as zlib's compress2 and a little smaller
 * (README "Benchmarks"); without it, zlib does the same job. */
#define _GNU_SOURCE
#include "output.h"

#include "common/util.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>
#include <sys/prctl.h>

#define MAX_CHUNK                                                                                  \
	(480u * 1024u) /* Perfetto asks that a compressed_packets packet stay < 512 KB             \
	                */
#define MAX_WORKERS 4
#define NBUFS       (MAX_WORKERS + 2)

struct job {
	uint8_t *buf; /* the bytes to compress */
	size_t len;
	uint64_t seq;
	int small; /* at SMALL_LEVEL (small_chunk) */
	/* The chunk buffer that goes back to the free list once this job is written (NULL: a
	 * piece of the last chunk whose buffer a later piece gives back; see hand_over_last). */
	uint8_t *owned;
};

/* The recorder's last chunk is cut between records into pieces of MIN_PIECE bytes or more
 * (hand_over_last); where records start is noted about every MARK_STEP bytes to find the cuts. */
#define MARK_STEP (16u * 1024u)
#define MAX_MARKS ((MAX_CHUNK + MARK_STEP - 1) / MARK_STEP + 1)
#define MIN_PIECE (32u * 1024u)

/* Chunks smaller than this (a quiet program's once-a-second flush, a small trace's only chunk)
 * are compressed by libdeflate at SMALL_LEVEL: at that size level 5 does worse than zlib's,
 * level 10 better (tests/data: 1 to 2% smaller than zlib 5), and it costs about 6 ms per 64 KiB,
 * at most once per flush period. Full chunks, a busy program's, take the caller's level, and so
 * does the last chunk of a trace that has others: it is compressed on the program's exit path,
 * where those milliseconds are the program's (the launch loop of README "Overhead" is about
 * 450 ms), for a few hundred bytes of a trace of megabytes. */
#define SMALL_CHUNK (64u * 1024u)
#define SMALL_LEVEL 10

/* A compressor of one thread: zbuf holds its output; ld[0] and ld[1] are its libdeflate
 * compressors for full and small chunks (NULL: zlib's compress2), made on first use. */
struct zctx {
	uint8_t *zbuf;
	size_t zcap;
	void *ld[2];
	int ld_tried[2];
};

struct worker {
	struct cuptrace_output *o;
	pthread_t thread;
	struct zctx z; /* this worker's */
};

struct cuptrace_output {
	int fd;
	enum cuptrace_compress mode;
	int err; /* caller's sticky error */
	int flush_ms;
	int level;
	size_t chunk_bytes;
	uint8_t *buf; /* pending bytes: a chunk's records (CHUNKS) or plain/gzip output */
	size_t len, cap;
	z_stream gz; /* GZIP */
	int gz_init;
	_Atomic uint64_t written; /* advanced by workers, read by the caller */
	uint64_t last_flush_ms;
	unsigned writes_since_check;
	/* CHUNKS with a pool: where records start in buf, about every MARK_STEP bytes (the
	 * caller's, reset with len) */
	uint32_t marks[MAX_MARKS];
	size_t nmarks, next_mark;
	/* CHUNKS: compressor pool; everything below is guarded by lock */
	struct worker workers[MAX_WORKERS];
	int nworkers;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	/* handed over, not yet taken by a worker: a job per buffer, and the last chunk's pieces */
	struct job queue[2 * NBUFS];
	size_t nqueue;
	uint8_t *free_bufs[NBUFS];
	size_t nfree;
	uint64_t next_seq;   /* seq of the next chunk handed over */
	uint64_t next_write; /* seq of the next chunk to reach the file */
	int stop;
	int closing;     /* the last drain: set by cuptrace_output_close */
	int split_last;  /* opts.split_last */
	uint64_t chunks; /* chunks handed over or compressed inline (the caller's count) */
	int async_err;
	struct zctx inline_z; /* the caller's own: no pool, oversized records, help in wait_idle */
};

/* CPU time of every compressor thread of the process (all outputs), updated after each chunk:
 * the traced process's summary counts it as the tracer's (cuptrace_output_workers_cpu_ns). */
static atomic_ullong workers_cpu_ns;

static uint64_t thread_cpu_ns(void)
{
	struct timespec t;
	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t))
		return 0;
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

uint64_t cuptrace_output_workers_cpu_ns(void)
{
	return atomic_load(&workers_cpu_ns);
}

/* Which codecs compressed chunks so far, any output of the process: bit 1 libdeflate, bit 2
 * zlib (cuptrace_output_codecs). */
static atomic_uint codecs_used;

unsigned cuptrace_output_codecs(void)
{
	return atomic_load(&codecs_used);
}

/* libdeflate's entry points (libdeflate.h, stable since 1.0), looked up once. */
static struct {
	void *(*alloc)(int level);
	size_t (*compress)(void *c, const void *in, size_t in_n, void *out, size_t out_avail);
	size_t (*bound)(void *c, size_t in_n);
	void (*free)(void *c);
} ld_fn;
static pthread_once_t ld_once = PTHREAD_ONCE_INIT;

static void ld_load(void)
{
	void *h = dlopen("libdeflate.so.0", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return;
	*(void **)&ld_fn.alloc = dlsym(h, "libdeflate_alloc_compressor");
	*(void **)&ld_fn.compress = dlsym(h, "libdeflate_zlib_compress");
	*(void **)&ld_fn.bound = dlsym(h, "libdeflate_zlib_compress_bound");
	*(void **)&ld_fn.free = dlsym(h, "libdeflate_free_compressor");
	if (!ld_fn.alloc || !ld_fn.compress || !ld_fn.bound || !ld_fn.free) {
		memset(&ld_fn, 0, sizeof(ld_fn));
		dlclose(h);
	}
	/* Otherwise kept open for the life of the process: compressors may outlive any output. */
}

static void zctx_free(struct zctx *z)
{
	for (int i = 0; i < 2; i++)
		if (z->ld[i])
			ld_fn.free(z->ld[i]);
	free(z->zbuf);
	memset(z, 0, sizeof(*z));
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Returns 0 or a negative errno; callers record it (this runs on any thread). */
static int write_all(struct cuptrace_output *o, const void *p, size_t n)
{
	const uint8_t *b = p;
	while (n) {
		ssize_t w = write(o->fd, b, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		b += w;
		n -= (size_t)w;
		atomic_fetch_add(&o->written, (uint64_t)w);
	}
	return 0;
}

/* Whether a chunk of len bytes, handed over now, is compressed at SMALL_LEVEL (see there). */
static int small_chunk(const struct cuptrace_output *o, size_t len)
{
	/* A full chunk (within a record of chunk_bytes) is a busy program's, whatever its size. */
	return len < SMALL_CHUNK && len < o->chunk_bytes - o->chunk_bytes / 8 && o->level >= 5 &&
	       !(o->closing && o->chunks > 0);
}

/* One chunk: TracePacket{compressed_packets(50) = zlib(records)}, framed as Trace.packet.
 * Compresses into z->zbuf (grown as needed); *out and *out_len give the framed bytes. */
static int compress_chunk(int level, int small, const uint8_t *buf, size_t len, struct zctx *z,
                          const uint8_t **out, size_t *out_len)
{
	if (!z->ld_tried[small]) {
		z->ld_tried[small] = 1;
		pthread_once(&ld_once, ld_load);
		z->ld[small] = ld_fn.alloc ? ld_fn.alloc(small ? SMALL_LEVEL : level) : NULL;
	}
	void *ld = z->ld[small];
	if (!(atomic_load_explicit(&codecs_used, memory_order_relaxed) & (ld ? 1u : 2u)))
		atomic_fetch_or(&codecs_used, ld ? 1u : 2u);
	size_t bound = ld ? ld_fn.bound(ld, len) : compressBound(len);
	if (CUPTRACE_GROW(z->zbuf, z->zcap, bound + 32))
		return -ENOMEM;
	uint8_t *payload = z->zbuf + 24; /* room for the two headers in front */
	size_t zlen;
	if (ld) {
		zlen = ld_fn.compress(ld, buf, len, payload, bound);
		if (!zlen)
			return -EIO;
	} else {
		uLongf zl = bound;
		if (compress2(payload, &zl, buf, len, level > 9 ? 9 : level) != Z_OK)
			return -EIO;
		zlen = zl;
	}
	uint8_t inner[12], outer[12];
	size_t ni = 0, no = 0;
	inner[ni++] = 0x92; /* field 50, wire type 2 */
	inner[ni++] = 0x03;
	ni += cuptrace_put_varint(inner + ni, zlen);
	outer[no++] = 0x0A; /* Trace.packet */
	no += cuptrace_put_varint(outer + no, ni + zlen);
	uint8_t *start = payload - ni - no;
	memcpy(start, outer, no);
	memcpy(start + no, inner, ni);
	*out = start;
	*out_len = no + ni + zlen;
	return 0;
}

/* Takes the oldest job off the queue and compresses and writes it with z's compressors: a
 * worker's loop, and a waiting caller's help. Called and returns with o->lock held. */
static void run_job(struct cuptrace_output *o, struct zctx *z)
{
	struct job j = o->queue[0];
	memmove(o->queue, o->queue + 1, --o->nqueue * sizeof(o->queue[0]));
	int failed = o->async_err;
	pthread_mutex_unlock(&o->lock);

	const uint8_t *out = NULL;
	size_t out_len = 0;
	int r =
	    failed ? failed : compress_chunk(o->level, j.small, j.buf, j.len, z, &out, &out_len);

	pthread_mutex_lock(&o->lock);
	/* Chunks reach the file in the order they were handed over. */
	while (o->next_write != j.seq)
		pthread_cond_wait(&o->cond, &o->lock);
	if (!r && !o->async_err) {
		pthread_mutex_unlock(&o->lock);
		r = write_all(o, out, out_len);
		pthread_mutex_lock(&o->lock);
	}
	if (r && !o->async_err)
		o->async_err = r;
	o->next_write++;
	if (j.owned)
		o->free_bufs[o->nfree++] = j.owned;
	pthread_cond_broadcast(&o->cond);
}

static void *worker_main(void *arg)
{
	/* Named cuptrace-*: `top` counts the tracer's own CPU by these names. */
	prctl(PR_SET_NAME, "cuptrace-output", 0, 0, 0);
	struct worker *wk = arg;
	struct cuptrace_output *o = wk->o;
	uint64_t cpu = thread_cpu_ns();
	pthread_mutex_lock(&o->lock);
	for (;;) {
		while (!o->nqueue && !o->stop)
			pthread_cond_wait(&o->cond, &o->lock);
		if (!o->nqueue)
			break;
		run_job(o, &wk->z);
		uint64_t now = thread_cpu_ns();
		atomic_fetch_add(&workers_cpu_ns, now - cpu);
		cpu = now;
	}
	pthread_mutex_unlock(&o->lock);
	return NULL;
}

/* Waits until every chunk handed over is in the file, compressing queued chunks itself
 * meanwhile: at a flush or the close (the program's exit path) the caller has nothing else to
 * do, and the last chunks are done by one more thread. Returns the workers' sticky error. */
static int wait_idle(struct cuptrace_output *o)
{
	pthread_mutex_lock(&o->lock);
	while (o->next_write != o->next_seq) {
		if (o->nqueue)
			run_job(o, &o->inline_z);
		else
			pthread_cond_wait(&o->cond, &o->lock);
	}
	int e = o->async_err;
	pthread_mutex_unlock(&o->lock);
	return e;
}

/* Hands the current chunk to the pool as n jobs, the pieces [cuts[i], cuts[i + 1]) (n = 1: the
 * whole chunk); the last piece gives the buffer back once written, after the others. Then takes
 * a free buffer (waiting for one if needed), except at the close, which writes no more. */
static int hand_over_pieces(struct cuptrace_output *o, const size_t *cuts, size_t n)
{
	if (!o->len)
		return 0;
	pthread_mutex_lock(&o->lock);
	while (!o->closing && !o->nfree && !o->async_err)
		pthread_cond_wait(&o->cond, &o->lock);
	int e = o->async_err;
	if (!e) {
		int small = n == 1 && small_chunk(o, o->len);
		for (size_t i = 0; i < n; i++)
			o->queue[o->nqueue++] =
			    (struct job){.buf = o->buf + cuts[i],
			                 .owned = i + 1 == n ? o->buf : NULL, /* written last */
			                 .len = cuts[i + 1] - cuts[i],
			                 .small = small,
			                 .seq = o->next_seq++};
		o->chunks++;
		o->buf = o->closing ? NULL : o->free_bufs[--o->nfree];
		o->len = 0;
		pthread_cond_broadcast(&o->cond);
	}
	pthread_mutex_unlock(&o->lock);
	return e ? (o->err = e) : 0;
}

static int hand_over(struct cuptrace_output *o)
{
	const size_t whole[2] = {0, o->len};
	return hand_over_pieces(o, whole, 1);
}

/* The last chunk of a trace that has others: compressed on the program's exit path, where the
 * caller would wait for one thread to do it. Cut between records into up to one piece per
 * worker and one for the caller, each its own zlib stream (a chunk of its own in the file), so
 * that they are compressed at once (a few hundred bytes more for a trace of megabytes). A small
 * chunk, or a trace with no other chunk (its size matters there), goes whole. */
static int hand_over_last(struct cuptrace_output *o)
{
	size_t k = (size_t)o->nworkers + 1;
	if (o->len / MIN_PIECE < k)
		k = o->len / MIN_PIECE;
	if (!o->split_last || !o->chunks || k < 2)
		return hand_over(o);
	/* cuts[i]: the first mark at or after i/k of the chunk */
	size_t cuts[MAX_WORKERS + 2], nc = 0, m = 0;
	cuts[nc++] = 0;
	for (size_t i = 1; i < k; i++) {
		size_t want = o->len * i / k;
		while (m < o->nmarks && o->marks[m] < want)
			m++;
		if (m == o->nmarks)
			break;
		if (o->marks[m] > cuts[nc - 1])
			cuts[nc++] = o->marks[m];
	}
	cuts[nc] = o->len;
	return hand_over_pieces(o, cuts, nc);
}

/* Compresses and writes a chunk on the caller's thread (no pool, or an oversized record). */
static int chunk_inline(struct cuptrace_output *o, const uint8_t *buf, size_t len)
{
	if (!len)
		return 0;
	int e = o->nworkers ? wait_idle(o) : 0;
	const uint8_t *out;
	size_t out_len;
	if (!e)
		e = compress_chunk(o->level, small_chunk(o, len), buf, len, &o->inline_z, &out,
		                   &out_len);
	o->chunks++;
	if (!e)
		e = write_all(o, out, out_len);
	return e ? (o->err = e) : 0;
}

static int gz_pump(struct cuptrace_output *o, const void *data, size_t len, int flush)
{
	uint8_t tmp[16384];
	o->gz.next_in = (Bytef *)data;
	o->gz.avail_in = (uInt)len;
	do {
		o->gz.next_out = tmp;
		o->gz.avail_out = sizeof(tmp);
		int r = deflate(&o->gz, flush);
		if (r == Z_STREAM_ERROR)
			return o->err = -EIO;
		size_t have = sizeof(tmp) - o->gz.avail_out;
		int e = have ? write_all(o, tmp, have) : 0;
		if (e)
			return o->err = e;
		if (flush == Z_FINISH && r == Z_STREAM_END)
			break;
	} while (o->gz.avail_out == 0 || flush == Z_FINISH);
	return 0;
}

static int drain(struct cuptrace_output *o)
{
	int r = 0;
	switch (o->mode) {
	case CUPTRACE_COMPRESS_CHUNKS:
		r = !o->nworkers ? chunk_inline(o, o->buf, o->len)
		    : o->closing ? hand_over_last(o)
		                 : hand_over(o);
		o->len = 0;
		o->nmarks = 0;
		o->next_mark = o->split_last ? 0 : SIZE_MAX; /* marks serve only hand_over_last */
		break;
	case CUPTRACE_COMPRESS_NONE:
		r = write_all(o, o->buf, o->len);
		o->len = 0;
		if (r)
			o->err = r;
		break;
	case CUPTRACE_COMPRESS_GZIP:
		/* Z_SYNC_FLUSH is not used: it costs size, and a cut gzip file does not load
		 * anyway. */
		r = gz_pump(o, o->buf, o->len, Z_NO_FLUSH);
		o->len = 0;
		break;
	}
	o->last_flush_ms = now_ms();
	return r;
}

static void start_pool(struct cuptrace_output *o, int nworkers)
{
	for (size_t i = 0; i < (size_t)nworkers + 1; i++) {
		o->free_bufs[o->nfree] = malloc(o->cap);
		if (!o->free_bufs[o->nfree])
			break;
		o->nfree++;
	}
	if (o->nfree < 2) {
		while (o->nfree)
			free(o->free_bufs[--o->nfree]);
		return;
	}
	pthread_mutex_init(&o->lock, NULL);
	pthread_cond_init(&o->cond, NULL);
	/* The workers never take the traced program's signals (cuptrace_thread_start). */
	for (int i = 0; i < nworkers && i < (int)o->nfree - 1; i++) {
		o->workers[i].o = o;
		if (cuptrace_thread_start(&o->workers[i].thread, worker_main, &o->workers[i]))
			break;
		o->nworkers++;
	}
	if (!o->nworkers) {
		/* No thread: compress inline (slower, same bytes). */
		pthread_mutex_destroy(&o->lock);
		pthread_cond_destroy(&o->cond);
		while (o->nfree)
			free(o->free_bufs[--o->nfree]);
	}
}

static void stop_pool(struct cuptrace_output *o)
{
	if (!o->nworkers)
		return;
	pthread_mutex_lock(&o->lock);
	o->stop = 1;
	pthread_cond_broadcast(&o->cond);
	pthread_mutex_unlock(&o->lock);
	for (int i = 0; i < o->nworkers; i++) {
		pthread_join(o->workers[i].thread, NULL);
		zctx_free(&o->workers[i].z);
	}
	o->nworkers = 0;
	pthread_mutex_destroy(&o->lock);
	pthread_cond_destroy(&o->cond);
	while (o->nfree)
		free(o->free_bufs[--o->nfree]);
}

struct cuptrace_output *cuptrace_output_open(const char *path, enum cuptrace_compress mode,
                                             const struct cuptrace_output_opts *opts)
{
	struct cuptrace_output *o = calloc(1, sizeof(*o));
	if (!o) {
		errno = ENOMEM;
		return NULL;
	}
	o->fd = -1;
	o->mode = mode;
	/* 128 KiB: a cut or a corrupt byte loses at most one chunk of records (about 8,000
	 * kernels, 20 to 40 KB of file), for 0.4% more bytes on tests/data and 0.9% on
	 * convert_bench than 256 KiB chunks; 64 KiB chunks cost 2.5% there (README, "Size").
	 * The recorder also closes a chunk every second (flush_ms). */
	o->chunk_bytes = 128u * 1024u;
	o->flush_ms = 1000;
	/* Level 5: on trace data as small as level 6 (16.3 vs 16.4 bytes per kernel in
	 * convert_bench) and a third faster. */
	o->level = 5;
	int workers = 2;
	if (opts && opts->sz >= sizeof(*opts)) {
		if (opts->chunk_bytes)
			o->chunk_bytes = opts->chunk_bytes;
		if (opts->flush_ms)
			o->flush_ms = opts->flush_ms;
		if (opts->level)
			o->level = opts->level < 1 ? 1 : opts->level > 12 ? 12 : opts->level;
		if (opts->workers)
			workers = opts->workers < 0 ? 0 : opts->workers;
		o->split_last = opts->split_last;
	}
	if (!o->split_last || mode != CUPTRACE_COMPRESS_CHUNKS)
		o->next_mark = SIZE_MAX; /* no marks: nothing cuts a chunk */
	if (workers > MAX_WORKERS)
		workers = MAX_WORKERS;
	if (o->chunk_bytes > MAX_CHUNK)
		o->chunk_bytes = MAX_CHUNK;
	if (o->chunk_bytes < 1024)
		o->chunk_bytes = 1024;
	o->cap = mode == CUPTRACE_COMPRESS_CHUNKS ? o->chunk_bytes : 64u * 1024u;
	o->buf = malloc(o->cap);
	if (!o->buf)
		goto fail_nomem;
	if (mode == CUPTRACE_COMPRESS_GZIP) {
		if (deflateInit2(&o->gz, o->level > 9 ? 9 : o->level, Z_DEFLATED, 15 + 16, 8,
		                 Z_DEFAULT_STRATEGY) != Z_OK)
			goto fail_nomem;
		o->gz_init = 1;
	}
	/* "-": standard output, through a descriptor of our own that close() may close. */
	o->fd = strcmp(path, "-") ? open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)
	                          : fcntl(1, F_DUPFD_CLOEXEC, 3);
	if (o->fd < 0) {
		int e = errno;
		cuptrace_output_close(o);
		errno = e;
		return NULL;
	}
	o->last_flush_ms = now_ms();
	if (mode == CUPTRACE_COMPRESS_CHUNKS && workers)
		start_pool(o, workers);
	return o;
fail_nomem:
	cuptrace_output_close(o);
	errno = ENOMEM;
	return NULL;
}

int cuptrace_output_write(struct cuptrace_output *o, const void *data, size_t len)
{
	if (o->err)
		return o->err;
	if (o->len + len > o->cap) {
		if (drain(o))
			return o->err;
		if (len > o->cap) {
			/* A record bigger than a chunk: in CHUNKS mode it becomes a chunk of its
			 * own (the chunk buffers keep their size). */
			if (o->mode == CUPTRACE_COMPRESS_CHUNKS)
				return chunk_inline(o, data, len);
			if (o->mode == CUPTRACE_COMPRESS_GZIP)
				return gz_pump(o, data, len, Z_NO_FLUSH);
			int e = write_all(o, data, len);
			return e ? (o->err = e) : 0;
		}
	}
	if (o->len >= o->next_mark && o->nmarks < MAX_MARKS) {
		o->marks[o->nmarks++] = (uint32_t)o->len; /* a record starts here */
		o->next_mark = o->len + MARK_STEP;
	}
	memcpy(o->buf + o->len, data, len);
	o->len += len;
	if (++o->writes_since_check >= 64) {
		o->writes_since_check = 0;
		return cuptrace_output_tick(o);
	}
	return 0;
}

int cuptrace_output_tick(struct cuptrace_output *o)
{
	if (o->err)
		return o->err;
	if (o->flush_ms < 0 || !o->len)
		return 0;
	if (now_ms() - o->last_flush_ms >= (uint64_t)o->flush_ms)
		return drain(o);
	return 0;
}

int cuptrace_output_flush(struct cuptrace_output *o)
{
	if (o->err)
		return o->err;
	int r = drain(o);
	if (!r && o->nworkers) {
		r = wait_idle(o); /* flush means: in the file */
		if (r)
			o->err = r;
	}
	return r;
}

int cuptrace_output_close(struct cuptrace_output *o)
{
	if (!o)
		return 0;
	if (o->fd >= 0) {
		o->closing = 1;
		if (!o->err)
			drain(o);
		if (o->nworkers) {
			int e = wait_idle(o);
			if (e && !o->err)
				o->err = e;
		}
		stop_pool(o);
		if (!o->err && o->mode == CUPTRACE_COMPRESS_GZIP)
			gz_pump(o, NULL, 0, Z_FINISH);
		if (close(o->fd) && !o->err)
			o->err = -errno;
	}
	int err = o->err;
	if (o->gz_init)
		deflateEnd(&o->gz);
	free(o->buf);
	zctx_free(&o->inline_z);
	free(o);
	return err;
}

/* Exact once the output is flushed or closed; while workers run, a lower bound. */
uint64_t cuptrace_output_bytes(const struct cuptrace_output *o)
{
	return atomic_load(&o->written);
}

int cuptrace_compress_parse(const char *s)
{
	if (!strcmp(s, "none") || !strcmp(s, "plain"))
		return CUPTRACE_COMPRESS_NONE;
	if (!strcmp(s, "gzip") || !strcmp(s, "gz"))
		return CUPTRACE_COMPRESS_GZIP;
	if (!strcmp(s, "chunks") || !strcmp(s, "zlib"))
		return CUPTRACE_COMPRESS_CHUNKS;
	return -1;
}
