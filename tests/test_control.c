/* The control channel (src/control/control.h): a request reaches the handler and its reply the
 * client; the directory and socket are private; another user is refused, by the file modes and,
 * where they are opened up, by the peer check. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "control/control.h"

static int handler(const char *req, int fd, void *ctx)
{
	(*(int *)ctx)++;
	cuptrace_control_reply(fd, "got: %s", req);
	cuptrace_control_reply(fd, "file /tmp/x.pftrace");
	return 0;
}

/* Runs the request as user nobody in a child; returns what the child saw (0: connect refused,
 * 1: an "error: refused" reply, 2: served, 3: could not become nobody). */
static int as_nobody(const char *path)
{
	pid_t p = fork();
	if (p == 0) {
		if (setgid(65534) || setuid(65534))
			_exit(3);
		char *out = NULL;
		size_t len = 0;
		FILE *m = open_memstream(&out, &len);
		int r = cuptrace_control_send(path, "status", 2000, m);
		fclose(m);
		if (r) {
			if (getenv("CUPTRACE_TEST_DEBUG"))
				fprintf(stderr, "as nobody: %s\n", strerror(-r));
			_exit(0);
		}
		_exit(out && strstr(out, "error: refused") ? 1 : 2);
	}
	int st = 0;
	waitpid(p, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 4;
}

static void test_channel(void)
{
	char tmpl[] = "/tmp/cuptrace-ctl-XXXXXX";
	char *base = mkdtemp(tmpl);
	CHECK(base != NULL);
	setenv("XDG_RUNTIME_DIR", base, 1);
	int calls = 0;
	char err[300] = "";
	struct cuptrace_control *c =
	    cuptrace_control_start(77, handler, NULL, &calls, err, sizeof(err));
	CHECK(c != NULL);
	if (!c) {
		fprintf(stderr, "%s\n", err);
		return;
	}
	char want[512];
	snprintf(want, sizeof(want), "%s/cuptrace/j77.p%d.sock", base, (int)getpid());
	CHECK_EQ_STR(cuptrace_control_path(c), want);

	struct stat st;
	CHECK_EQ_INT(stat(want, &st), 0);
	CHECK(S_ISSOCK(st.st_mode));
	CHECK_EQ_INT(st.st_mode & 0777, 0600);
	char dir[400];
	snprintf(dir, sizeof(dir), "%s/cuptrace", base);
	CHECK_EQ_INT(stat(dir, &st), 0);
	CHECK_EQ_INT(st.st_mode & 0777, 0700);

	char **paths;
	CHECK_EQ_INT(cuptrace_control_find(getpid(), 0, &paths, err, sizeof(err)), 1);
	CHECK_EQ_STR(paths[0], want);
	free(paths[0]);
	free(paths);
	CHECK_EQ_INT(cuptrace_control_find(0, 77, &paths, err, sizeof(err)), 1);
	free(paths[0]);
	free(paths);
	CHECK_EQ_INT(cuptrace_control_find(0, 78, &paths, err, sizeof(err)), 0);
	free(paths);

	char *out = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&out, &len);
	CHECK_EQ_INT(cuptrace_control_send(want, "open 2000000000 0", 5000, m), 0);
	fclose(m);
	CHECK_EQ_STR(out, "got: open 2000000000 0\nfile /tmp/x.pftrace\n");
	CHECK_EQ_INT(calls, 1);
	free(out);

	if (geteuid() == 0) {
		/* The modes keep another user out... */
		CHECK_EQ_INT(as_nobody(want), 0);
		/* ...and where someone opened them up, the peer check still does. */
		chmod(base, 0755);
		chmod(dir, 0755);
		chmod(want, 0777);
		CHECK_EQ_INT(as_nobody(want), 1);
		CHECK_EQ_INT(calls, 1);
		/* A directory open to others is refused for new sockets. */
		chmod(base, 0700);
		struct cuptrace_control *c2 =
		    cuptrace_control_start(77, handler, NULL, &calls, err, sizeof(err));
		CHECK(c2 == NULL);
		cuptrace_control_stop(c2);
		CHECK(strstr(err, "not a private directory") != NULL);
		chmod(dir, 0700);
		chmod(base, 0700);
	} else {
		printf("test_control: not root: the other-user checks are skipped\n");
	}

	cuptrace_control_stop(c);
	CHECK(access(want, F_OK) != 0); /* removed */
	rmdir(dir);
	rmdir(base);
	unsetenv("XDG_RUNTIME_DIR");
}

/* ---- watch: a kept connection, its hang-up ---- */

/* A stub of the library's side (collect_window.c): one watch at a time; the server thread
 * writes, the test reads: atomics. */
struct watch_stub {
	atomic_int watching, hangups, requests;
	char dir[256];
};

static int watch_handler(const char *req, int fd, void *ctx)
{
	struct watch_stub *w = ctx;
	atomic_fetch_add(&w->requests, 1);
	if (strncmp(req, "watch ", 6)) {
		cuptrace_control_reply(fd, "got: %s%s", req,
		                       atomic_load(&w->watching) ? " (watched)" : "");
		return 0;
	}
	if (atomic_load(&w->watching)) {
		cuptrace_control_reply(fd, "error: watched already");
		return 0;
	}
	snprintf(w->dir, sizeof(w->dir), "%s", req + 6);
	atomic_store(&w->watching, 1);
	cuptrace_control_reply(fd, "watching: into %s", req + 6);
	return 1;
}

static void watch_hangup(void *ctx)
{
	struct watch_stub *w = ctx;
	atomic_store(&w->watching, 0);
	atomic_fetch_add(&w->hangups, 1);
}

/* Waits up to 3 s for *v to reach want. */
static int wait_for(atomic_int *v, int want)
{
	for (int i = 0; i < 300 && atomic_load(v) != want; i++)
		usleep(10000);
	return atomic_load(v);
}

static char *send_req(const char *path, const char *req)
{
	char *out = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&out, &len);
	int r = cuptrace_control_send(path, req, 3000, m);
	fclose(m);
	if (r)
		fprintf(stderr, "send %s: %s\n", req, strerror(-r));
	return out;
}

static void test_watch(void)
{
	char tmpl[] = "/tmp/cuptrace-ctl-XXXXXX";
	char *base = mkdtemp(tmpl);
	CHECK(base != NULL);
	setenv("XDG_RUNTIME_DIR", base, 1);
	static struct watch_stub w;
	char err[300] = "";
	struct cuptrace_control *c =
	    cuptrace_control_start(0, watch_handler, watch_hangup, &w, err, sizeof(err));
	CHECK(c != NULL);
	if (!c)
		return;
	char path[300];
	snprintf(path, sizeof(path), "%s", cuptrace_control_path(c));
	char reply[512];
	int fd = cuptrace_control_watch(path, "/tmp/some dir", 3000, reply, sizeof(reply));
	CHECK(fd >= 0);
	CHECK_EQ_STR(reply, "watching: into /tmp/some dir");
	CHECK_EQ_STR(w.dir, "/tmp/some dir");
	CHECK_EQ_INT(atomic_load(&w.watching), 1);

	/* Held open, the server goes on serving others: a status, and a second watch refused. */
	char *out = send_req(path, "status");
	CHECK_EQ_STR(out, "got: status (watched)\n");
	free(out);
	int fd2 = cuptrace_control_watch(path, "/tmp/other", 3000, reply, sizeof(reply));
	CHECK_EQ_INT(fd2, -1);
	CHECK_EQ_STR(reply, "error: watched already");
	CHECK_EQ_INT(atomic_load(&w.hangups), 0);

	/* Whatever the client sends while watching is ignored; its hang-up ends the watch. */
	CHECK_EQ_INT((int)write(fd, "x\n", 2), 2);
	usleep(50000);
	CHECK_EQ_INT(atomic_load(&w.hangups), 0);
	close(fd);
	CHECK_EQ_INT(wait_for(&w.hangups, 1), 1);
	CHECK_EQ_INT(atomic_load(&w.watching), 0);
	out = send_req(path, "status");
	CHECK_EQ_STR(out, "got: status\n");
	free(out);

	/* A client killed while watching: the kernel closes its end, the same hang-up. */
	int pfd[2];
	CHECK_EQ_INT(pipe(pfd), 0);
	pid_t p = fork();
	if (p == 0) {
		int f = cuptrace_control_watch(path, "/tmp/child", 3000, reply, sizeof(reply));
		char b = f >= 0 ? 'y' : 'n';
		ssize_t k = write(pfd[1], &b, 1);
		(void)k;
		pause();
		_exit(0);
	}
	char b = 0;
	CHECK_EQ_INT((int)read(pfd[0], &b, 1), 1);
	CHECK_EQ_INT(b, 'y');
	CHECK_EQ_INT(atomic_load(&w.watching), 1);
	kill(p, SIGKILL);
	waitpid(p, NULL, 0);
	CHECK_EQ_INT(wait_for(&w.hangups, 2), 2);
	close(pfd[0]);
	close(pfd[1]);

	/* The library's side ended a watch by itself (its window closed): a new watch is kept
	 * instead, and the old client reads EOF; no hang-up call for either. */
	int old = cuptrace_control_watch(path, "/tmp/old", 3000, reply, sizeof(reply));
	CHECK(old >= 0);
	atomic_store(&w.watching, 0);
	fd = cuptrace_control_watch(path, "/tmp/last", 3000, reply, sizeof(reply));
	CHECK(fd >= 0);
	CHECK_EQ_STR(w.dir, "/tmp/last");
	char one[8];
	CHECK_EQ_INT((int)read(old, one, sizeof(one)), 0);
	close(old);
	CHECK_EQ_INT(atomic_load(&w.hangups), 2);

	/* The process's end closes a kept connection: the client reads EOF; no hang-up call
	 * (the session's end closes its windows itself). */
	cuptrace_control_stop(c);
	char buf[8];
	CHECK_EQ_INT((int)read(fd, buf, sizeof(buf)), 0);
	close(fd);
	CHECK_EQ_INT(atomic_load(&w.hangups), 2);

	/* No such socket: the reason, no connection. */
	CHECK_EQ_INT(cuptrace_control_watch(path, "/tmp/x", 1000, reply, sizeof(reply)), -1);
	CHECK(strstr(reply, "cannot connect") != NULL);
	char dir[400];
	snprintf(dir, sizeof(dir), "%s/cuptrace", base);
	rmdir(dir);
	rmdir(base);
	unsetenv("XDG_RUNTIME_DIR");
}

/* The check of a watch directory: private, ours, a directory. */
static void test_private_dir(void)
{
	char tmpl[] = "/tmp/cuptrace-pd-XXXXXX";
	char *d = mkdtemp(tmpl);
	CHECK(d != NULL);
	char err[300];
	CHECK_EQ_INT(cuptrace_control_private_dir(d, err, sizeof(err)), 0);
	chmod(d, 0750);
	CHECK_EQ_INT(cuptrace_control_private_dir(d, err, sizeof(err)), -EPERM);
	CHECK(strstr(err, "not a private directory") != NULL);
	chmod(d, 0700);
	char link[400];
	snprintf(link, sizeof(link), "%s.link", d);
	CHECK_EQ_INT(symlink(d, link), 0);
	CHECK_EQ_INT(cuptrace_control_private_dir(link, err, sizeof(err)), -EPERM);
	unlink(link);
	CHECK_EQ_INT(cuptrace_control_private_dir("/nonexistent-cuptrace", err, sizeof(err)),
	             -ENOENT);
	rmdir(d);
}

TEST_MAIN({"channel", test_channel}, {"watch", test_watch}, {"private_dir", test_private_dir})
