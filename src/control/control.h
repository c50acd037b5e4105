/* The control channel of a traced process: `cuptrace trigger` asks a running process to open a
 * capture window, stop it, or write its flight recorder out.
 *
 * Not a signal: the program may own every signal. Each traced process listens on a Unix socket
 * of its own, DIR/j<job>.p<pid>.sock, where DIR is $XDG_RUNTIME_DIR/cuptrace or
 * /tmp/cuptrace-<uid>: a directory of mode 0700 that the user owns (one that is not, or that is
 * open to others, is refused, not used), the socket itself 0600, and every connection's peer
 * checked (SO_PEERCRED) to be the same user. <job> is the pid of the `cuptrace record` that
 * started the process (CUPTRACE_JOB), so `trigger --job` finds all of a job's processes.
 *
 * Protocol: one request line from the client ("open DURATION_NS STEPS", "stop", "dump",
 * "status", "watch DIR"), then reply lines from the process until it closes the connection.
 * "watch DIR" (cuptrace top attaching) is the one request whose connection stays open: the
 * handler keeps it (returns 1), the server goes on serving other connections and watches the
 * kept one; when the client hangs up (top quits, is killed, crashes) the hang-up callback runs.
 * At most one connection is kept at a time: a handler that keeps another one ends the first
 * (closed without a hang-up call: the handler knows its watch is over).
 *
 * Threading: the server runs its own thread (started with cuptrace_thread_start, so it takes
 * none of the program's signals) and calls the handler there, one connection at a time. */
#ifndef CUPTRACE_CONTROL_CONTROL_H
#define CUPTRACE_CONTROL_CONTROL_H

#include <stddef.h>
#include <sys/types.h>

/* The handler answers one request by writing lines to fd (cuptrace_control_reply). It returns
 * 1 to keep the connection open (a watch), else 0: the server closes it. */
typedef int (*cuptrace_control_fn)(const char *request, int fd, void *ctx);
/* The kept connection's client hung up (the server thread; the connection is closed already). */
typedef void (*cuptrace_control_hangup_fn)(void *ctx);

struct cuptrace_control;

/* The directory for this user's sockets, created 0700 if missing. 0, or a negative errno with
 * a message in err (a directory owned by someone else or open to others: -EPERM). */
int cuptrace_control_dir(char *out, size_t n, char *err, size_t errn);

/* A directory only this user can use: owned by us, a directory (not a link), no access for
 * group or others. 0, or a negative errno with a message in err (-EPERM: not private). */
int cuptrace_control_private_dir(const char *dir, char *err, size_t errn);

/* Starts listening for this process (job: CUPTRACE_JOB's value, or 0). hangup may be NULL
 * (then fn never keeps a connection). NULL on failure, with the reason in err. */
struct cuptrace_control *cuptrace_control_start(long job, cuptrace_control_fn fn,
                                                cuptrace_control_hangup_fn hangup, void *ctx,
                                                char *err, size_t errn);
/* The socket's path (for messages). */
const char *cuptrace_control_path(const struct cuptrace_control *c);
/* Stops the thread, closes and removes the socket, and closes a kept connection (the hang-up
 * callback is not called: the caller is ending what it watched anyway). NULL is fine. */
void cuptrace_control_stop(struct cuptrace_control *c);

/* printf-like: one reply line (a newline is added). Returns 0 or -errno. */
int cuptrace_control_reply(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Client side: the sockets of a process (pid > 0) or of every process of a job (job > 0),
 * as malloc'd paths in *paths (free each and the array). Returns how many, or a negative errno. */
int cuptrace_control_find(pid_t pid, long job, char ***paths, char *err, size_t errn);
/* Sends one request and copies every reply line to out (a FILE *) until the process closes the
 * connection or timeout_ms passes. Returns 0, -ETIMEDOUT, or a negative errno. */
int cuptrace_control_send(const char *path, const char *request, int timeout_ms, void *out);
/* Sends "watch DIR" and reads the first reply line into reply (n bytes, no newline) within
 * timeout_ms. Returns the connection (the watch lasts while it stays open: close it to end
 * the watch) when the reply starts with "watching", else -1 with the reply (an "error: ..."
 * line) or the reason in reply. */
int cuptrace_control_watch(const char *path, const char *dir, int timeout_ms, char *reply,
                           size_t n);

#endif
