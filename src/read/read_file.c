/* Whole-file reads for the readers that work on memory (Perfetto, JSON). */
#include "read/read_file.h"
#include "common/log.h"

#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

int cuptrace_read_file_all(const char *path, uint8_t **out, size_t *outlen)
{
	uint8_t *buf = NULL;
	size_t len = 0, cap = 1 << 20;
	struct stat st;
	int fd, err = 0;

	*out = NULL;
	*outlen = 0;
	/* "-": standard input, left open for whoever else reads it. */
	if (!strcmp(path, "-"))
		fd = dup(0);
	else
		fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		cuptrace_err("%s: %s", path, strerror(errno));
		return err;
	}
	if (!fstat(fd, &st) && S_ISREG(st.st_mode) && st.st_size > 0)
		cap = (size_t)st.st_size + 1; /* + 1: EOF shows without a second allocation */
	for (;;) {
		if (len == cap || !buf) {
			size_t ncap = buf ? cap * 2 : cap;
			uint8_t *p = ncap > cap || !buf ? realloc(buf, ncap) : NULL;
			if (!p) {
				err = -ENOMEM;
				cuptrace_err("%s: out of memory reading it", path);
				goto out;
			}
			buf = p;
			cap = ncap;
		}
		ssize_t n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = -errno;
			cuptrace_err("%s: %s", path, strerror(errno));
			goto out;
		}
		if (!n)
			break;
		len += (size_t)n;
	}
out:
	close(fd);
	if (err) {
		free(buf);
		return err;
	}
	if (len == cap) { /* no spare byte: a file that grew while read */
		uint8_t *p = realloc(buf, len + 1);
		if (!p) {
			free(buf);
			cuptrace_err("%s: out of memory reading it", path);
			return -ENOMEM;
		}
		buf = p;
	}
	buf[len] = 0;
	*out = buf;
	*outlen = len;
	return 0;
}

int cuptrace_gunzip(const uint8_t *in, size_t n, size_t max, uint8_t **out, size_t *outn,
                    enum cuptrace_gz_end *end)
{
	const uint8_t *in_end = in + n;
	z_stream z;
	uint8_t *buf = NULL;
	size_t len = 0, cap = 0;

	*out = NULL;
	*outn = 0;
	*end = CUPTRACE_GZ_CORRUPT;
	memset(&z, 0, sizeof(z));
	if (inflateInit2(&z, 15 + 16) != Z_OK)
		return -ENOMEM;
	z.next_in = (uint8_t *)in;
	for (;;) {
		if (len == cap) {
			if (len >= max) {
				*end = CUPTRACE_GZ_LIMIT;
				break;
			}
			/* Text inflates ~5-20x: start near that, then double, up to max. */
			size_t ncap = cap ? cap * 2 : n < 4096 ? 16384 : n > max / 4 ? max : n * 4;
			if (ncap > max || ncap < cap)
				ncap = max;
			uint8_t *p = realloc(buf, ncap + 1);
			if (!p) {
				inflateEnd(&z);
				free(buf);
				return -ENOMEM;
			}
			buf = p;
			cap = ncap;
		}
		size_t in_left = (size_t)(in_end - z.next_in), out_left = cap - len;
		z.avail_in = (uInt)(in_left > UINT_MAX ? UINT_MAX : in_left);
		z.next_out = buf + len;
		z.avail_out = (uInt)(out_left > UINT_MAX ? UINT_MAX : out_left);
		uInt before = z.avail_out;
		int rc = inflate(&z, Z_NO_FLUSH);
		len += before - z.avail_out;
		if (rc == Z_STREAM_END) {
			/* Another member may follow; anything else after the last is garbage. */
			if (z.next_in == in_end) {
				*end = CUPTRACE_GZ_COMPLETE;
				break;
			}
			if (in_end - z.next_in < 2 || z.next_in[0] != 0x1f || z.next_in[1] != 0x8b)
				break;
			inflateReset(&z);
		} else if (rc == Z_BUF_ERROR && z.next_in == in_end) {
			*end = CUPTRACE_GZ_CUT; /* no progress for want of input: a cut member */
			break;
		} else if (rc != Z_OK && rc != Z_BUF_ERROR) {
			break; /* corrupt */
		}
	}
	inflateEnd(&z);
	if (!buf && !(buf = malloc(1)))
		return -ENOMEM;
	buf[len] = 0;
	*out = buf;
	*outn = len;
	return 0;
}
