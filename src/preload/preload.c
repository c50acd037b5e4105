/* libcuptrace_preload.so: the one thing CUDA's injection cannot give cuptrace, a word before the
 * process image goes away without running atexit handlers.
 *
 * `cuptrace record` puts this small library (libc only, no CUPTI) in LD_PRELOAD. It wraps the
 * exec family and _exit/_Exit. A process that is tracing (libcuptrace.so, loaded by the CUDA
 * driver, registered itself through cuptrace_preload_register) finishes its trace first, so
 * that:
 *  - `exec` chains keep every image's trace: the old image writes all it has, and the new one
 *    (same pid, so the same file name) is told through CUPTRACE_TAKEN in its environment which
 *    names are already written, and picks another;
 *  - processes that end with _exit (Python multiprocessing's forked workers end with os._exit,
 *    C programs' forked children often do) do not lose what CUPTI still holds.
 * Every other process (the register call never happened, or a forked child of a tracing
 * process: its pid differs) goes straight to libc.
 *
 * Async-signal-safety: exec and _exit are called in forked children of multithreaded programs,
 * where only async-signal-safe functions may run. The real functions are looked up in the
 * constructor, and the wrappers do nothing but getpid() and read two words until they know
 * this is the tracing process itself (not a child), where the full C library is fine. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "preload/preload.h"

#define EXPORT __attribute__((visibility("default")))

static _Atomic(cuptrace_preload_hook) hook;
static atomic_int hook_pid;

static int (*real_execve)(const char *, char *const[], char *const[]);
static int (*real_execvpe)(const char *, char *const[], char *const[]);
static int (*real_fexecve)(int, char *const[], char *const[]);
static void (*real__exit)(int);
static void (*real__Exit)(int);

/* Also called from the wrappers, in case a constructor that ran before ours execs. */
__attribute__((constructor)) static void preload_init(void)
{
	if (real_execve)
		return;
	real_execve =
	    (int (*)(const char *, char *const[], char *const[]))dlsym(RTLD_NEXT, "execve");
	real_execvpe =
	    (int (*)(const char *, char *const[], char *const[]))dlsym(RTLD_NEXT, "execvpe");
	real_fexecve = (int (*)(int, char *const[], char *const[]))dlsym(RTLD_NEXT, "fexecve");
	real__exit = (void (*)(int))dlsym(RTLD_NEXT, "_exit");
	real__Exit = (void (*)(int))dlsym(RTLD_NEXT, "_Exit");
}

/* Called by libcuptrace.so when a session starts in this process (and with NULL when it ends
 * without an exec or _exit: cuptrace_stop). */
EXPORT void cuptrace_preload_register(cuptrace_preload_hook fn)
{
	atomic_store(&hook_pid, (int)getpid());
	atomic_store(&hook, fn);
}

/* The tracing process itself? Then take the hook (once: an exec that fails does not finish
 * twice, and the hook is gone after it ran). */
static cuptrace_preload_hook take_hook(void)
{
	if (!atomic_load(&hook) || atomic_load(&hook_pid) != (int)getpid())
		return NULL;
	return atomic_exchange(&hook, (cuptrace_preload_hook)NULL);
}

/* envp plus CUPTRACE_TAKEN=<older value>:<path>, malloc'd (we are the tracing process, not a
 * post-fork child, so malloc is allowed). NULL: use envp as it is. */
static char **env_with_taken(char *const envp[], const char *path)
{
	if (!path[0])
		return NULL;
	static const char key[] = CUPTRACE_TAKEN_ENV "=";
	size_t n = 0, old = (size_t)-1;
	for (; envp && envp[n]; n++)
		if (!strncmp(envp[n], key, sizeof(key) - 1))
			old = n;
	char **e = malloc((n + 2) * sizeof(char *));
	if (!e)
		return NULL;
	const char *prev = old != (size_t)-1 ? envp[old] + sizeof(key) - 1 : "";
	size_t len = sizeof(key) + strlen(prev) + 1 + strlen(path) + 1;
	char *v = malloc(len);
	if (!v) {
		free(e);
		return NULL;
	}
	snprintf(v, len, "%s%s%s%s", key, prev, prev[0] ? ":" : "", path);
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (i != old)
			e[k++] = envp[i];
	e[k++] = v;
	e[k] = NULL;
	return e;
}

/* Finishes the trace if this is the tracing process; returns the environment to exec with. */
static char *const *before_exec(char *const envp[], char **to_free)
{
	*to_free = NULL;
	preload_init();
	cuptrace_preload_hook h = take_hook();
	if (!h)
		return envp;
	char path[4096] = "";
	h(CUPTRACE_PRELOAD_EXEC, path, sizeof(path));
	char **e = env_with_taken(envp, path);
	if (!e)
		return envp;
	*to_free = (char *)e;
	return e;
}

static void after_failed_exec(char *to_free)
{
	if (!to_free)
		return;
	char **e = (char **)to_free;
	size_t n = 0;
	while (e[n])
		n++;
	int saved = errno;
	free(e[n - 1]);
	free(e);
	errno = saved;
}

EXPORT int execve(const char *file, char *const argv[], char *const envp[])
{
	char *f;
	char *const *e = before_exec(envp, &f);
	int r = real_execve(file, argv, e);
	after_failed_exec(f);
	return r;
}

EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	char *f;
	char *const *e = before_exec(envp, &f);
	int r = real_execvpe(file, argv, e);
	after_failed_exec(f);
	return r;
}

EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	char *f;
	char *const *e = before_exec(envp, &f);
	int r = real_fexecve(fd, argv, e);
	after_failed_exec(f);
	return r;
}

EXPORT int execv(const char *file, char *const argv[])
{
	return execve(file, argv, environ);
}

EXPORT int execvp(const char *file, char *const argv[])
{
	return execvpe(file, argv, environ);
}

/* The list forms: at most 4096 arguments gathered on the stack (no malloc: a post-fork child
 * may call these). */
#define GATHER(first, ap, argv, max)                                                               \
	size_t argc_ = 0;                                                                          \
	argv[argc_++] = (char *)(first);                                                           \
	while (argc_ < (max) && (argv[argc_] = va_arg(ap, char *)) != NULL)                        \
		argc_++;                                                                           \
	if (argc_ == (max)) {                                                                      \
		va_end(ap);                                                                        \
		errno = E2BIG;                                                                     \
		return -1;                                                                         \
	}

EXPORT int execl(const char *path, const char *arg, ...)
{
	char *argv[4096];
	va_list ap;
	va_start(ap, arg);
	GATHER(arg, ap, argv, 4096);
	va_end(ap);
	return execve(path, argv, environ);
}

EXPORT int execlp(const char *file, const char *arg, ...)
{
	char *argv[4096];
	va_list ap;
	va_start(ap, arg);
	GATHER(arg, ap, argv, 4096);
	va_end(ap);
	return execvpe(file, argv, environ);
}

EXPORT int execle(const char *path, const char *arg, ...)
{
	char *argv[4096];
	va_list ap;
	va_start(ap, arg);
	GATHER(arg, ap, argv, 4096);
	char *const *envp = va_arg(ap, char *const *);
	va_end(ap);
	return execve(path, argv, envp);
}

static void before_exit(void)
{
	cuptrace_preload_hook h = take_hook();
	if (h)
		h(CUPTRACE_PRELOAD_EXIT, NULL, 0);
	preload_init();
}

EXPORT void _exit(int status)
{
	before_exit();
	if (real__exit)
		real__exit(status);
	syscall(SYS_exit_group, status);
	__builtin_unreachable();
}

EXPORT void _Exit(int status)
{
	before_exit();
	if (real__Exit)
		real__Exit(status);
	syscall(SYS_exit_group, status);
	__builtin_unreachable();
}
