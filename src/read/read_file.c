/* Whole-file reads for the readers that work on memory (Perfetto, JSON). */
#include "read/read_internal.h"
#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int cuptrace_read_file_all(const char *path, uint8_t **out, size_t *outlen)
{
	uint8_t *buf = NULL;
	size_t len = 0, cap = 1 << 20;
	struct stat st;
	int fd, err = 0;

	*out = NULL;
	*outlen = 0;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
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
	*out = buf;
	*outlen = len;
	return 0;
}
