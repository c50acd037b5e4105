/* The recorder's trace files: names, partial files beside the target, and what a killed
 * process left (see recfile.h). */
#define _GNU_SOURCE
#include "output/recfile.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "output/outfile.h"

struct cuptrace_recname_env cuptrace_recname_env_get(void)
{
	return (struct cuptrace_recname_env){
	    .root_pid = getenv("CUPTRACE_ROOT_PID"),
	    .taken = getenv("CUPTRACE_TAKEN"),
	    .claims = getenv("CUPTRACE_CLAIMS"),
	    .record_start = getenv("CUPTRACE_RECORD_START"),
	};
}

/* ---- names ---- */

/* Is path among the ':'-separated names of list (CUPTRACE_TAKEN: earlier images' traces)? */
static int in_list(const char *list, const char *path)
{
	size_t n = strlen(path);
	while (list && *list) {
		const char *end = strchr(list, ':');
		size_t len = end ? (size_t)(end - list) : strlen(list);
		if (len == n && !memcmp(list, path, n))
			return 1;
		list = end ? end + 1 : NULL;
	}
	return 0;
}

/* Did another process of this run already take path? Of two processes that arrive at one name
 * (ranks' own CUDA subprocesses share their rank, so "%r" repeats) only one keeps it. `record`
 * makes a directory for the run's claims: a name is claimed by creating, with O_EXCL, the entry
 * named by its hash there; a file from before the run is an old trace, to be replaced. Without
 * the directory (a process outliving `record`), the name itself is claimed with O_EXCL, and a
 * file already there counts as this run's when its mtime is past the run's start. That check let
 * two processes take one name on a GPU machine (2 runs in 3, cause not found), which is why the
 * directory comes first. */
static int claimed_by_run(const char *path, const struct cuptrace_recname_env *env, int *claimed)
{
	*claimed = 0;
	if (env->claims && *env->claims) {
		char claim[PATH_MAX];
		snprintf(claim, sizeof(claim), "%s/%016llx", env->claims,
		         (unsigned long long)cuptrace_hash_bytes(path, strlen(path)));
		int cfd = open(claim, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
		if (cfd >= 0) {
			close(cfd);
			return 0;
		}
		if (errno == EEXIST)
			return 1;
		/* The directory is gone or unusable: as without it. */
	}
	if (!env->record_start || !*env->record_start)
		return 0;
	int fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
	if (fd >= 0) {
		close(fd);
		*claimed = 1;
		return 0;
	}
	struct stat sb;
	/* Nanoseconds: a quick rerun within one second must still replace the last run's. */
	return errno == EEXIST && !stat(path, &sb) &&
	       (long long)sb.st_mtim.tv_sec * 1000000000LL + sb.st_mtim.tv_nsec >=
	           atoll(env->record_start);
}

char *cuptrace_recfile_name(const char *tmpl, int pid, const struct cuptrace_recname_env *env,
                            int *claimed)
{
	*claimed = 0;
	int none = !strcmp(tmpl, "none"); /* no file (--otlp only): no name to claim */
	/* Children of the traced command (a launcher's workers, subprocesses) write traces of
	 * their own: without %p in the name they would take the command's name. */
	char *own = NULL;
	if (env->root_pid && !none && atoi(env->root_pid) != pid && !strstr(tmpl, "%p") &&
	    !strstr(tmpl, "%r"))
		own = cuptrace_path_with_tag(tmpl, "%p");
	char *path = cuptrace_path_expand(own ? own : tmpl, pid);
	free(own);
	/* An exec'd image has its predecessor's pid, so its predecessor's name: the first of
	 * NAME-<pid>.EXT, NAME-<pid>-2.EXT, ... that no earlier image wrote. */
	int per_window = path && strstr(path, "%n") != NULL; /* names claimed later */
	for (int k = 1;
	     path && !none && !per_window &&
	     (in_list(env->taken, path) || claimed_by_run(path, env, claimed)) && k < 1000;
	     k++) {
		char tag[48];
		if (k == 1)
			snprintf(tag, sizeof(tag), "%d", pid);
		else
			snprintf(tag, sizeof(tag), "%d-%d", pid, k);
		own = cuptrace_path_with_tag(tmpl, tag);
		char *next = own ? cuptrace_path_expand(own, pid) : NULL;
		free(own);
		free(path);
		path = next;
	}
	return path;
}

/* ---- processes ---- */

/* From /proc/PID/stat (pid 0: self): the state letter and field 22, the start time in clock
 * ticks since boot. 0, or -1 if there is no such process. */
static int proc_stat(int pid, char *state, char *start, size_t n)
{
	char path[64], buf[1024];
	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	else
		snprintf(path, sizeof(path), "/proc/self/stat");
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t k = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (k <= 0)
		return -1;
	buf[k] = 0;
	/* The name (field 2) may hold spaces and parentheses: the fields start after its last ')'.
	 */
	char *p = strrchr(buf, ')');
	if (!p || p[1] != ' ')
		return -1;
	p += 2;
	*state = *p;
	/* Field 3 is the state: field 22 is 19 fields on. */
	for (int field = 3; field < 22 && p; field++) {
		p = strchr(p, ' ');
		p = p ? p + 1 : NULL;
	}
	size_t len = p ? strcspn(p, " \n") : 0;
	snprintf(start, n, "%.*s", (int)len, p ? p : "");
	return 0;
}

int cuptrace_recfile_proc_alive(int pid, const char *start)
{
	char state, now[32];
	if (pid <= 0 || proc_stat(pid, &state, now, sizeof(now)))
		return 0;
	if (state == 'Z' || state == 'X' || state == 'x')
		return 0; /* dead, not yet reaped */
	return !start || !*start || !strcmp(start, now);
}

/* ---- partial files ---- */

/* Notes f's partial file in the run's directory. Without a note (the directory is gone: the
 * process outlived `record`) the trace is only put in place by this process itself. */
static void write_note(struct cuptrace_recfile *f, const char *run_dir)
{
	static atomic_uint serial;
	char state, start[32] = "";
	if (proc_stat(0, &state, start, sizeof(start)))
		start[0] = 0;
	if ((size_t)snprintf(f->note, sizeof(f->note), "%s/partial-%d-%u", run_dir, (int)getpid(),
	                     atomic_fetch_add(&serial, 1) + 1) >= sizeof(f->note)) {
		f->note[0] = 0;
		return;
	}
	size_t a = strlen(f->tmp) + 1, b = strlen(f->target) + 1, c = strlen(start) + 1;
	char *buf = malloc(a + b + c);
	int fd = buf ? open(f->note, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600) : -1;
	if (fd < 0) {
		free(buf);
		f->note[0] = 0;
		return;
	}
	memcpy(buf, f->tmp, a);
	memcpy(buf + a, f->target, b);
	memcpy(buf + a + b, start, c);
	/* One write: a process killed now leaves the note whole or not at all, in practice. */
	if (write(fd, buf, a + b + c) != (ssize_t)(a + b + c)) {
		unlink(f->note);
		f->note[0] = 0;
	}
	close(fd);
	free(buf);
}

static void drop_note(struct cuptrace_recfile *f)
{
	if (f->note[0])
		unlink(f->note);
	f->note[0] = 0;
}

int cuptrace_recfile_begin(struct cuptrace_recfile *f, const char *path, const char *run_dir,
                           int *in_place)
{
	memset(f, 0, sizeof(*f));
	f->old_mode = -1;
	if (in_place)
		*in_place = 0;
	if (!strcmp(path, "-")) {
		strcpy(f->target, "-");
		strcpy(f->tmp, "-");
		return 0;
	}
	/* Absolute: the rename comes at the program's end, maybe after it changed directory. */
	char abs[PATH_MAX];
	if (path[0] != '/') {
		char cwd[PATH_MAX];
		if (!getcwd(cwd, sizeof(cwd)))
			return -errno;
		if ((size_t)snprintf(abs, sizeof(abs), "%s/%s", cwd, path) >= sizeof(abs))
			return -ENAMETOOLONG;
		path = abs;
	}
	int r = cuptrace_path_resolve(path, f->target, sizeof(f->target));
	if (r)
		return r;
	struct stat st;
	int exists = !stat(f->target, &st);
	mode_t mode;
	if (exists) {
		if (S_ISDIR(st.st_mode))
			return -EISDIR;
		/* Not a regular file (a FIFO, /dev/null, a terminal): nothing to protect, and a
		 * rename would replace the device node. Written straight. */
		if (!S_ISREG(st.st_mode)) {
			snprintf(f->tmp, sizeof(f->tmp), "%s", f->target);
			return 0;
		}
		/* The old file's permissions (a private trace stays private), writable by its
		 * owner while it is written; the rest at the rename. */
		f->old_mode = (int)(st.st_mode & 07777);
		mode = (mode_t)f->old_mode | S_IWUSR;
	} else {
		mode_t um = umask(022);
		umask(um);
		mode = 0644 & ~um; /* what the trace was always created with */
	}
	const char *slash = strrchr(f->target, '/');
	int dlen = slash ? (int)(slash - f->target) + 1 : 0;
	const char *base = f->target + dlen;
	int fd = -1, err = 0;
	/* A hidden name in the same directory (a rename does not cross file systems), short enough
	 * for NAME_MAX whatever the base name; another number where one is there already (a
	 * partial file an earlier process of this pid left, which stays for `record` to find). */
	for (int k = 1; k < 100 && fd < 0; k++) {
		int len =
		    k == 1 ? snprintf(f->tmp, sizeof(f->tmp), "%.*s.%.200s.cuptrace-%d.partial",
		                      dlen, f->target, base, (int)getpid())
		           : snprintf(f->tmp, sizeof(f->tmp), "%.*s.%.200s.cuptrace-%d-%d.partial",
		                      dlen, f->target, base, (int)getpid(), k);
		if ((size_t)len >= sizeof(f->tmp))
			return -ENAMETOOLONG;
		fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		err = fd < 0 ? -errno : 0;
		if (fd < 0 && err != -EEXIST)
			break;
	}
	if (fd < 0) {
		/* A directory that takes no new file, with a file in it that may be written: as
		 * before partial files, the trace is written in place. */
		if ((err == -EACCES || err == -EPERM) && exists && !access(f->target, W_OK)) {
			snprintf(f->tmp, sizeof(f->tmp), "%s", f->target);
			f->in_place = 1;
			if (in_place)
				*in_place = 1;
			return 0;
		}
		return err;
	}
	if (fchmod(fd, mode)) {
		/* Keeps 0600: less than asked, never more. */
	}
	close(fd);
	f->aside = 1;
	f->live = 1;
	if (run_dir && *run_dir)
		write_note(f, run_dir);
	return 0;
}

int cuptrace_recfile_commit(struct cuptrace_recfile *f, int write_failed)
{
	if (!f->live)
		return 0;
	f->live = 0;
	struct stat st;
	/* A write that failed (a full disk) does not replace a trace that was whole. */
	if (write_failed && !stat(f->target, &st) && S_ISREG(st.st_mode) && st.st_size > 0) {
		drop_note(f);
		return 1;
	}
	if (f->old_mode >= 0 && !(f->old_mode & S_IWUSR))
		chmod(f->tmp, (mode_t)f->old_mode);
	/* No fsync: this runs on the traced program's exit path, where it could take long; ext4
	 * writes a file renamed over another before the rename (auto_da_alloc). */
	int err = rename(f->tmp, f->target) ? -errno : 0;
	drop_note(f);
	return err;
}

void cuptrace_recfile_discard(struct cuptrace_recfile *f)
{
	if (f->live)
		unlink(f->tmp);
	else if (f->in_place)
		unlink(f->tmp); /* as before partial files: an unwanted trace is not left */
	f->live = 0;
	f->in_place = 0;
	drop_note(f);
}

/* ---- what `record` finds ---- */

static int is_note(const struct dirent *e)
{
	return !strncmp(e->d_name, "partial-", 8);
}

/* Reads note into l: 0, or -1 if it is not whole. */
static int read_note(int dfd, const char *name, struct cuptrace_recfile_left *l, char *start,
                     size_t n)
{
	char buf[2 * PATH_MAX + 64];
	int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t k = read(fd, buf, sizeof(buf));
	close(fd);
	if (k <= 0)
		return -1;
	const char *parts[3];
	size_t at = 0;
	for (int i = 0; i < 3; i++) {
		const char *end = memchr(buf + at, 0, (size_t)k - at);
		if (!end)
			return -1;
		parts[i] = buf + at;
		at = (size_t)(end - buf) + 1;
		if (i < 2 && at >= (size_t)k)
			return -1;
	}
	if (!parts[0][0] || !parts[1][0] ||
	    (size_t)snprintf(l->tmp, sizeof(l->tmp), "%s", parts[0]) >= sizeof(l->tmp) ||
	    (size_t)snprintf(l->target, sizeof(l->target), "%s", parts[1]) >= sizeof(l->target))
		return -1;
	snprintf(start, n, "%s", parts[2]);
	return 0;
}

int cuptrace_recfile_leftovers(const char *run_dir,
                               void (*fn)(const struct cuptrace_recfile_left *l, void *ctx),
                               void *ctx)
{
	struct dirent **names = NULL;
	int n = scandir(run_dir, &names, is_note, alphasort);
	if (n < 0)
		return -errno;
	int dfd = open(run_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int found = 0;
	for (int i = 0; i < n; i++) {
		struct cuptrace_recfile_left l;
		char start[32];
		memset(&l, 0, sizeof(l));
		struct stat st;
		if (dfd >= 0 && !read_note(dfd, names[i]->d_name, &l, start, sizeof(start)) &&
		    !lstat(l.tmp, &st) && S_ISREG(st.st_mode)) {
			snprintf(l.note, sizeof(l.note), "%s/%s", run_dir, names[i]->d_name);
			l.pid = atoi(names[i]->d_name + 8);
			l.alive = cuptrace_recfile_proc_alive(l.pid, start);
			fn(&l, ctx);
			found++;
		} else if (dfd >= 0) {
			unlinkat(dfd, names[i]->d_name, 0); /* put in place or removed already */
		}
		free(names[i]);
	}
	free(names);
	if (dfd >= 0)
		close(dfd);
	return found;
}
