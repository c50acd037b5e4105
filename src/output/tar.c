/* ustar writer (see tar.h): one 512-byte header per member, its bytes padded to 512, and two
 * zero blocks at the end. Numbers are octal text, as POSIX.1-1988 lays them out. */
#include "output/tar.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int put_header(FILE *out, const char *name, long long size)
{
	unsigned char h[512];
	memset(h, 0, sizeof(h));
	if (strlen(name) > 99)
		return -ENAMETOOLONG;
	if (size < 0 || size >= 077777777777LL) /* 11 octal digits: 8 GiB */
		return -EFBIG;
	memcpy(h, name, strlen(name));              /* name[100] */
	snprintf((char *)h + 100, 8, "%07o", 0644); /* mode */
	snprintf((char *)h + 108, 8, "%07o", 0);    /* uid */
	snprintf((char *)h + 116, 8, "%07o", 0);    /* gid */
	char num[24];
	snprintf(num, sizeof(num), "%011llo", (unsigned long long)size);
	memcpy(h + 124, num, 12);
	snprintf(num, sizeof(num), "%011llo", (unsigned long long)time(NULL) & 077777777777ULL);
	memcpy(h + 136, num, 12);
	memset(h + 148, ' ', 8); /* the checksum counts its own field as spaces */
	h[156] = '0';            /* a regular file */
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	unsigned sum = 0;
	for (size_t i = 0; i < sizeof(h); i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	h[155] = ' ';
	return fwrite(h, 1, sizeof(h), out) == sizeof(h) ? 0 : -EIO;
}

static int put_file(FILE *out, const char *name, const char *file)
{
	FILE *in = fopen(file, "rb");
	if (!in)
		return -errno;
	int err = fseek(in, 0, SEEK_END) ? -errno : 0;
	long long size = err ? 0 : ftell(in);
	if (!err && (size < 0 || fseek(in, 0, SEEK_SET)))
		err = -EIO;
	if (!err)
		err = put_header(out, name, size);
	char buf[65536];
	long long left = size;
	while (!err && left > 0) {
		size_t k =
		    fread(buf, 1, left < (long long)sizeof(buf) ? (size_t)left : sizeof(buf), in);
		if (!k || fwrite(buf, 1, k, out) != k)
			err = -EIO;
		left -= (long long)k;
	}
	fclose(in);
	static const char zero[512];
	size_t pad = (size_t)((512 - size % 512) % 512);
	if (!err && pad && fwrite(zero, 1, pad, out) != pad)
		err = -EIO;
	return err;
}

int cuptrace_tar_write(const char *path, const char *const *names, const char *const *files,
                       size_t n)
{
	FILE *out = fopen(path, "wb");
	if (!out)
		return -errno;
	int err = 0;
	for (size_t i = 0; i < n && !err; i++)
		err = put_file(out, names[i], files[i]);
	static const char zero[1024];
	if (!err && fwrite(zero, 1, sizeof(zero), out) != sizeof(zero))
		err = -EIO;
	if (fclose(out) && !err)
		err = -errno;
	if (err)
		unlink(path);
	return err;
}
