/* Benchmark helper for tools/bench/exit_probe.py: an LD_PRELOAD library that marks, on stderr,
 * when the traced program's exit reaches its last atexit handler and its last ELF destructor.
 * Preloaded, its constructor runs first, so the handler it registers runs after every other
 * (atexit handlers run last-in, first-out): cuptrace's finish, cudart's teardown and the
 * program's own come before the "atexit_last" mark. What follows the "dtor" mark is the
 * kernel's part of the exit (closing the GPU's device files tears the context down).
 * Lines are "cuptrace-exit-shim MARK SECONDS" on CLOCK_MONOTONIC, written with one write(2)
 * each, so they are whole even with the program's own stderr. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static void mark(const char *what)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	char b[96];
	int n = snprintf(b, sizeof(b), "cuptrace-exit-shim %s %lld.%09ld\n", what,
	                 (long long)t.tv_sec, t.tv_nsec);
	if (n > 0 && write(2, b, (size_t)n) < 0)
		return; /* nothing to do about it: the probe then reports a missing mark */
}

static void last_atexit(void)
{
	mark("atexit_last");
}

__attribute__((constructor)) static void shim_init(void)
{
	atexit(last_atexit);
}

__attribute__((destructor)) static void shim_fini(void)
{
	mark("dtor");
}
