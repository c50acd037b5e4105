/* The control channel (src/control/control.h): a request reaches the handler and its reply the
 * client; the directory and socket are private; another user is refused, by the file modes and,
 * where they are opened up, by the peer check. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "control/control.h"

static void handler(const char *req, int fd, void *ctx)
{
	(*(int *)ctx)++;
	cuptrace_control_reply(fd, "got: %s", req);
	cuptrace_control_reply(fd, "file /tmp/x.pftrace");
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
	struct cuptrace_control *c = cuptrace_control_start(77, handler, &calls, err, sizeof(err));
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
		    cuptrace_control_start(77, handler, &calls, err, sizeof(err));
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

TEST_MAIN({"channel", test_channel})
