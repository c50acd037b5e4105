/* The control channel (see control.h): a per-process Unix socket, its directory's checks, the
 * server thread, and the client that `cuptrace trigger` uses. */
#define _GNU_SOURCE
#include "control/control.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <sys/prctl.h>

#include "common/util.h"

struct cuptrace_control {
	int fd;
	int wake[2]; /* written to stop the thread */
	pthread_t thread;
	int have_thread;
	cuptrace_control_fn fn;
	cuptrace_control_hangup_fn hangup;
	void *ctx;
	int kept; /* the watched connection (-1: none); the server thread's */
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
};

/* A directory we may use: ours, a directory, no access for group or others. */
int cuptrace_control_private_dir(const char *d, char *err, size_t errn)
{
	struct stat st;
	if (lstat(d, &st)) {
		snprintf(err, errn, "%s: %s", d, strerror(errno));
		return -errno;
	}
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077)) {
		snprintf(err, errn,
		         "%s is not a private directory of this user (owner %u, mode %03o): "
		         "the control channel is not opened",
		         d, (unsigned)st.st_uid, (unsigned)(st.st_mode & 0777));
		return -EPERM;
	}
	return 0;
}

int cuptrace_control_dir(char *out, size_t n, char *err, size_t errn)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	int len;
	if (xdg && *xdg && cuptrace_control_private_dir(xdg, err, errn) == 0)
		len = snprintf(out, n, "%s/cuptrace", xdg);
	else
		len = snprintf(out, n, "/tmp/cuptrace-%u", (unsigned)geteuid());
	if (len < 0 || (size_t)len >= n) {
		snprintf(err, errn, "control directory name too long");
		return -ENAMETOOLONG;
	}
	if (mkdir(out, 0700) && errno != EEXIST) {
		snprintf(err, errn, "cannot create %s: %s", out, strerror(errno));
		return -errno;
	}
	return cuptrace_control_private_dir(out, err, errn);
}

int cuptrace_control_reply(int fd, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	int len = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (len < 0)
		return -EINVAL;
	if ((size_t)len > sizeof(line) - 2)
		len = (int)sizeof(line) - 2;
	line[len++] = '\n';
	for (int off = 0; off < len;) {
		ssize_t w = send(fd, line + off, (size_t)(len - off), MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		off += (int)w;
	}
	return 0;
}

/* One request line, read within a second (a client that connects and says nothing does not
 * hold the channel). */
static int read_request(int fd, char *buf, size_t n)
{
	size_t got = 0;
	while (got + 1 < n) {
		struct pollfd p = {fd, POLLIN, 0};
		if (poll(&p, 1, 1000) <= 0)
			return -ETIMEDOUT;
		ssize_t r = recv(fd, buf + got, n - 1 - got, 0);
		if (r <= 0)
			return r < 0 && errno == EINTR ? 0 : -EIO;
		got += (size_t)r;
		char *nl = memchr(buf, '\n', got);
		if (nl) {
			*nl = 0;
			return 0;
		}
	}
	return -E2BIG;
}

/* 1: the handler keeps fd (a watch). */
static int serve(struct cuptrace_control *c, int fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) || cred.uid != geteuid()) {
		cuptrace_control_reply(fd, "error: refused: not the user who runs this process");
		return 0;
	}
	char req[256];
	if (read_request(fd, req, sizeof(req))) {
		cuptrace_control_reply(fd, "error: no request line");
		return 0;
	}
	return c->fn(req, fd, c->ctx) == 1 && c->hangup;
}

/* The kept connection has something: anything the client sends is ignored; its end (EOF, a
 * reset) ends the watch. 1 when it ended. */
static int kept_ended(int fd, short revents)
{
	if (revents & (POLLHUP | POLLERR | POLLRDHUP))
		return 1;
	char b[256];
	ssize_t r = recv(fd, b, sizeof(b), MSG_DONTWAIT);
	return r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR);
}

static void *control_main(void *arg)
{
	/* Named cuptrace-*: `top` counts the tracer's own CPU by these names. */
	prctl(PR_SET_NAME, "cuptrace-ctl", 0, 0, 0);
	struct cuptrace_control *c = arg;
	for (;;) {
		struct pollfd p[3] = {
		    {c->fd, POLLIN, 0}, {c->wake[0], POLLIN, 0}, {c->kept, POLLIN | POLLRDHUP, 0}};
		if (poll(p, c->kept >= 0 ? 3 : 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[1].revents)
			break;
		if (c->kept >= 0 && p[2].revents && kept_ended(c->kept, p[2].revents)) {
			close(c->kept);
			c->kept = -1;
			c->hangup(c->ctx);
		}
		if (!(p[0].revents & POLLIN))
			continue;
		int fd = accept4(c->fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		if (serve(c, fd)) {
			/* The handler keeps a second one only when the first one's watch ended on
			 * its side (its window closed by the session): that client reads EOF. */
			if (c->kept >= 0)
				close(c->kept);
			c->kept = fd;
		} else {
			close(fd);
		}
	}
	return NULL;
}

struct cuptrace_control *cuptrace_control_start(long job, cuptrace_control_fn fn,
                                                cuptrace_control_hangup_fn hangup, void *ctx,
                                                char *err, size_t errn)
{
	char dir[160];
	if (cuptrace_control_dir(dir, sizeof(dir), err, errn))
		return NULL;
	struct cuptrace_control *c = calloc(1, sizeof(*c));
	if (!c) {
		snprintf(err, errn, "out of memory");
		return NULL;
	}
	c->fd = -1;
	c->kept = -1;
	c->wake[0] = c->wake[1] = -1;
	c->fn = fn;
	c->hangup = hangup;
	c->ctx = ctx;
	int len = snprintf(c->path, sizeof(c->path), "%s/j%ld.p%d.sock", dir, job, (int)getpid());
	if (len < 0 || (size_t)len >= sizeof(c->path)) {
		snprintf(err, errn, "socket path too long under %s", dir);
		goto fail;
	}
	unlink(c->path); /* a socket left by an earlier process of this pid */
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	memcpy(a.sun_path, c->path, (size_t)len + 1);
	/* Created 0600 from the start: no moment when another user could connect. */
	mode_t old = umask(0177);
	int b = c->fd >= 0 ? bind(c->fd, (struct sockaddr *)&a, sizeof(a)) : -1;
	umask(old);
	if (b || listen(c->fd, 8) || pipe2(c->wake, O_CLOEXEC)) {
		snprintf(err, errn, "cannot listen on %s: %s", c->path, strerror(errno));
		goto fail;
	}
	if (cuptrace_thread_start(&c->thread, control_main, c)) {
		snprintf(err, errn, "cannot start the control thread");
		goto fail;
	}
	c->have_thread = 1;
	return c;
fail:
	cuptrace_control_stop(c);
	return NULL;
}

const char *cuptrace_control_path(const struct cuptrace_control *c)
{
	return c ? c->path : "";
}

void cuptrace_control_stop(struct cuptrace_control *c)
{
	if (!c)
		return;
	if (c->have_thread) {
		ssize_t w = write(c->wake[1], "x", 1);
		(void)w;
		pthread_join(c->thread, NULL);
	}
	if (c->fd >= 0) {
		close(c->fd);
		unlink(c->path);
	}
	if (c->kept >= 0)
		close(c->kept); /* the client sees EOF: the process's watch ended */
	if (c->wake[0] >= 0)
		close(c->wake[0]);
	if (c->wake[1] >= 0)
		close(c->wake[1]);
	free(c);
}

/* ---- client ---- */

int cuptrace_control_find(pid_t pid, long job, char ***paths, char *err, size_t errn)
{
	*paths = NULL;
	char dir[160];
	int r = cuptrace_control_dir(dir, sizeof(dir), err, errn);
	if (r)
		return r;
	DIR *d = opendir(dir);
	if (!d) {
		snprintf(err, errn, "%s: %s", dir, strerror(errno));
		return -errno;
	}
	size_t n = 0, cap = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		long j;
		int p, used = 0;
		if (sscanf(e->d_name, "j%ld.p%d.sock%n", &j, &p, &used) != 2 || e->d_name[used])
			continue;
		if ((pid > 0 && p != pid) || (job > 0 && j != job))
			continue;
		/* A process that died without removing its socket: skip it (and tidy up). */
		if (kill(p, 0) && errno == ESRCH) {
			char stale[512];
			snprintf(stale, sizeof(stale), "%s/%s", dir, e->d_name);
			unlink(stale);
			continue;
		}
		void *np = cuptrace_grow(*paths, &cap, n + 1, sizeof(char *));
		if (!np)
			break;
		*paths = np;
		size_t len = strlen(dir) + strlen(e->d_name) + 2;
		char *s = malloc(len);
		if (!s)
			break;
		snprintf(s, len, "%s/%s", dir, e->d_name);
		(*paths)[n++] = s;
	}
	closedir(d);
	return (int)n;
}

static int64_t mono_ms(void)
{
	return cuptrace_now_ns(CLOCK_MONOTONIC) / 1000000;
}

int cuptrace_control_send(const char *path, const char *request, int timeout_ms, void *out)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		int e = -errno;
		close(fd);
		return e;
	}
	char line[300];
	int len = snprintf(line, sizeof(line), "%s\n", request);
	/* A process that refuses us says why and closes before reading: read its reply even
	 * when the request could not be sent whole. */
	if (send(fd, line, (size_t)len, MSG_NOSIGNAL) != len && errno != EPIPE &&
	    errno != ECONNRESET) {
		int e = -errno;
		close(fd);
		return e ? e : -EIO;
	}
	int64_t deadline = mono_ms() + timeout_ms;
	char buf[4096];
	int ret = 0;
	for (;;) {
		int64_t left = deadline - mono_ms();
		if (left <= 0) {
			ret = -ETIMEDOUT;
			break;
		}
		struct pollfd p = {fd, POLLIN, 0};
		int pr = poll(&p, 1, (int)(left > 60000 ? 60000 : left));
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr <= 0)
			continue;
		ssize_t r = recv(fd, buf, sizeof(buf), 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		fwrite(buf, 1, (size_t)r, (FILE *)out);
	}
	close(fd);
	return ret;
}

int cuptrace_control_watch(const char *path, const char *dir, int timeout_ms, char *reply, size_t n)
{
	snprintf(reply, n, "no reply");
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(reply, n, "socket: %s", strerror(errno));
		return -1;
	}
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	char line[600];
	int len = snprintf(line, sizeof(line), "watch %s\n", dir);
	if (len < 0 || (size_t)len >= sizeof(line) || (size_t)len > 255) {
		snprintf(reply, n, "directory name too long: %s", dir);
		close(fd);
		return -1;
	}
	if (connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		snprintf(reply, n, "cannot connect to %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	/* A refusal may come before the request was read whole: read the reply all the same. */
	if (send(fd, line, (size_t)len, MSG_NOSIGNAL) != len && errno != EPIPE &&
	    errno != ECONNRESET) {
		snprintf(reply, n, "cannot send to %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	int64_t deadline = mono_ms() + timeout_ms;
	size_t got = 0;
	char buf[1024];
	for (;;) {
		int64_t left = deadline - mono_ms();
		if (left <= 0) {
			snprintf(reply, n, "no reply from %s within %d ms", path, timeout_ms);
			close(fd);
			return -1;
		}
		struct pollfd p = {fd, POLLIN, 0};
		if (poll(&p, 1, (int)left) <= 0)
			continue;
		/* One byte at a time: what follows the first line is not ours to take. */
		ssize_t r = recv(fd, buf + got, 1, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0 || buf[got] == '\n' || got + 2 >= sizeof(buf)) {
			if (r > 0 && buf[got] != '\n')
				got++;
			buf[got] = 0;
			break;
		}
		got++;
	}
	snprintf(reply, n, "%s", got ? buf : "the process closed the connection");
	if (!strncmp(buf, "watching", 8) && got)
		return fd;
	close(fd);
	return -1;
}
