/* top --job's descendant scan (src/top/proc.h) against a real process tree: a shell that starts
 * a shell and a sleep, the inner shell a sleep of its own: 3 descendants. What is found is checked
 * against the tree as the test built it: the processes' names, and each one's parent from /proc. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "top/proc.h"

static void comm_of(pid_t p, char *out, size_t n)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)p);
	FILE *f = fopen(path, "r");
	out[0] = 0;
	if (f) {
		if (fgets(out, (int)n, f))
			out[strcspn(out, "\n")] = 0;
		fclose(f);
	}
}

static pid_t ppid_of(pid_t p)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)p);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	char buf[512];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	char *q = strrchr(buf, ')');
	char st;
	int pp = -1;
	if (!q || sscanf(q + 1, " %c %d", &st, &pp) != 2)
		return -1;
	return pp;
}

static void test_tree(void)
{
	pid_t root = fork();
	if (root == 0) {
		execl("/bin/sh", "sh", "-c", "sh -c 'sleep 30 & wait' & sleep 30 & wait",
		      (char *)NULL);
		_exit(127);
	}
	CHECK(root > 0);
	/* The tree is built when its 3 descendants are there and each ran its program (a forked
	 * shell is named sh until it runs sleep): at most 5 s. */
	pid_t got[16];
	int n = 0, sleeps = 0, shells = 0, linked = 0;
	for (int i = 0; i < 500; i++) {
		n = cuptrace_top_descendants(root, got, 16);
		sleeps = shells = linked = 0;
		for (int k = 0; k < n && k < 16; k++) {
			char c[32];
			comm_of(got[k], c, sizeof(c));
			sleeps += !strcmp(c, "sleep");
			shells += !strcmp(c, "sh");
			/* Each one's parent is the root or another one found. */
			pid_t pp = ppid_of(got[k]);
			int ok = pp == root;
			for (int j = 0; j < n && j < 16; j++)
				ok |= pp == got[j];
			linked += ok;
		}
		if (n == 3 && sleeps == 2 && shells == 1)
			break;
		usleep(10000);
	}
	CHECK_EQ_INT(n, 3);
	for (int k = 0; k < n && k < 16; k++)
		CHECK(got[k] != root && got[k] != getpid());
	CHECK_EQ_INT(sleeps, 2);
	CHECK_EQ_INT(shells, 1);
	CHECK_EQ_INT(linked, 3);
	/* max smaller than the count: the count, max stored. */
	pid_t one[1];
	CHECK_EQ_INT(cuptrace_top_descendants(root, one, 1), 3);
	/* From the test itself: the root too. From a sleep: none. */
	pid_t mine[16];
	CHECK_EQ_INT(cuptrace_top_descendants(getpid(), mine, 16), 4);
	for (int i = 0; i < n && i < 16; i++) {
		char c[32];
		comm_of(got[i], c, sizeof(c));
		if (!strcmp(c, "sleep")) {
			CHECK_EQ_INT(cuptrace_top_descendants(got[i], mine, 16), 0);
			break;
		}
	}
	for (int i = 0; i < n && i < 16; i++)
		kill(got[i], SIGKILL);
	kill(root, SIGKILL);
	waitpid(root, NULL, 0);
	CHECK_EQ_INT(cuptrace_top_descendants(root, got, 16), 0);
}

TEST_MAIN({"tree", test_tree})
