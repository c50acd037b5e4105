/* Outputs written aside and renamed into place (see outfile.h). */
#include "output/outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The outfiles between begin and commit or abort, for cuptrace_outfile_abort_all. Written by
 * the one thread that owns them, read by a signal handler: a slot is set only once its tmp name
 * is complete, and cleared before the name could change. */
#define MAX_LIVE 16
static struct cuptrace_outfile *volatile live_files[MAX_LIVE];

static void track(struct cuptrace_outfile *o, int on)
{
	for (int i = 0; i < MAX_LIVE; i++)
		if (on ? !live_files[i] : live_files[i] == o) {
			live_files[i] = on ? o : NULL;
			return;
		}
}

int cuptrace_same_file(const char *a, const char *b)
{
	struct stat sa, sb;
	if (!strcmp(a, "-") || !strcmp(b, "-"))
		return 0;
	return !stat(a, &sa) && !stat(b, &sb) && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

int cuptrace_output_is_input(const char *path, const char *const *inputs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (cuptrace_same_file(path, inputs[i]))
			return (int)i;
	return -1;
}

int cuptrace_path_resolve(const char *path, char *out, size_t n)
{
	char cur[PATH_MAX], link[PATH_MAX];
	if ((size_t)snprintf(cur, sizeof(cur), "%s", path) >= sizeof(cur))
		return -ENAMETOOLONG;
	for (int hops = 0; hops < 40; hops++) {
		struct stat st;
		if (lstat(cur, &st) || !S_ISLNK(st.st_mode)) {
			if ((size_t)snprintf(out, n, "%s", cur) >= n)
				return -ENAMETOOLONG;
			return 0;
		}
		ssize_t k = readlink(cur, link, sizeof(link) - 1);
		if (k < 0)
			return -errno;
		link[k] = 0;
		if (link[0] == '/') {
			memcpy(cur, link, (size_t)k + 1);
			continue;
		}
		/* Relative to the directory holding the link. */
		char *slash = strrchr(cur, '/');
		size_t dlen = slash ? (size_t)(slash - cur) + 1 : 0;
		if (dlen + (size_t)k + 1 > sizeof(cur))
			return -ENAMETOOLONG;
		memmove(cur + dlen, link, (size_t)k + 1);
	}
	return -ELOOP;
}

int cuptrace_outfile_begin(struct cuptrace_outfile *o, const char *path)
{
	memset(o, 0, sizeof(*o));
	if (!strcmp(path, "-")) {
		strcpy(o->tmp, "-");
		strcpy(o->target, "-");
		return 0;
	}
	int r = cuptrace_path_resolve(path, o->target, sizeof(o->target));
	if (r)
		return r;
	struct stat st;
	if (!stat(o->target, &st)) {
		if (S_ISDIR(st.st_mode))
			return -EISDIR;
		/* Not a regular file (a FIFO, /dev/null, a terminal): nothing to protect, and a
		 * rename would replace the device node. Written straight. */
		if (!S_ISREG(st.st_mode)) {
			snprintf(o->tmp, sizeof(o->tmp), "%s", o->target);
			return 0;
		}
		o->mode = (int)(st.st_mode & 07777); /* the replacement keeps the old file's */
	} else {
		mode_t um = umask(022);
		umask(um);
		o->mode = (int)(0666 & ~um);
	}
	const char *slash = strrchr(o->target, '/');
	int dlen = slash ? (int)(slash - o->target) + 1 : 0;
	const char *base = o->target + dlen;
	/* A hidden name in the same directory (a rename does not cross file systems), short
	 * enough for NAME_MAX whatever the base name. */
	if ((size_t)snprintf(o->tmp, sizeof(o->tmp), "%.*s.%.200s.cuptrace-XXXXXX", dlen, o->target,
	                     base) >= sizeof(o->tmp))
		return -ENAMETOOLONG;
	int fd = mkstemp(o->tmp);
	if (fd < 0)
		return -errno;
	if (fchmod(fd, (mode_t)o->mode)) {
		/* Keeps mkstemp's 0600: less than asked, never more. */
	}
	close(fd);
	o->live = 1;
	track(o, 1);
	return 0;
}

int cuptrace_outfile_commit(struct cuptrace_outfile *o)
{
	if (!o->live)
		return 0;
	int err = 0;
	/* The bytes on disk before the name moves: a crash just after leaves a whole file. */
	int fd = open(o->tmp, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fsync(fd))
		err = -errno;
	if (fd >= 0)
		close(fd);
	if (!err && rename(o->tmp, o->target))
		err = -errno;
	if (err) {
		cuptrace_outfile_abort(o);
		return err;
	}
	track(o, 0);
	o->live = 0;
	return 0;
}

void cuptrace_outfile_abort(struct cuptrace_outfile *o)
{
	if (!o->live)
		return;
	track(o, 0);
	unlink(o->tmp);
	o->live = 0;
}

void cuptrace_outfile_abort_all(void)
{
	for (int i = 0; i < MAX_LIVE; i++) {
		struct cuptrace_outfile *o = live_files[i];
		if (o && o->live)
			unlink(o->tmp);
	}
}
