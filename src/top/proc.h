/* The processes cuptrace top attaches to with --job (top_proc.c): every descendant of a
 * process, from /proc (each process's parent in /proc/PID/stat; /proc/PID/task/TID/children
 * needs a kernel option, and misses children of the threads not listed). Threading: any; no
 * state. */
#ifndef CUPTRACE_TOP_PROC_H
#define CUPTRACE_TOP_PROC_H

#include <stddef.h>
#include <sys/types.h>

/* The descendants of root (children, their children, ...; not root) into out, at most max, in
 * no particular order. Returns how many there are (may be more than max: only max stored), or a
 * negative errno (no /proc). A process that ends while /proc is read may be left out. */
int cuptrace_top_descendants(pid_t root, pid_t *out, size_t max);

#endif
