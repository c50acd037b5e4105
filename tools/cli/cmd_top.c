/* cuptrace top: a live view of a traced program's GPUs, kernels and API calls (src/top/README.md).
 * `top -- CMD` runs CMD under `cuptrace record --format cupti` writing into a private
 * directory, and tails the captures there as they grow; `--replay CAPTURE` hands a capture's
 * events out by trace time through the same aggregator and screen. The screen is plain ANSI
 * (cursor home, lines overwritten and cleared to their end: no flicker, no ncurses needed for
 * one full-screen table); keys are read from stdin in non-canonical mode when it is a terminal,
 * and the terminal is restored on every exit path (q, the end, SIGINT, SIGTERM). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <dirent.h>
#include <unistd.h>

#include "cmd.h"
#include "common/options.h"
#include "opt_table.h"
#include "control/control.h"
#include "top/cpu.h"
#include "top/proc.h"
#include "top/screen.h"
#include "top/source.h"

struct top_opts {
	int once, json;
	int no_check;    /* record --no-check */
	long iterations; /* 0: until the end (or q) */
	double interval; /* seconds */
	double speed;    /* replay: trace seconds per wall second; 0: as fast as possible */
	int64_t t_dur;   /* the t key's trace: its length, trace ns */
	const char *replay[16];
	size_t nreplay;
	long job; /* --job RECORD_PID (0: none) */
};

static volatile sig_atomic_t got_signal;
static int t_pressed; /* the t key, handled at the next refresh */
static struct termios saved_tio;
static int tio_saved, screen_on;

static void on_signal(int sig)
{
	got_signal = sig;
}

static void term_restore(void)
{
	if (screen_on) {
		fputs("\033[?25h\n", stdout); /* the last screen stays, the prompt below it */
		fflush(stdout);
		screen_on = 0;
	}
	if (tio_saved) {
		tcsetattr(STDIN_FILENO, TCSANOW, &saved_tio);
		tio_saved = 0;
	}
}

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int top_parse(struct top_opts *o, int argc, char **argv)
{
	int c;
	char *end;
	while ((c = cli_next(CLI_TOP, argc, argv)) != CLI_END) {
		switch (c) {
		case '1':
			o->once = 1;
			break;
		case 'j':
			o->json = 1;
			break;
		case 'N':
			o->no_check = 1;
			break;
		case 'n':
			o->iterations = strtol(optarg, &end, 10);
			if (*end || o->iterations < 1) {
				cli_usage_error(CLI_TOP,
				                "--iterations takes a count above 0, not '%s'",
				                optarg);
				return EXIT_USAGE;
			}
			break;
		case 'i':
			o->interval = strtod(optarg, &end);
			if (*end == 'm' && end[1] == 's' && !end[2]) {
				o->interval /= 1000;
				end += 2;
			} else if (*end == 's' && !end[1]) {
				end++;
			}
			if (*end || !(o->interval >= 0.001 && o->interval <= 3600)) {
				cli_usage_error(
				    CLI_TOP,
				    "--interval takes seconds from 0.001 to 3600 (1, 0.5, "
				    "500ms), not '%s'",
				    optarg);
				return EXIT_USAGE;
			}
			break;
		case 'D':
			if (cuptrace_parse_duration(optarg, 1000000000, &o->t_dur) ||
			    o->t_dur <= 0) {
				cli_usage_error(
				    CLI_TOP,
				    "--t-duration takes a time above 0 (500ms, 2s, 1m), "
				    "not '%s'",
				    optarg);
				return EXIT_USAGE;
			}
			break;
		case 'J':
			o->job = strtol(optarg, &end, 10);
			if (*end || o->job < 1 || o->job > INT_MAX) {
				cli_usage_error(CLI_TOP,
				                "--job takes the pid of a `cuptrace record`, "
				                "not '%s'",
				                optarg);
				return EXIT_USAGE;
			}
			break;
		case 'r':
			if (o->nreplay == sizeof(o->replay) / sizeof(o->replay[0])) {
				cli_usage_error(CLI_TOP, "at most 16 --replay captures");
				return EXIT_USAGE;
			}
			o->replay[o->nreplay++] = optarg;
			break;
		case 's':
			o->speed = strtod(optarg, &end);
			if (!strcmp(optarg, "max"))
				o->speed = 0, end = optarg + 3;
			if (*end || o->speed < 0) {
				cli_usage_error(CLI_TOP,
				                "--speed takes a factor (1, 10) or max, not '%s'",
				                optarg);
				return EXIT_USAGE;
			}
			break;
		}
	}
	return cli_status();
}

/* The launched run: record's child writes its captures into dir. */
struct run {
	char dir[PATH_MAX];
	char log[PATH_MAX + 16];
	pid_t pid; /* the `cuptrace record` process */
	int done, status;
	struct top_source *src[64];
	ino_t ino[64];
	size_t nsrc;
};

/* Starts `cuptrace record --format cupti` of argv in a private directory; its output and the
 * program's go to a log file there (the screen is top's). */
static int run_start(struct run *r, char **argv, int no_check)
{
	const char *tdir = getenv("TMPDIR");
	snprintf(r->dir, sizeof(r->dir), "%s/cuptrace-top-XXXXXX", tdir && *tdir ? tdir : "/tmp");
	if (!mkdtemp(r->dir)) {
		fprintf(stderr, "cuptrace top: cannot make a directory in %s: %s\n",
		        tdir && *tdir ? tdir : "/tmp", strerror(errno));
		return EXIT_FAIL;
	}
	snprintf(r->log, sizeof(r->log), "%s/output.log", r->dir);
	char out[PATH_MAX + 16], self[PATH_MAX];
	snprintf(out, sizeof(out), "%s/top.cupti", r->dir);
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0) {
		fprintf(stderr, "cuptrace top: cannot find its own executable\n");
		return EXIT_FAIL;
	}
	self[n] = 0;
	size_t argc = 0;
	while (argv[argc])
		argc++;
	char **av = calloc(argc + 12, sizeof(*av));
	if (!av)
		return EXIT_FAIL;
	size_t k = 0;
	av[k++] = self;
	av[k++] = "record";
	av[k++] = "--capture";
	av[k++] = "--flush-ms";
	av[k++] = "200"; /* records reach the file within a refresh */
	av[k++] = "-o";
	av[k++] = out;
	if (no_check)
		av[k++] = "--no-check";
	av[k++] = "--";
	for (size_t i = 0; i < argc; i++)
		av[k++] = argv[i];
	fflush(NULL);
	r->pid = fork();
	if (r->pid < 0) {
		free(av);
		perror("cuptrace top: fork");
		return EXIT_FAIL;
	}
	if (r->pid == 0) {
		/* Its own process group: the terminal's ^C is top's, and q leaves the program
		 * running. */
		setpgid(0, 0);
		int fd = open(r->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			dup2(fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
		}
		if (nul >= 0)
			dup2(nul, STDIN_FILENO);
		execv(self, av);
		_exit(127);
	}
	free(av);
	return -1;
}

/* New captures in the run's directory (a partial file, or one put in place since): each is
 * tailed once (by inode: the rename keeps it). */
static void run_scan(struct run *r, struct cuptrace_top *t)
{
	DIR *d = opendir(r->dir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		size_t len = strlen(e->d_name);
		int partial = len > 8 && !strcmp(e->d_name + len - 8, ".partial");
		int cap = len > 6 && !strcmp(e->d_name + len - 6, ".cupti");
		if (!partial && !cap)
			continue;
		char p[PATH_MAX * 2];
		snprintf(p, sizeof(p), "%s/%s", r->dir, e->d_name);
		struct stat st;
		if (stat(p, &st))
			continue;
		size_t i = 0;
		while (i < r->nsrc && r->ino[i] != st.st_ino)
			i++;
		if (i < r->nsrc || r->nsrc == 64)
			continue;
		struct top_source *s = cuptrace_top_tail_open(t, p);
		if (s) {
			r->ino[r->nsrc] = st.st_ino;
			r->src[r->nsrc++] = s;
		}
	}
	if (d)
		closedir(d);
}

/* ---- attached: top PID..., --job RECORD_PID ---- */

/* The processes top watches through their control sockets ("watch DIR": each opens a window
 * writing a capture into run.dir, kept open while the connection is; closing it ends the
 * watch: the program goes on, back to what it costs between windows). */
#define MAX_WATCH 64
struct attach {
	pid_t pid[MAX_WATCH];
	int fd[MAX_WATCH]; /* -1: ended (the process closed it) */
	size_t n;
	pid_t tried[256]; /* --job: descendants asked once already (or without a socket) */
	size_t ntried;
	long job;
	char msg[700]; /* the last problem of a later rank, for the status line */
};

/* Asks pid to be watched into dir. 0, or EXIT_FAIL with the reason on stderr (fatal) or in
 * a->msg (a rank of a job: the others go on). */
static int attach_one(struct attach *a, pid_t pid, const char *dir, int quiet)
{
	char reply[600], err[300];
	int fail = 0;
	if (kill(pid, 0) && errno == ESRCH) {
		snprintf(reply, sizeof(reply), "no process %d is running", (int)pid);
		fail = 1;
	} else if (kill(pid, 0) && errno == EPERM) {
		snprintf(reply, sizeof(reply),
		         "process %d is another user's: permission denied (top watches your own "
		         "processes)",
		         (int)pid);
		fail = 1;
	}
	char **paths = NULL;
	int np = fail ? 0 : cuptrace_control_find(pid, 0, &paths, err, sizeof(err));
	if (!fail && np < 0) {
		snprintf(reply, sizeof(reply), "%s", err);
		fail = 1;
	} else if (!fail && np == 0) {
		char cdir[200], e2[200];
		if (cuptrace_control_dir(cdir, sizeof(cdir), e2, sizeof(e2)))
			snprintf(cdir, sizeof(cdir), "the control directory");
		/* The pid of `cuptrace record` itself: its processes are what to watch. */
		char cmd[256] = "", path[64];
		snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
		FILE *f = fopen(path, "r");
		size_t len = f ? fread(cmd, 1, sizeof(cmd) - 1, f) : 0;
		if (f)
			fclose(f);
		const char *base = strrchr(cmd, '/');
		int is_record = len > 0 && strlen(cmd) + 7 < len &&
		                !strcmp(base ? base + 1 : cmd, "cuptrace") &&
		                !strcmp(cmd + strlen(cmd) + 1, "record");
		if (is_record)
			snprintf(
			    reply, sizeof(reply),
			    "process %d is a `cuptrace record`: `cuptrace top --job %d` watches "
			    "the processes it started",
			    (int)pid, (int)pid);
		else
			snprintf(
			    reply, sizeof(reply),
			    "process %d has no control socket in %s: top attaches to processes "
			    "started with `cuptrace record --on-demand -- ...`",
			    (int)pid, cdir);
		fail = 1;
	}
	int fd = -1;
	if (!fail && a->n == MAX_WATCH) {
		snprintf(reply, sizeof(reply), "at most %d processes are watched", MAX_WATCH);
		fail = 1;
	}
	if (!fail) {
		fd = cuptrace_control_watch(paths[0], dir, 5000, reply, sizeof(reply));
		fail = fd < 0;
	}
	for (int i = 0; i < np; i++)
		free(paths[i]);
	free(paths);
	if (fail) {
		/* The process's own refusal ("error: ...") is named by its pid. */
		int refused = !strncmp(reply, "error: ", 7);
		if (quiet)
			snprintf(a->msg, sizeof(a->msg), "pid %d: %s", (int)pid,
			         refused ? reply + 7 : reply);
		else if (refused)
			fprintf(stderr, "cuptrace top: pid %d: %s\n", (int)pid, reply + 7);
		else
			fprintf(stderr, "cuptrace top: %s\n", reply);
		return EXIT_FAIL;
	}
	a->pid[a->n] = pid;
	a->fd[a->n++] = fd;
	return 0;
}

/* --job: every descendant of the record process that has a control socket and is not watched
 * yet (ranks that start later are found at the next refresh). */
static void attach_job(struct attach *a, const char *dir)
{
	pid_t d[1024];
	int n = cuptrace_top_descendants((pid_t)a->job, d, 1024);
	for (int i = 0; i < n && i < 1024; i++) {
		size_t k = 0;
		while (k < a->ntried && a->tried[k] != d[i])
			k++;
		if (k < a->ntried)
			continue;
		char **paths = NULL, err[300];
		int np = cuptrace_control_find(d[i], 0, &paths, err, sizeof(err));
		for (int j = 0; j < np; j++)
			free(paths[j]);
		free(paths);
		if (np <= 0)
			continue; /* not traced (yet: a rank's socket comes with its first CUDA
			             call) */
		if (a->ntried < sizeof(a->tried) / sizeof(a->tried[0]))
			a->tried[a->ntried++] = d[i];
		attach_one(a, d[i], dir, 1);
	}
}

/* Whether every watched process ended (the process closed the connection: its session
 * ended), and for a job, the record process too. */
static int attach_ended(struct attach *a)
{
	int all = 1;
	for (size_t i = 0; i < a->n; i++) {
		if (a->fd[i] < 0)
			continue;
		struct pollfd p = {a->fd[i], POLLIN, 0};
		char b[256];
		if (poll(&p, 1, 0) > 0 && recv(a->fd[i], b, sizeof(b), MSG_DONTWAIT) <= 0) {
			close(a->fd[i]);
			a->fd[i] = -1;
			continue;
		}
		all = 0;
	}
	if (a->job && !(kill((pid_t)a->job, 0) && errno == ESRCH))
		all = 0;
	return all;
}

/* top leaves: closing the connections ends each watch (the windows close, the programs go
 * on). */
static void attach_leave(struct attach *a)
{
	for (size_t i = 0; i < a->n; i++)
		if (a->fd[i] >= 0) {
			close(a->fd[i]);
			a->fd[i] = -1;
		}
}

/* A private directory for the watched processes' captures (mkdtemp: 0700, ours; the library
 * checks it again). */
static int attach_dir(struct run *r)
{
	const char *tdir = getenv("TMPDIR");
	snprintf(r->dir, sizeof(r->dir), "%s/cuptrace-top-XXXXXX", tdir && *tdir ? tdir : "/tmp");
	if (!mkdtemp(r->dir)) {
		fprintf(stderr, "cuptrace top: cannot make a directory in %s: %s\n",
		        tdir && *tdir ? tdir : "/tmp", strerror(errno));
		return EXIT_FAIL;
	}
	return 0;
}

/* The last lines of the run's log on stderr (at most 4 KiB). */
static void show_log(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	char buf[4096];
	fseek(f, 0, SEEK_END);
	long size = ftell(f);
	fseek(f, size > (long)sizeof(buf) - 1 ? size - (long)sizeof(buf) + 1 : 0, SEEK_SET);
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	if (n)
		fprintf(stderr, "cuptrace top: the end of %s:\n%s%s", path, buf,
		        buf[n - 1] == '\n' ? "" : "\n");
}

static void term_size(int *w, int *h)
{
	struct winsize ws;
	*w = 80;
	*h = 24;
	if (!ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) && ws.ws_col >= 40 && ws.ws_row >= 10) {
		*w = ws.ws_col;
		*h = ws.ws_row;
	}
}

/* CPU time at the last refresh: of each watched process's cuptrace-* threads, of top and its
 * record process. */
struct cpu_clock {
	int64_t *proc; /* per process of the aggregator; -1: not read yet */
	size_t nproc;
	int64_t self, at; /* top's (and record's) CPU ns; the monotonic time of the reading */
	int64_t rec;      /* record's at its last reading (it stays counted once it is gone) */
	int have_self;
};

static double cpu_pct(int64_t d_cpu, int64_t d_wall)
{
	return d_wall > 0 && d_cpu >= 0 ? 100.0 * (double)d_cpu / (double)d_wall : -1;
}

/* The tracer's own CPU over the last interval into t (percent of one core; -1: not known). */
static void cpu_update(struct cpu_clock *c, struct cuptrace_top *t, pid_t record)
{
	int64_t now = now_ns(), dt = c->at ? now - c->at : 0;
	if (c->nproc < t->nprocs) {
		int64_t *v = realloc(c->proc, t->nprocs * sizeof(*v));
		if (!v)
			return;
		for (size_t i = c->nproc; i < t->nprocs; i++)
			v[i] = -1;
		c->proc = v;
		c->nproc = t->nprocs;
	}
	for (size_t i = 0; i < t->nprocs; i++) {
		struct top_proc *p = &t->procs[i];
		int64_t ns;
		int nth = 0;
		p->tracer_cpu_pct = -1;
		if (p->ended || cuptrace_top_cpu_ns(p->pid, 1, &ns, &nth)) {
			c->proc[i] = -1;
			continue;
		}
		if (c->proc[i] >= 0)
			p->tracer_cpu_pct = cpu_pct(ns - c->proc[i], dt);
		p->tracer_threads = nth;
		c->proc[i] = ns;
	}
	int64_t self = 0, rec = 0;
	if (!cuptrace_top_cpu_ns(getpid(), 0, &self, NULL)) {
		if (record > 0 && !cuptrace_top_cpu_ns(record, 0, &rec, NULL))
			c->rec = rec;
		self += c->rec;
		t->top_cpu_pct = c->have_self ? cpu_pct(self - c->self, dt) : -1;
		c->self = self;
		c->have_self = 1;
	}
	c->at = now;
}

/* One refresh on the terminal: home, each line overwritten and cleared to its end, the rest of
 * the screen cleared; the last line without its newline (no scroll). */
static void draw(const struct cuptrace_top *t, struct top_view *v)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	if (!m)
		return;
	cuptrace_top_render(t, v, m);
	fclose(m);
	fputs("\033[H", stdout);
	for (size_t i = 0; i < len; i++) {
		if (buf[i] != '\n') {
			putchar(buf[i]);
			continue;
		}
		fputs("\033[K", stdout);
		if (i + 1 < len)
			putchar('\n');
	}
	fputs("\033[J", stdout);
	fflush(stdout);
	free(buf);
}

static int key(struct top_view *v, int c)
{
	switch (c) {
	case 'q':
		return 1;
	case 'p':
		v->paused = !v->paused;
		break;
	case 'k':
		v->view = TOP_VIEW_KERNELS;
		break;
	case 'a':
		v->view = TOP_VIEW_API;
		break;
	case 's':
		v->view = TOP_VIEW_STREAMS;
		break;
	case 'r':
		v->view = TOP_VIEW_RANKS;
		break;
	case 'n':
		v->view = TOP_VIEW_NCCL;
		break;
	case 'o':
		v->sort = (enum top_sort)((v->sort + 1) % TOP_NSORTS);
		break;
	case 't':
		t_pressed = 1;
		break;
	}
	return 0;
}

/* Waits until deadline (monotonic ns), taking keys; 1 when the user quit. */
static int wait_keys(struct top_view *v, int64_t deadline, int tty_in, const struct cuptrace_top *t)
{
	for (;;) {
		if (got_signal)
			return 1;
		int64_t left = deadline - now_ns();
		if (left <= 0)
			return 0;
		if (!tty_in) {
			struct timespec ts = {left / 1000000000, left % 1000000000};
			nanosleep(&ts, NULL);
			continue;
		}
		struct pollfd pf = {.fd = STDIN_FILENO, .events = POLLIN};
		if (poll(&pf, 1, (int)(left / 1000000 + 1)) > 0) {
			char c;
			if (read(STDIN_FILENO, &c, 1) == 1) {
				if (key(v, c))
					return 1;
				draw(t, v); /* a key shows at once */
			}
		}
	}
}

/* The t key: a trace of the next T of trace time, cut from the capture top reads (the live
 * run's, which holds everything: no window needs opening in the program; or the replay's) by
 * `cuptrace share --keep-time --window FROM:TO` in a child, once the capture is past TO (live:
 * one more second of records, or the program ended). One at a time; the file is named on the
 * status line and at exit. */
struct shot {
	int state;             /* 0 none, 1 waiting for the capture to pass t1, 2 being written */
	int64_t t0, t1, asked; /* trace ns; the monotonic time t was pressed */
	int k;
	pid_t child;
	char path[PATH_MAX];
	char status[PATH_MAX + 160];
};

/* The trace time that the data top has reached: a replay's clock, else the latest record. */
static int64_t trace_now(const struct cuptrace_top *t, int replay, int64_t clock)
{
	if (replay)
		return clock;
	int64_t m = 0;
	for (size_t i = 0; i < t->nprocs; i++)
		if (t->procs[i].latest > m)
			m = t->procs[i].latest;
	return m;
}

static void shot_begin(struct shot *sh, int64_t now, int64_t dur)
{
	if (sh->state) {
		snprintf(sh->status, sizeof(sh->status), "t: %s is still being written", sh->path);
		return;
	}
	struct stat st;
	do
		snprintf(sh->path, sizeof(sh->path), "cuptrace-top-%d-%d.pftrace", (int)getpid(),
		         ++sh->k);
	while (!stat(sh->path, &st)); /* never over a file there */
	sh->t0 = now;
	sh->t1 = now + dur;
	sh->asked = now_ns();
	sh->state = 1;
	snprintf(sh->status, sizeof(sh->status), "t: tracing %.3f s from %.6f s into %s",
	         (double)dur / 1e9, (double)sh->t0 / 1e9, sh->path);
}

/* Starts the cut of capture into the shot's file (its output to log, NULL: none). */
static void shot_write(struct shot *sh, const char *capture, const char *log)
{
	char self[PATH_MAX], win[96];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	sh->state = 0;
	if (n <= 0 || !capture) {
		snprintf(sh->status, sizeof(sh->status), "t: no capture to cut %s from", sh->path);
		return;
	}
	self[n] = 0;
	snprintf(win, sizeof(win), "%.9fs:%.9fs", (double)sh->t0 / 1e9, (double)sh->t1 / 1e9);
	fflush(NULL);
	pid_t c = fork();
	if (c == 0) {
		int fd =
		    open(log ? log : "/dev/null", O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
		int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (fd >= 0) {
			dup2(fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
		}
		if (nul >= 0)
			dup2(nul, STDIN_FILENO);
		execl(self, self, "share", "--keep-time", "--window", win, "-o", sh->path, capture,
		      (char *)NULL);
		_exit(127);
	}
	if (c < 0) {
		snprintf(sh->status, sizeof(sh->status), "t: cannot start writing %s", sh->path);
		return;
	}
	sh->child = c;
	sh->state = 2;
	snprintf(sh->status, sizeof(sh->status), "t: writing %s", sh->path);
}

/* Whether the writing child ended (block: wait for it). */
static void shot_reap(struct shot *sh, int block)
{
	int st;
	if (sh->state != 2 || waitpid(sh->child, &st, block ? 0 : WNOHANG) != sh->child)
		return;
	sh->state = 0;
	if (WIFEXITED(st) && !WEXITSTATUS(st))
		snprintf(sh->status, sizeof(sh->status), "t: wrote %s (%.6f s to %.6f s)", sh->path,
		         (double)sh->t0 / 1e9, (double)sh->t1 / 1e9);
	else
		snprintf(sh->status, sizeof(sh->status), "t: writing %s failed (status %d)",
		         sh->path, WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
}

/* The capture the live run writes now (the file tailed first; renamed when it ended). */
static const char *run_capture(struct run *r, char *buf, size_t n)
{
	DIR *d = r->nsrc ? opendir(r->dir) : NULL;
	struct dirent *e;
	const char *found = NULL;
	while (d && (e = readdir(d))) {
		struct stat st;
		snprintf(buf, n, "%s/%s", r->dir, e->d_name);
		if (!stat(buf, &st) && st.st_ino == r->ino[0]) {
			found = buf;
			break;
		}
	}
	if (d)
		closedir(d);
	return found;
}

int cmd_top(int argc, char **argv)
{
	struct top_opts o = {.interval = 1.0, .speed = 1.0, .t_dur = 10000000000ll};
	struct shot sh = {0};
	char capbuf[PATH_MAX * 2];
	int e = top_parse(&o, argc, argv);
	if (e >= 0)
		return e;
	int ncmd = argc - optind;
	/* PIDs, not a command: numbers only, and no `--` before them. */
	int pids = ncmd > 0 && optind > 0 && strcmp(argv[optind - 1], "--");
	for (int i = optind; pids && i < argc; i++)
		pids = argv[i][0] && strspn(argv[i], "0123456789") == strlen(argv[i]);
	if (!o.nreplay && ncmd < 1 && !o.job) {
		cli_usage_error(CLI_TOP, "needs a command (top -- CMD), PIDs, --job RECORD_PID or "
		                         "--replay CAPTURE");
		return EXIT_USAGE;
	}
	if (o.nreplay && (ncmd || o.job)) {
		cli_usage_error(CLI_TOP, "--replay takes no command, PID or --job");
		return EXIT_USAGE;
	}
	if (o.job && ncmd) {
		cli_usage_error(CLI_TOP, "--job takes no command or PIDs besides");
		return EXIT_USAGE;
	}
	struct attach at = {.job = o.job};
	int attached = o.job || pids;
	cmd_log_begin("top");
	struct cuptrace_top t;
	cuptrace_top_init(&t);
	struct top_source *rs[16] = {0};
	struct run run = {0};
	char source[PATH_MAX + 64];
	int64_t clock = 0;
	for (size_t i = 0; i < o.nreplay; i++) {
		const char *why = NULL;
		if (!(rs[i] = cuptrace_top_replay_open(&t, o.replay[i], &why))) {
			fprintf(stderr, "cuptrace top: cannot replay %s: %s\n", o.replay[i],
			        why ? why : strerror(errno));
			for (size_t j = 0; j < i; j++)
				cuptrace_top_source_free(rs[j]);
			cuptrace_top_free(&t);
			return EXIT_FAIL;
		}
		int64_t s0 = cuptrace_top_replay_start(rs[i]);
		if (!i || s0 < clock)
			clock = s0;
	}
	if (o.nreplay)
		snprintf(source, sizeof(source), "replay %s%s", o.replay[0],
		         o.nreplay > 1 ? " ..." : "");
	else if (attached) {
		if ((e = attach_dir(&run))) {
			cuptrace_top_free(&t);
			return e;
		}
		if (o.job && kill((pid_t)o.job, 0) && errno == ESRCH) {
			fprintf(stderr,
			        "cuptrace top: no process %ld is running (--job takes the pid of a "
			        "`cuptrace record --on-demand`)\n",
			        o.job);
			e = EXIT_FAIL;
		}
		for (int i = optind; !o.job && i < argc && !e; i++)
			e = attach_one(&at, (pid_t)atol(argv[i]), run.dir, 0);
		if (e) {
			attach_leave(&at);
			rmdir(run.dir);
			cuptrace_top_free(&t);
			return e;
		}
		if (o.job) {
			attach_job(&at, run.dir);
			snprintf(source, sizeof(source), "job of record pid %ld", o.job);
		} else {
			snprintf(source, sizeof(source), "pid %s%s", argv[optind],
			         ncmd > 1 ? " ..." : "");
		}
	} else {
		if ((e = run_start(&run, argv + optind, o.no_check)) >= 0) {
			cuptrace_top_free(&t);
			return e;
		}
		snprintf(source, sizeof(source), "%s (pid %d)", argv[optind], (int)run.pid);
	}
	int tty_out = isatty(STDOUT_FILENO) && !o.json;
	int interactive = tty_out && !o.once;
	int tty_in = interactive && isatty(STDIN_FILENO);
	struct sigaction sa = {.sa_handler = on_signal};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	if (tty_in && !tcgetattr(STDIN_FILENO, &saved_tio)) {
		struct termios raw = saved_tio;
		raw.c_lflag &= (tcflag_t) ~(ICANON | ECHO);
		raw.c_cc[VMIN] = 0;
		raw.c_cc[VTIME] = 0;
		tio_saved = !tcsetattr(STDIN_FILENO, TCSANOW, &raw);
	}
	if (interactive) {
		fputs("\033[?25l\033[H\033[2J", stdout);
		screen_on = 1;
	}
	atexit(term_restore);
	struct top_view v = {.ansi = tty_out, .keys = tty_in, .source = source};
	int64_t step = (int64_t)(o.interval * 1e9);
	int64_t start = now_ns(), next = start + step;
	int quit = 0, err = 0, grace = 0;
	long n = 0;
	struct cpu_clock cpu = {0};
	if (!o.nreplay)
		cpu_update(&cpu, &t,
		           run.pid); /* the first reading: the base of the first interval */
	for (;;) {
		if (o.nreplay && o.speed == 0) {
			if (got_signal)
				quit = 1;
		} else {
			quit = wait_keys(&v, next, tty_in, &t);
		}
		if (quit)
			break;
		next += step;
		/* The interval's events. */
		int all_ended = 1;
		int64_t dt = step;
		if (o.nreplay) {
			int64_t adv = o.speed > 0 ? (int64_t)((double)step * o.speed) : step;
			clock += adv;
			dt = adv;
			for (size_t i = 0; i < o.nreplay; i++) {
				if (!err)
					err = cuptrace_top_replay_until(rs[i], clock);
				all_ended &= cuptrace_top_source_ended(rs[i]);
			}
		} else {
			int st;
			if (attached && o.job)
				attach_job(&at, run.dir); /* ranks that started since */
			if (!attached && !run.done && waitpid(run.pid, &st, WNOHANG) == run.pid) {
				run.done = 1;
				run.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
			}
			run_scan(&run, &t);
			for (size_t i = 0; i < run.nsrc; i++) {
				const char *why;
				int r = cuptrace_top_source_poll(run.src[i], &why);
				if (r && !err) {
					fprintf(stderr, "cuptrace top: %s: %s\n",
					        cuptrace_top_source_path(run.src[i]),
					        why ? why : strerror(-r));
					err = r;
				}
				all_ended &= cuptrace_top_source_ended(run.src[i]);
			}
			if (attached) {
				/* Every process closed its connection (its session ended); its
				 * capture's end follows, or never (killed): a few refreshes' grace.
				 */
				int gone = attach_ended(&at);
				grace = gone ? grace + 1 : 0;
				all_ended = gone && (all_ended || err || grace > 3);
			} else {
				all_ended = run.done && (all_ended || err);
			}
		}
		/* The t key's trace. */
		int64_t tnow = trace_now(&t, o.nreplay > 0, clock);
		if (t_pressed) {
			t_pressed = 0;
			shot_begin(&sh, tnow, o.t_dur);
		}
		if (sh.state == 1 &&
		    (o.nreplay ? tnow >= sh.t1 || all_ended
		               : tnow >= sh.t1 + 1000000000 || all_ended ||
		                     now_ns() - sh.asked > o.t_dur + 30000000000ll))
			shot_write(&sh,
			           o.nreplay ? o.replay[0]
			                     : run_capture(&run, capbuf, sizeof(capbuf)),
			           o.nreplay || !run.log[0] ? NULL : run.log);
		shot_reap(&sh, 0);
		v.status = sh.status[0] ? sh.status : at.msg[0] ? at.msg : NULL;
		if (v.paused) {
			/* The numbers go on accumulating; the screen stays. */
			if (all_ended)
				v.paused = 0;
			else
				continue;
		}
		if (!o.nreplay)
			cpu_update(&cpu, &t, run.done ? 0 : run.pid);
		if (cuptrace_top_tick(&t, dt)) {
			fprintf(stderr, "cuptrace top: out of memory\n");
			err = -ENOMEM;
			break;
		}
		n++;
		v.t_s = o.nreplay ? (double)(clock - cuptrace_top_replay_start(rs[0])) / 1e9
		                  : (double)(now_ns() - start) / 1e9;
		if (o.json) {
			if (cuptrace_top_json(&t, stdout, v.t_s) || fflush(stdout)) {
				err = -EIO;
				break;
			}
		} else if (interactive) {
			term_size(&v.width, &v.height);
			draw(&t, &v);
		} else {
			v.width = 80;
			v.height = 24;
			if (tty_out)
				term_size(&v.width, &v.height);
			cuptrace_top_render(&t, &v, stdout);
			if (!o.once)
				putchar('\n');
			fflush(stdout);
		}
		if (o.once || (o.iterations && n >= o.iterations) || all_ended || err)
			break;
	}
	term_restore();
	/* A trace asked for is written before top goes (with what the capture has so far). */
	if (sh.state == 1)
		shot_write(&sh, o.nreplay ? o.replay[0] : run_capture(&run, capbuf, sizeof(capbuf)),
		           o.nreplay || !run.log[0] ? NULL : run.log);
	shot_reap(&sh, 1);
	if (sh.status[0])
		fprintf(stderr, "cuptrace top: %s\n", sh.status);
	if (attached) {
		attach_leave(&at);
		fprintf(stderr,
		        "cuptrace top: left %zu process%s (watching ended; they go on); their "
		        "captures: %s\n",
		        at.n, at.n == 1 ? "" : "es", run.dir);
		if (at.msg[0])
			fprintf(stderr, "cuptrace top: %s\n", at.msg);
	} else if (!o.nreplay) {
		if (!run.done && waitpid(run.pid, NULL, WNOHANG) == 0)
			fprintf(stderr,
			        "cuptrace top: %s goes on (record pid %d); its captures: %s, its "
			        "output: %s\n",
			        argv[optind], (int)run.pid, run.dir, run.log);
		else
			fprintf(stderr,
			        "cuptrace top: %s ended (status %d); its captures: %s, "
			        "its output: %s\n",
			        argv[optind], run.status, run.dir, run.log);
		if (run.done && (run.status || !run.nsrc))
			show_log(run.log); /* why: record's and the program's messages */
	}
	for (size_t i = 0; i < o.nreplay; i++)
		cuptrace_top_source_free(rs[i]);
	for (size_t i = 0; i < run.nsrc; i++)
		cuptrace_top_source_free(run.src[i]);
	cuptrace_top_free(&t);
	free(cpu.proc);
	if (err)
		return EXIT_FAIL;
	if (!o.nreplay && !attached && run.done)
		return run.status;
	return 0;
}
