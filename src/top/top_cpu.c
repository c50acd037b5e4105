/* The tracer's own CPU, from /proc (cpu.h). */
#include "top/cpu.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* utime + stime (clock ticks) and the name of /proc/.../stat at path. 0 or -errno. */
static int stat_ticks(const char *path, unsigned long long *ticks, char *comm, size_t commlen)
{
	char buf[1024];
	FILE *f = fopen(path, "r");
	if (!f)
		return -errno;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	/* "pid (comm) state ppid ...": comm may hold spaces and ')', so from its last ')'. */
	char *open = strchr(buf, '('), *close = strrchr(buf, ')');
	if (!open || !close || close < open)
		return -EINVAL;
	size_t cl = (size_t)(close - open - 1);
	if (cl >= commlen)
		cl = commlen - 1;
	memcpy(comm, open + 1, cl);
	comm[cl] = 0;
	unsigned long long ut, st;
	/* After ')': state(3) ppid pgrp session tty_nr tpgid flags minflt cminflt majflt
	 * cmajflt utime(14) stime(15). */
	if (sscanf(close + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) !=
	    2)
		return -EINVAL;
	*ticks = ut + st;
	return 0;
}

int cuptrace_top_cpu_ns(pid_t pid, int named_only, int64_t *ns, int *nthreads)
{
	long hz = sysconf(_SC_CLK_TCK);
	char path[96], comm[64];
	unsigned long long ticks = 0, t;
	int count = 0, r;
	if (hz <= 0)
		hz = 100;
	if (!named_only) {
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
		if ((r = stat_ticks(path, &ticks, comm, sizeof(comm))))
			return r;
		count = 1;
	} else {
		snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
		DIR *d = opendir(path);
		if (!d)
			return -errno;
		struct dirent *e;
		while ((e = readdir(d))) {
			if (e->d_name[0] < '0' || e->d_name[0] > '9')
				continue;
			snprintf(path, sizeof(path), "/proc/%d/task/%.16s/stat", (int)pid,
			         e->d_name);
			if (stat_ticks(path, &t, comm, sizeof(comm)) ||
			    strncmp(comm, "cuptrace-", 9))
				continue; /* a thread that ended meanwhile, or the program's */
			ticks += t;
			count++;
		}
		closedir(d);
	}
	*ns = (int64_t)(ticks * (1000000000ull / (unsigned long long)hz));
	if (nthreads)
		*nthreads = count;
	return 0;
}
