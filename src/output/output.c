/* Output byte sinks (see output.h). Files are written with write(2), never stdio, so what was
 * flushed is in the kernel's hands and survives SIGKILL of the traced process. */
#include "output.h"

#include <errno.h>
#include <fcntl.h>
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
	uint64_t written;
	uint64_t last_flush_ms;
	unsigned writes_since_check;
};

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int write_all(struct cuptrace_output *o, const void *p, size_t n)
{
	const uint8_t *b = p;
	while (n) {
		ssize_t w = write(o->fd, b, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return o->err = -errno;
		}
		b += w;
		n -= (size_t)w;
		o->written += (uint64_t)w;
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

/* One chunk: TracePacket{compressed_packets(50) = zlib(records)}, framed as Trace.packet. */
static int emit_chunk(struct cuptrace_output *o)
{
	if (!o->len)
		return 0;
	uLongf zlen = compressBound(o->len);
	if (zlen + 32 > o->zcap) {
		uint8_t *z = realloc(o->zbuf, zlen + 32);
		if (!z)
			return o->err = -ENOMEM;
		o->zbuf = z;
		o->zcap = zlen + 32;
	}
	uint8_t *payload = o->zbuf + 24; /* room for the two headers in front */
	if (compress2(payload, &zlen, o->buf, o->len, o->level) != Z_OK)
		return o->err = -EIO;
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
	o->len = 0;
	return write_all(o, start, no + ni + zlen);
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
		if (have && write_all(o, tmp, have))
			return o->err;
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
		r = emit_chunk(o);
		break;
	case CUPTRACE_COMPRESS_NONE:
		r = write_all(o, o->buf, o->len);
		o->len = 0;
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
			/* A record bigger than a chunk: in CHUNKS mode it becomes a chunk of its own. */
			if (o->mode == CUPTRACE_COMPRESS_CHUNKS) {
				uint8_t *b = realloc(o->buf, len);
				if (!b)
					return o->err = -ENOMEM;
				o->buf = b;
				o->cap = len;
			} else if (o->mode == CUPTRACE_COMPRESS_NONE) {
				return write_all(o, data, len);
			} else {
				return gz_pump(o, data, len, Z_NO_FLUSH);
			}
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
	return drain(o);
}

int cuptrace_output_close(struct cuptrace_output *o)
{
	if (!o)
		return 0;
	int err = 0;
	if (o->fd >= 0) {
		if (!o->err)
			drain(o);
		if (!o->err && o->mode == CUPTRACE_COMPRESS_GZIP)
			gz_pump(o, NULL, 0, Z_FINISH);
		if (close(o->fd) && !o->err)
			o->err = -errno;
	}
	err = o->err;
	if (o->gz_init)
		deflateEnd(&o->gz);
	free(o->buf);
	free(o->zbuf);
	free(o);
	return err;
}

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
