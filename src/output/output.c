/* Output byte sinks (see output.h). Files are written with write(2), never stdio, so what was
 * flushed is in the kernel's hands and survives SIGKILL of the traced process.
 *
 * CHUNKS mode compresses on a thread of its own: zlib took a fifth of the writer thread's time,
 * and the writer must keep up with the traced program. The caller fills one buffer while the
 * compressor works on the other; a full buffer waits for the compressor (memory stays at two
 * chunks). The compressor owns the file descriptor's writes while it runs; errors come back
 * through the sticky error the caller reads. */
#include "output.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#define MAX_CHUNK (480u * 1024u) /* Perfetto asks that a compressed_packets packet stay < 512 KB */

struct cuptrace_output {
	int fd;
	enum cuptrace_compress mode;
	int err;
	int flush_ms;
	int level;
	size_t chunk_bytes;
	uint8_t *buf; /* pending bytes: a chunk's records (CHUNKS) or plain/gzip output */
	size_t len, cap;
	uint8_t *zbuf; /* CHUNKS: scratch for one compressed chunk */
	size_t zcap;
	z_stream gz;   /* GZIP */
	int gz_init;
	_Atomic uint64_t written; /* advanced by the compressor thread, read by the caller */
	uint64_t last_flush_ms;
	unsigned writes_since_check;
	/* CHUNKS compressor thread */
	pthread_t thread;
	int threaded;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint8_t *job;      /* a full chunk handed over, NULL when the compressor is idle */
	size_t job_len;
	uint8_t *spare;    /* the buffer the caller gets back when the compressor takes one */
	int stop;
	int async_err;     /* set by the compressor, read under lock */
};

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Returns 0 or a negative errno; callers record it (this runs on either thread). */
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

static size_t put_varint(uint8_t *p, uint64_t v)
{
	size_t n = 0;
	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}

/* One chunk: TracePacket{compressed_packets(50) = zlib(records)}, framed as Trace.packet.
 * Runs on the compressor thread (or inline where there is none). */
static int emit_chunk(struct cuptrace_output *o, const uint8_t *buf, size_t len)
{
	if (!len)
		return 0;
	uLongf zlen = compressBound(len);
	if (zlen + 32 > o->zcap) {
		uint8_t *z = realloc(o->zbuf, zlen + 32);
		if (!z)
			return -ENOMEM;
		o->zbuf = z;
		o->zcap = zlen + 32;
	}
	uint8_t *payload = o->zbuf + 24; /* room for the two headers in front */
	if (compress2(payload, &zlen, buf, len, o->level) != Z_OK)
		return -EIO;
	uint8_t inner[12], outer[12];
	size_t ni = 0, no = 0;
	inner[ni++] = 0x92; /* field 50, wire type 2 */
	inner[ni++] = 0x03;
	ni += put_varint(inner + ni, zlen);
	outer[no++] = 0x0A; /* Trace.packet */
	no += put_varint(outer + no, ni + zlen);
	uint8_t *start = payload - ni - no;
	memcpy(start, outer, no);
	memcpy(start + no, inner, ni);
	return write_all(o, start, no + ni + zlen);
}

static void *compressor_main(void *arg)
{
	struct cuptrace_output *o = arg;
	pthread_mutex_lock(&o->lock);
	for (;;) {
		while (!o->job && !o->stop)
			pthread_cond_wait(&o->cond, &o->lock);
		if (!o->job)
			break;
		uint8_t *job = o->job;
		size_t len = o->job_len;
		pthread_mutex_unlock(&o->lock);
		/* o->err, zbuf, written and fd belong to this thread while a job runs. */
		int r = o->async_err ? o->async_err : emit_chunk(o, job, len);
		pthread_mutex_lock(&o->lock);
		if (r && !o->async_err)
			o->async_err = r;
		o->spare = job;
		o->job = NULL;
		pthread_cond_broadcast(&o->cond);
	}
	pthread_mutex_unlock(&o->lock);
	return NULL;
}

/* Waits until the compressor is idle. Returns its sticky error. */
static int wait_idle(struct cuptrace_output *o)
{
	pthread_mutex_lock(&o->lock);
	while (o->job)
		pthread_cond_wait(&o->cond, &o->lock);
	int e = o->async_err;
	pthread_mutex_unlock(&o->lock);
	return e;
}

/* Hands the current chunk to the compressor and takes the spare buffer. */
static int hand_over(struct cuptrace_output *o)
{
	if (!o->len)
		return 0;
	pthread_mutex_lock(&o->lock);
	while (o->job)
		pthread_cond_wait(&o->cond, &o->lock);
	int e = o->async_err;
	if (!e) {
		o->job = o->buf;
		o->job_len = o->len;
		o->buf = o->spare;
		o->spare = NULL;
		o->len = 0;
		pthread_cond_broadcast(&o->cond);
	}
	pthread_mutex_unlock(&o->lock);
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
	} while (o->gz.avail_out == 0 || (flush == Z_FINISH));
	return 0;
}

static int drain(struct cuptrace_output *o)
{
	int r = 0;
	switch (o->mode) {
	case CUPTRACE_COMPRESS_CHUNKS:
		if (o->threaded) {
			r = hand_over(o);
		} else {
			r = emit_chunk(o, o->buf, o->len);
			o->len = 0;
			if (r)
				o->err = r;
		}
		break;
	case CUPTRACE_COMPRESS_NONE:
		r = write_all(o, o->buf, o->len);
		o->len = 0;
		if (r)
			o->err = r;
		break;
	case CUPTRACE_COMPRESS_GZIP:
		/* Z_SYNC_FLUSH is not used: it costs size, and a cut gzip file does not load anyway. */
		r = gz_pump(o, o->buf, o->len, Z_NO_FLUSH);
		o->len = 0;
		break;
	}
	o->last_flush_ms = now_ms();
	return r;
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
	o->chunk_bytes = 256u * 1024u;
	o->flush_ms = 1000;
	o->level = 6;
	if (opts && opts->sz >= sizeof(*opts)) {
		if (opts->chunk_bytes)
			o->chunk_bytes = opts->chunk_bytes;
		if (opts->flush_ms)
			o->flush_ms = opts->flush_ms;
		if (opts->level)
			o->level = opts->level;
	}
	if (o->chunk_bytes > MAX_CHUNK)
		o->chunk_bytes = MAX_CHUNK;
	if (o->chunk_bytes < 1024)
		o->chunk_bytes = 1024;
	o->cap = mode == CUPTRACE_COMPRESS_CHUNKS ? o->chunk_bytes : 64u * 1024u;
	o->buf = malloc(o->cap);
	if (!o->buf)
		goto fail_nomem;
	if (mode == CUPTRACE_COMPRESS_GZIP) {
		if (deflateInit2(&o->gz, o->level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
			goto fail_nomem;
		o->gz_init = 1;
	}
	o->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (o->fd < 0) {
		int e = errno;
		cuptrace_output_close(o);
		errno = e;
		return NULL;
	}
	o->last_flush_ms = now_ms();
	if (mode == CUPTRACE_COMPRESS_CHUNKS) {
		o->spare = malloc(o->cap);
		pthread_mutex_init(&o->lock, NULL);
		pthread_cond_init(&o->cond, NULL);
		/* The compressor never takes the traced program's signals. */
		sigset_t all, old;
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		o->threaded = o->spare && !pthread_create(&o->thread, NULL, compressor_main, o);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		if (!o->threaded) {
			/* No thread: compress inline (slower, same bytes). */
			pthread_mutex_destroy(&o->lock);
			pthread_cond_destroy(&o->cond);
		}
	}
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
			/* A record bigger than a chunk: in CHUNKS mode it becomes a chunk of its own,
			 * compressed here once the compressor is idle (the two chunk buffers keep
			 * their size). */
			int e;
			if (o->mode == CUPTRACE_COMPRESS_CHUNKS) {
				e = o->threaded ? wait_idle(o) : 0;
				if (!e)
					e = emit_chunk(o, data, len);
			} else if (o->mode == CUPTRACE_COMPRESS_NONE) {
				e = write_all(o, data, len);
			} else {
				return gz_pump(o, data, len, Z_NO_FLUSH);
			}
			return e ? (o->err = e) : 0;
		}
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
	if (!r && o->threaded)
		r = o->err = wait_idle(o); /* flush means: in the file */
	return r;
}

int cuptrace_output_close(struct cuptrace_output *o)
{
	if (!o)
		return 0;
	int err = 0;
	if (o->fd >= 0) {
		if (!o->err)
			drain(o);
		if (o->threaded) {
			int e = wait_idle(o);
			if (e && !o->err)
				o->err = e;
			pthread_mutex_lock(&o->lock);
			o->stop = 1;
			pthread_cond_broadcast(&o->cond);
			pthread_mutex_unlock(&o->lock);
			pthread_join(o->thread, NULL);
			pthread_mutex_destroy(&o->lock);
			pthread_cond_destroy(&o->cond);
			o->threaded = 0;
		}
		if (!o->err && o->mode == CUPTRACE_COMPRESS_GZIP)
			gz_pump(o, NULL, 0, Z_FINISH);
		if (close(o->fd) && !o->err)
			o->err = -errno;
	}
	err = o->err;
	if (o->gz_init)
		deflateEnd(&o->gz);
	free(o->buf);
	free(o->spare);
	free(o->zbuf);
	free(o);
	return err;
}

/* Exact once the output is closed or flushed; while the compressor runs, a lower bound. */
uint64_t cuptrace_output_bytes(const struct cuptrace_output *o)
{
	return o->written;
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
