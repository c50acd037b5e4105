/* The recorder's trace files (output/recfile.h): the names a run's processes take (no two write
 * one file), the partial file beside the target and its rename, what a failed write or an empty
 * run leaves, symbolic links, permissions, and the notes `record` finds after a killed process. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "output/recfile.h"

static char dir[1024]; /* short, so that names made from it fit PATH_MAX */

static void make_dir(void)
{
	if (dir[0])
		return;
	const char *t = getenv("CUPTRACE_TMP");
	snprintf(dir, sizeof(dir), "%s/recfile.XXXXXX", t && *t ? t : "/tmp");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		exit(1);
	}
}

/* dir/sub made empty (files only) and its path in out. */
static void fresh(const char *sub, char *out, size_t n)
{
	make_dir();
	snprintf(out, n, "%s/%s", dir, sub);
	DIR *d = opendir(out);
	struct dirent *e;
	while (d && (e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			unlinkat(dirfd(d), e->d_name, 0);
	if (d)
		closedir(d);
	mkdir(out, 0755);
}

static void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

/* The file's content (at most 255 bytes), "" if none, "(missing)" if it is not there. */
static const char *get(const char *path)
{
	static char buf[256];
	FILE *f = fopen(path, "r");
	if (!f)
		return "(missing)";
	size_t k = fread(buf, 1, sizeof(buf) - 1, f);
	buf[k] = 0;
	fclose(f);
	return buf;
}

/* Names in d (not . and ..), counted. */
static int entries(const char *d)
{
	int n = 0;
	DIR *h = opendir(d);
	struct dirent *e;
	while (h && (e = readdir(h)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	if (h)
		closedir(h);
	return n;
}

static void test_names(void)
{
	char d[2048], tmpl[PATH_MAX], want[PATH_MAX];
	fresh("names", d, sizeof(d));
	struct cuptrace_recname_env env = {0};
	int claimed = -1;
	snprintf(tmpl, sizeof(tmpl), "%s/run.pftrace", d);
	char *p = cuptrace_recfile_name(tmpl, 100, &env, &claimed);
	CHECK_EQ_STR(p, tmpl);
	CHECK_EQ_INT(claimed, 0);
	free(p);
	/* %p is the pid; %n stays for the windows. */
	snprintf(tmpl, sizeof(tmpl), "%s/run-%%p-%%n.pftrace", d);
	p = cuptrace_recfile_name(tmpl, 4242, &env, &claimed);
	snprintf(want, sizeof(want), "%s/run-4242-%%n.pftrace", d);
	CHECK_EQ_STR(p, want);
	free(p);
	p = cuptrace_recfile_name("none", 7, &env, &claimed);
	CHECK_EQ_STR(p, "none");
	free(p);
	/* A process of the command other than its root: NAME-PID.EXT. */
	snprintf(tmpl, sizeof(tmpl), "%s/run.pftrace.gz", d);
	env.root_pid = "100";
	p = cuptrace_recfile_name(tmpl, 100, &env, &claimed);
	CHECK_EQ_STR(p, tmpl);
	free(p);
	p = cuptrace_recfile_name(tmpl, 101, &env, &claimed);
	snprintf(want, sizeof(want), "%s/run-101.pftrace.gz", d);
	CHECK_EQ_STR(p, want);
	free(p);
	/* Names earlier images of this pid wrote: the next free one. */
	env.root_pid = NULL;
	char taken[3 * PATH_MAX];
	snprintf(taken, sizeof(taken), "/x/y.pftrace:%s:%s/run-55.pftrace.gz", tmpl, d);
	env.taken = taken;
	p = cuptrace_recfile_name(tmpl, 55, &env, &claimed);
	snprintf(want, sizeof(want), "%s/run-55-2.pftrace.gz", d);
	CHECK_EQ_STR(p, want);
	free(p);
}

static void test_claims(void)
{
	char d[2048], claims[2048], tmpl[PATH_MAX], want[PATH_MAX];
	fresh("claims_out", d, sizeof(d));
	fresh("claims", claims, sizeof(claims));
	struct cuptrace_recname_env env = {.claims = claims};
	int claimed = -1;
	/* Three processes arrive at one name (two CUDA processes of one rank with %r, say). */
	snprintf(tmpl, sizeof(tmpl), "%s/job-0.pftrace", d);
	char *a = cuptrace_recfile_name(tmpl, 10, &env, &claimed);
	CHECK_EQ_STR(a, tmpl);
	CHECK_EQ_INT(claimed, 0);
	char *b = cuptrace_recfile_name(tmpl, 11, &env, &claimed);
	snprintf(want, sizeof(want), "%s/job-0-11.pftrace", d);
	CHECK_EQ_STR(b, want);
	char *c = cuptrace_recfile_name(tmpl, 12, &env, &claimed);
	snprintf(want, sizeof(want), "%s/job-0-12.pftrace", d);
	CHECK_EQ_STR(c, want);
	/* One claim per name taken, no file made in the output directory. */
	CHECK_EQ_INT(entries(claims), 3);
	CHECK_EQ_INT(entries(d), 0);
	free(a);
	free(b);
	free(c);
	/* A file per window: claimed when the window opens, not here. */
	snprintf(tmpl, sizeof(tmpl), "%s/w-%%n.pftrace", d);
	a = cuptrace_recfile_name(tmpl, 13, &env, &claimed);
	CHECK_EQ_STR(a, tmpl);
	CHECK_EQ_INT(entries(claims), 3);
	free(a);
}

/* Without the run's directory (a process outliving record): the name itself, made with O_EXCL;
 * a file from before the run is replaced, one from this run is not. */
static void test_claims_by_file(void)
{
	char d[2048], tmpl[PATH_MAX], want[PATH_MAX], start[32];
	fresh("claimfile", d, sizeof(d));
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	/* A second before now: file times come from a coarser clock than clock_gettime's, so a file
	 * made just after now may be stamped a few ms before it. */
	snprintf(start, sizeof(start), "%lld",
	         (long long)(now.tv_sec - 1) * 1000000000LL + now.tv_nsec);
	struct cuptrace_recname_env env = {.record_start = start};
	snprintf(tmpl, sizeof(tmpl), "%s/old.pftrace", d);
	put(tmpl, "an old trace");
	struct timespec t[2] = {{now.tv_sec - 3600, 0}, {now.tv_sec - 3600, 0}};
	CHECK_EQ_INT(utimensat(AT_FDCWD, tmpl, t, 0), 0);
	int claimed = -1;
	char *p = cuptrace_recfile_name(tmpl, 20, &env, &claimed);
	CHECK_EQ_STR(p, tmpl);
	CHECK_EQ_INT(claimed, 0);
	CHECK_EQ_STR(get(tmpl), "an old trace"); /* naming it writes nothing */
	free(p);
	snprintf(tmpl, sizeof(tmpl), "%s/new.pftrace", d);
	p = cuptrace_recfile_name(tmpl, 21, &env, &claimed);
	CHECK_EQ_STR(p, tmpl);
	CHECK_EQ_INT(claimed, 1);
	CHECK_EQ_STR(get(tmpl), ""); /* the empty file that claims it */
	free(p);
	p = cuptrace_recfile_name(tmpl, 22, &env, &claimed);
	snprintf(want, sizeof(want), "%s/new-22.pftrace", d);
	CHECK_EQ_STR(p, want);
	CHECK_EQ_INT(claimed, 1);
	free(p);
}

/* The partial file's name, from the target's, independently of recfile.c. */
static void partial_name(const char *target, int pid, char *out, size_t n)
{
	const char *slash = strrchr(target, '/');
	snprintf(out, n, "%.*s/.%s.cuptrace-%d.partial", (int)(slash - target), target, slash + 1,
	         pid);
}

static void test_commit_and_discard(void)
{
	char d[2048], target[PATH_MAX], want[PATH_MAX];
	fresh("commit", d, sizeof(d));
	snprintf(target, sizeof(target), "%s/run.pftrace", d);
	put(target, "old trace");
	struct cuptrace_recfile f;
	CHECK_EQ_INT(cuptrace_recfile_begin(&f, target, NULL, NULL), 0);
	partial_name(target, (int)getpid(), want, sizeof(want));
	CHECK_EQ_STR(f.tmp, want);
	CHECK_EQ_INT(f.aside, 1);
	CHECK_EQ_STR(get(f.tmp), "");
	CHECK_EQ_STR(get(target), "old trace"); /* untouched until the trace is complete */
	put(f.tmp, "new trace");
	CHECK_EQ_INT(cuptrace_recfile_commit(&f, 0), 0);
	CHECK_EQ_STR(get(target), "new trace");
	CHECK_EQ_STR(get(want), "(missing)");
	CHECK_EQ_INT(entries(d), 1);
	/* Twice, or discard after commit: nothing more happens. */
	CHECK_EQ_INT(cuptrace_recfile_commit(&f, 0), 0);
	cuptrace_recfile_discard(&f);
	CHECK_EQ_STR(get(target), "new trace");
	/* A run that recorded nothing: the old file as it was. */
	CHECK_EQ_INT(cuptrace_recfile_begin(&f, target, NULL, NULL), 0);
	put(f.tmp, "half");
	cuptrace_recfile_discard(&f);
	CHECK_EQ_STR(get(target), "new trace");
	CHECK_EQ_INT(entries(d), 1);
	/* A target that did not exist: made by the rename, with the usual permissions. */
	snprintf(target, sizeof(target), "%s/fresh.json", d);
	CHECK_EQ_INT(cuptrace_recfile_begin(&f, target, NULL, NULL), 0);
	CHECK_EQ_STR(get(target), "(missing)");
	put(f.tmp, "[]");
	CHECK_EQ_INT(cuptrace_recfile_commit(&f, 0), 0);
	CHECK_EQ_STR(get(target), "[]");
	mode_t um = umask(022);
	umask(um);
	struct stat st;
	CHECK(!stat(target, &st) && (st.st_mode & 07777) == (0644 & ~um));
	/* Two partial files for one target in one process (a C API session after another): each
	 * its own. */
	struct cuptrace_recfile g;
	CHECK_EQ_INT(cuptrace_recfile_begin(&f, target, NULL, NULL), 0);
	CHECK_EQ_INT(cuptrace_recfile_begin(&g, target, NULL, NULL), 0);
	CHECK(strcmp(f.tmp, g.tmp) != 0);
	cuptrace_recfile_discard(&f);
	cuptrace_recfile_discard(&g);
	CHECK_EQ_INT(entries(d), 2);
	/* A relative name, and a program that changes directory before it ends. */
	char cwd[PATH_MAX];
	CHECK(getcwd(cwd, sizeof(cwd)) != NULL);
	CHECK_EQ_INT(chdir(d), 0);
	CHECK_EQ_INT(cuptrace_recfile_begin(&f, "rel.pftrace", NULL, NULL), 0);
	put(f.tmp, "relative");
	CHECK_EQ_INT(chdir("/"), 0);
	CHECK_EQ_INT(cuptrace_recfile_commit(&f, 0), 0);
	snprintf(target, sizeof(target), "%s/rel.pftrace", d);
	CHECK_EQ_STR(get(target), "relative");
	CHECK_EQ_INT(chdir(cwd), 0);
}

static void test_write_failed(void)
{
	char d[2048], target[PATH_MAX], kept[PATH_MAX];
	fresh("failed", d, sizeof(d));
	snprintf(target, sizeof(target), "%s/run.pftrace", d);
	put(target, "whole old trace");
	struct cuptrace_recfile f;
	CHECK_EQ_INT(cuptrace_recfile_begin(&f, target, NULL, NULL), 0);
	put(f.tmp, "cut new");
	/* A write failed (a full disk): the old trace stays, the cut one keeps its partial name. */
	CHECK_EQ_INT(cuptrace_recfile_commit(&f, 1), 1);
	CHECK_EQ_STR(get(target), "whole old trace");
	snprintf(kept, sizeof(kept), "%s", f.tmp);
	CHECK_EQ_STR(get(kept), "cut new");
	unlink(kept);
	/* Nothing (or an empty file: a claim) there before: the cut trace is what there is. */
	snprintf(target, sizeof(target), "%s/empty.pftrace", d);
	put(target, "");
	CHECK_EQ_INT(cuptrace_recfile_begin(&f, target, NULL, NULL), 0);
	put(f.tmp, "cut new");
	CHECK_EQ_INT(cuptrace_recfile_commit(&f, 1), 0);
	CHECK_EQ_STR(get(target), "cut new");
	CHECK_EQ_INT(entries(d), 2);
}

static void test_links_and_modes(void)
{
	char d[2048], real_dir[2048], real[PATH_MAX], link[PATH_MAX];
	fresh("link", d, sizeof(d));
	fresh("link_real", real_dir, sizeof(real_dir));
	snprintf(real, sizeof(real), "%s/real.pftrace", real_dir);
	snprintf(link, sizeof(link), "%s/named.pftrace", d);
	put(real, "old");
	CHECK_EQ_INT(chmod(real, 0600), 0);
	char rel[PATH_MAX];
	snprintf(rel, sizeof(rel), "../link_real/real.pftrace");
	CHECK_EQ_INT(symlink(rel, link), 0);
	struct cuptrace_recfile f;
	CHECK_EQ_INT(cuptrace_recfile_begin(&f, link, NULL, NULL), 0);
	struct stat st, sr;
	CHECK(!stat(f.target, &st) && !stat(real, &sr) && st.st_ino == sr.st_ino);
	/* Beside the file, not the link. */
	char tdir[PATH_MAX];
	snprintf(tdir, sizeof(tdir), "%.*s", (int)(strrchr(f.tmp, '/') - f.tmp), f.tmp);
	CHECK(!stat(tdir, &st) && !stat(real_dir, &sr) && st.st_ino == sr.st_ino);
	CHECK(!stat(f.tmp, &st) && (st.st_mode & 07777) == 0600); /* private stays private */
	put(f.tmp, "new");
	CHECK_EQ_INT(cuptrace_recfile_commit(&f, 0), 0);
	CHECK(!lstat(link, &st) && S_ISLNK(st.st_mode));
	CHECK_EQ_STR(get(link), "new");
	CHECK(!stat(real, &st) && (st.st_mode & 07777) == 0600);
	/* A read-only old file: the partial file is written, the new one read-only again. */
	CHECK_EQ_INT(chmod(real, 0444), 0);
	CHECK_EQ_INT(cuptrace_recfile_begin(&f, link, NULL, NULL), 0);
	int fd = open(f.tmp, O_WRONLY | O_TRUNC);
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
	CHECK_EQ_INT(cuptrace_recfile_commit(&f, 0), 0);
	CHECK(!stat(real, &st) && (st.st_mode & 07777) == 0444);
	/* Standard output and devices are written straight. */
	CHECK_EQ_INT(cuptrace_recfile_begin(&f, "-", NULL, NULL), 0);
	CHECK_EQ_STR(f.tmp, "-");
	CHECK_EQ_INT(f.aside, 0);
	CHECK_EQ_INT(cuptrace_recfile_commit(&f, 0), 0);
	CHECK_EQ_INT(cuptrace_recfile_begin(&f, "/dev/null", NULL, NULL), 0);
	CHECK_EQ_STR(f.tmp, "/dev/null");
	cuptrace_recfile_discard(&f);
	CHECK(!stat("/dev/null", &st) && S_ISCHR(st.st_mode));
	CHECK_EQ_INT(cuptrace_recfile_begin(&f, d, NULL, NULL), -EISDIR);
}

/* Field 22 of /proc/PID/stat, read here without recfile.c. */
static void start_of(int pid, char *out, size_t n)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	snprintf(out, n, "?");
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	size_t k = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[k] = 0;
	char *p = strrchr(buf, ')');
	unsigned long long v;
	if (p && sscanf(p + 2,
	                "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d "
	                "%*d %llu",
	                &v) == 1)
		snprintf(out, n, "%llu", v);
}

struct seen {
	int n;
	struct cuptrace_recfile_left l[4];
};

static void collect(const struct cuptrace_recfile_left *l, void *ctx)
{
	struct seen *s = ctx;
	if (s->n < 4)
		s->l[s->n] = *l;
	s->n++;
}

static void test_notes(void)
{
	char d[2048], run[2048], target[PATH_MAX], note[PATH_MAX];
	fresh("notes_out", d, sizeof(d));
	fresh("notes_run", run, sizeof(run));
	snprintf(target, sizeof(target), "%s/run.pftrace", d);
	struct cuptrace_recfile f;
	CHECK_EQ_INT(cuptrace_recfile_begin(&f, target, run, NULL), 0);
	/* The note: TMP, TARGET and this process's start time, NUL-terminated. */
	CHECK_EQ_INT(entries(run), 1);
	CHECK(!strncmp(f.note, run, strlen(run)));
	snprintf(note, sizeof(note), "%s", f.note);
	char buf[3 * PATH_MAX], start[32];
	int fd = open(note, O_RDONLY);
	ssize_t k = fd >= 0 ? read(fd, buf, sizeof(buf)) : -1;
	if (fd >= 0)
		close(fd);
	start_of((int)getpid(), start, sizeof(start));
	size_t a = strlen(f.tmp) + 1, b = strlen(target) + 1;
	CHECK_EQ_INT(k, (ssize_t)(a + b + strlen(start) + 1));
	if (k > 0) {
		CHECK_EQ_STR(buf, f.tmp);
		CHECK_EQ_STR(buf + a, target);
		CHECK_EQ_STR(buf + a + b, start);
	}
	CHECK(cuptrace_recfile_proc_alive((int)getpid(), start));
	CHECK(cuptrace_recfile_proc_alive((int)getpid(), NULL));
	CHECK(!cuptrace_recfile_proc_alive((int)getpid(), "1")); /* a pid used again */
	/* Found while this process writes it: alive, so still its own. */
	struct seen s = {0};
	CHECK_EQ_INT(cuptrace_recfile_leftovers(run, collect, &s), 1);
	CHECK_EQ_INT(s.n, 1);
	CHECK_EQ_INT(s.l[0].pid, (int)getpid());
	CHECK_EQ_INT(s.l[0].alive, 1);
	CHECK_EQ_STR(s.l[0].tmp, f.tmp);
	CHECK_EQ_STR(s.l[0].target, target);
	CHECK_EQ_STR(s.l[0].note, note);
	/* Put in place: the note goes; nothing left to find. */
	CHECK_EQ_INT(cuptrace_recfile_commit(&f, 0), 0);
	CHECK_EQ_INT(entries(run), 0);
	CHECK_EQ_STR(get(target), "");
	unlink(target);
	memset(&s, 0, sizeof(s));
	CHECK_EQ_INT(cuptrace_recfile_leftovers(run, collect, &s), 0);
	/* A process killed while it writes (SIGKILL: no exit path at all): first seen as a zombie
	 * (dead, not yet reaped), then reaped. */
	int pfd[2];
	CHECK_EQ_INT(pipe(pfd), 0);
	pid_t pid = fork();
	if (pid == 0) {
		struct cuptrace_recfile c;
		if (cuptrace_recfile_begin(&c, target, run, NULL) == 0)
			put(c.tmp, "cut");
		char ok = 1;
		ssize_t w = write(pfd[1], &ok, 1);
		(void)w;
		raise(SIGKILL);
		_exit(3);
	}
	close(pfd[1]);
	char ok = 0;
	ssize_t r = read(pfd[0], &ok, 1);
	CHECK_EQ_INT(r, 1);
	close(pfd[0]);
	/* Dead once its /proc entry says so (a zombie until reaped). */
	for (int i = 0; i < 200 && cuptrace_recfile_proc_alive((int)pid, NULL); i++)
		usleep(10000);
	memset(&s, 0, sizeof(s));
	CHECK_EQ_INT(cuptrace_recfile_leftovers(run, collect, &s), 1);
	CHECK_EQ_INT(s.l[0].pid, (int)pid);
	CHECK_EQ_INT(s.l[0].alive, 0);
	CHECK_EQ_STR(s.l[0].target, target);
	CHECK_EQ_STR(get(s.l[0].tmp), "cut");
	int st;
	waitpid(pid, &st, 0);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	CHECK_EQ_STR(get(target), "(missing)"); /* only record puts it in place */
	/* Its file gone (put in place by someone): the stale note is removed. */
	unlink(s.l[0].tmp);
	memset(&s, 0, sizeof(s));
	CHECK_EQ_INT(cuptrace_recfile_leftovers(run, collect, &s), 0);
	CHECK_EQ_INT(entries(run), 0);
	CHECK(cuptrace_recfile_leftovers("/nonexistent/run", collect, &s) < 0);
}

/* A directory that takes no new file, with a writable trace in it: written in place. Root
 * writes anywhere, so this is only seen as another user. */
static void test_no_new_file(void)
{
	if (geteuid() == 0) {
		printf("test_no_new_file: running as root (directory permissions do not apply): "
		       "skipped\n");
		return;
	}
	char d[2048], target[PATH_MAX];
	fresh("readonly", d, sizeof(d));
	snprintf(target, sizeof(target), "%s/run.pftrace", d);
	put(target, "old");
	CHECK_EQ_INT(chmod(d, 0555), 0);
	struct cuptrace_recfile f;
	int in_place = 0;
	CHECK_EQ_INT(cuptrace_recfile_begin(&f, target, NULL, &in_place), 0);
	CHECK_EQ_INT(in_place, 1);
	CHECK_EQ_STR(f.tmp, target);
	CHECK_EQ_INT(f.aside, 0);
	CHECK_EQ_INT(cuptrace_recfile_commit(&f, 0), 0);
	snprintf(target, sizeof(target), "%s/none.pftrace", d);
	CHECK_EQ_INT(cuptrace_recfile_begin(&f, target, NULL, &in_place), -EACCES);
	chmod(d, 0755);
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* Last: the test's directory goes (after a failure too, so that runs do not pile up). */
static void test_cleanup(void)
{
	if (dir[0])
		CHECK_EQ_INT(nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS), 0);
}

TEST_MAIN(T(test_names), T(test_claims), T(test_claims_by_file), T(test_commit_and_discard),
          T(test_write_failed), T(test_links_and_modes), T(test_notes), T(test_no_new_file),
          T(test_cleanup))
