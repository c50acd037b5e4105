/* Descendants of a process from /proc (proc.h): one pass over /proc/[0-9]* reading each
 * process's parent, then a walk down from the root. */
#include "top/proc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The parent of pid from /proc/PID/stat: the field after the state, after the last ')' (the
 * command name may hold spaces and parentheses). -1: gone or unreadable. */
static pid_t parent_of(const char *pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%s/stat", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	char *p = strrchr(buf, ')');
	char state;
	int ppid;
	if (!p || sscanf(p + 1, " %c %d", &state, &ppid) != 2)
		return -1;
	return (pid_t)ppid;
}

struct pp {
	pid_t pid, ppid;
};

int cuptrace_top_descendants(pid_t root, pid_t *out, size_t max)
{
	DIR *d = opendir("/proc");
	if (!d)
		return -errno;
	struct pp *all = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		if (*end || pid <= 0)
			continue;
		pid_t pp = parent_of(e->d_name);
		if (pp < 0)
			continue;
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 256;
			struct pp *a = realloc(all, nc * sizeof(*a));
			if (!a) {
				free(all);
				closedir(d);
				return -ENOMEM;
			}
			all = a;
			cap = nc;
		}
		all[n++] = (struct pp){(pid_t)pid, pp};
	}
	closedir(d);
	/* Breadth first: the found list is the queue (a process appears once: one parent). */
	pid_t *found = malloc((n ? n : 1) * sizeof(*found));
	if (!found) {
		free(all);
		return -ENOMEM;
	}
	size_t nf = 0;
	for (size_t q = 0; q <= nf; q++) {
		pid_t parent = q ? found[q - 1] : root;
		for (size_t i = 0; i < n; i++)
			if (all[i].ppid == parent && all[i].pid != root && nf < n)
				found[nf++] = all[i].pid;
		if (q == nf)
			break;
	}
	for (size_t i = 0; i < nf && i < max; i++)
		out[i] = found[i];
	free(found);
	free(all);
	return (int)nf;
}
