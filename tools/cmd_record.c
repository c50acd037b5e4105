/* cuptrace record: runs a command with libcuptrace.so injected through CUDA_INJECTION64_PATH
 * and returns its exit status (128+signal if it died of one). The command line talks to the
 * library only through the CUPTRACE_* variables listed in include/cuptrace.h. The tool itself
 * never loads CUDA or CUPTI: the device check runs in a short-lived child. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <glob.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "common/wspec.h"
#include "common/options.h"
#include "common/privacy.h"
#include "common/util.h"
#include "otlp_cli.h"
#include "output/otlp_http.h"
#include "output/output.h"

static void record_usage(FILE *f)
{
	fprintf(
	    f, "usage: cuptrace record [options] -- command [args...]\n\n"
	       "  -o, --output PATH     trace file (default cuptrace-%%p.pftrace); %%p = pid,\n"
	       "                        %%h = host name, %%r / %%l = global / local rank from\n"
	       "                        torchrun, mpirun or srun (the pid without a launcher).\n"
	       "                        No two processes write one file: a later one adds\n"
	       "                        -PID to the name. An older file is replaced only by a\n"
	       "                        finished trace (or one cut by SIGKILL that holds\n"
	       "                        events). The extension picks the format:\n"
	       "                        .pftrace, .pftrace.gz, .json, .json.gz, .cupti;\n"
	       "                        none: no file (with --otlp)\n"
	       "  -f, --format FMT      perfetto | chrome | capture\n"
	       "      --capture         write the raw CUPTI capture (cheapest); convert it later\n"
	       "                        with 'cuptrace convert'\n"
	       "      --compress MODE   chunks (default for .pftrace) | gzip | none\n"
	       "      --compress-level N  1 (least CPU; about 9%% larger) to 12; default 5\n"
	       "      --driver MODE     user (default): driver calls the program makes itself;\n"
	       "                        all: also the CUDA runtime's own driver calls\n"
	       "      --runtime MODE    filtered (default): trivial runtime calls (cudaGetDevice,\n"
	       "                        cudaGetLastError, ...) left out at the source; watch:\n"
	       "                        left out, but counted, and kept when they fail, stall\n"
	       "                        or change the device (costs a callback per call);\n"
	       "                        all: every call\n"
	       "      --cuda-graphs MODE  node (default): each kernel, copy and memset of a\n"
	       "                        CUDA graph launch; graph: one slice per launch on its\n"
	       "                        stream, from its first node's start to its last node's\n"
	       "                        end (no per-node cost: CUPTI adds host time to every\n"
	       "                        node of every cudaGraphLaunch; not with capture\n"
	       "                        windows, where CUPTI cannot switch it on: node)\n"
	       "      --stacks WHAT     none (default) | python | native | all: the call stack\n"
	       "                        at each launch, copy, memset and synchronizing call\n"
	       "                        (Python frames of the calling thread, taking the GIL\n"
	       "                        back if it released it; native return addresses,\n"
	       "                        symbolized after the run); python-held | all-held:\n"
	       "                        Python frames only where the GIL is already held\n"
	       "      --stacks-every N  a stack at one such call in N on average, picked at\n"
	       "                        random (default 1: every call)\n"
	       "      --pytorch         PyTorch operators (aten::*, autograd, nn.Module) as\n"
	       "                        slices around the CUDA calls they make (Python programs;\n"
	       "                        inherited by child processes, e.g. under torchrun)\n"
	       "      --pytorch-shapes  as --pytorch, with each op's input shapes as arguments\n"
	       "      --no-step-marks   no optimizer.step() marks (by default each one is an\n"
	       "                        NVTX range \"optimizer.step\" on its thread, in Python\n"
	       "                        programs using torch.optim: `cuptrace analyze` takes\n"
	       "                        them as the steps)\n"
	       "      --buffer-size N   bytes per CUPTI buffer (default 1048576)\n"
	       "      --flush-ms N      write records at least this often (default 1000)\n"
	       "      --no-summary      no end-of-run summary on stderr\n"
	       "      --no-check        skip the check for a CUDA device\n"
	       "      --gpu-metrics[=LIST]  sample GPU hardware metrics (SM, tensor, DRAM, PCIe,\n"
	       "                        NVLink) as counter tracks under each GPU; LIST: CUPTI\n"
	       "                        metric names, comma-separated, instead of the default set\n"
	       "      --gpu-metrics-rate HZ  samples per second per GPU (default 10000)\n"
	       "      --list-gpu-metrics  print the GPUs' PM sampling metrics and exit\n"
	       "      --private         write no host name, user name, boot id or command-line\n"
	       "                        arguments into the trace (CUPTRACE_PRIVATE=1)\n"
	       "      --lib PATH        libcuptrace.so to inject (default: next to cuptrace)\n"
	       "  -h, --help            this help\n"
	       "\nTracing part of a run (README: Tracing part of a run); T is a duration such\n"
	       "as 500ms, 2s or 1m; %%n in -o gives each window a file of its own:\n"
	       "      --delay T         nothing before T after the first CUDA call\n"
	       "      --duration T      windows last at most T (alone: [delay, delay + T])\n"
	       "      --capture-range R cuda-profiler-api: between cudaProfilerStart and Stop\n"
	       "                        (torch.cuda.profiler.start/stop); range:NAME[#K][,N]:\n"
	       "                        from the K-th NVTX range NAME (or the one named NAME#K,\n"
	       "                        as torch.profiler's ProfilerStep#K) to the end of N\n"
	       "      --steps K[,N]     training steps K to K+N-1 (1-based): a step ends when\n"
	       "                        optimizer.step() returns (PyTorch), or --step-range's\n"
	       "      --step-range NAME an NVTX range that is one step (any program)\n"
	       "      --capture-repeat N|all  the window comes back: every N-th occurrence\n"
	       "      --on-demand       off until `cuptrace trigger` (or cuptrace_start()) opens\n"
	       "                        a window in the running processes\n"
	       "      --cupti-early     while waiting for a window, keep CUPTI subscribed (a\n"
	       "                        graph replay loop ran 13%% slower so): needed by programs\n"
	       "                        that launch CUDA graphs from the GPU, whose launches\n"
	       "                        CUPTI 13.0 makes fail when it starts after such a graph\n"
	       "                        was made\n"
	       "      --ring T          flight recorder: keep the last T, written at exit, on\n"
	       "                        SIGINT/SIGTERM, on a crash and on `cuptrace trigger`\n"
	       "      --ring-slow X     with --ring: write out each step slower than X times\n"
	       "                        the median of the recent steps, with the step before\n"
	       "      --ring-max BYTES  the flight recorder's memory (default "
	       "1073741824)\n" OTLP_CLI_HELP);
}

/* Where `cmake --install` puts libcuptrace.so relative to the cuptrace command, and the Python
 * hook relative to libcuptrace.so (CMakeLists.txt passes both; lib/ may be lib/<multiarch>). */
#ifndef CUPTRACE_BIN_TO_LIB
#define CUPTRACE_BIN_TO_LIB "../lib"
#endif
#ifndef CUPTRACE_LIB_TO_PYTHON
#define CUPTRACE_LIB_TO_PYTHON "../share/cuptrace/python"
#endif

/* The first of dir/rel[i]/file that exists, resolved into out (PATH_MAX bytes): 0, or -1. */
static int find_under(const char *dir, const char *const *rel, size_t nrel, const char *file,
                      char *out)
{
	for (size_t i = 0; i < nrel; i++) {
		char cand[2 * PATH_MAX];
		snprintf(cand, sizeof(cand), "%s/%s/%s", dir, rel[i], file);
		if (!access(cand, R_OK) && realpath(cand, out))
			return 0;
	}
	return -1;
}

/* libcuptrace.so next to the executable (build tree) or in the installed libdir. */
static int find_library(char *out, size_t n)
{
	const char *env = getenv("CUPTRACE_LIB");
	if (env && *env) {
		snprintf(out, n, "%s", env);
		return access(out, R_OK) ? -1 : 0;
	}
	char exe[PATH_MAX];
	ssize_t k = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (k <= 0)
		return -1;
	exe[k] = 0;
	static const char *const rel[] = {".", CUPTRACE_BIN_TO_LIB, "../lib", "../lib64"};
	char found[PATH_MAX];
	if (find_under(dirname(exe), rel, sizeof(rel) / sizeof(rel[0]), "libcuptrace.so", found))
		return -1;
	snprintf(out, n, "%s", found);
	return 0;
}

/* Runs probe in a short-lived child, so nothing it loads or initializes (libcuda, libcupti)
 * stays in the tool. probe returns 0 or fills msg and returns non-zero. Returns -1 with the
 * child's message in msg if the probe failed, or if the child died and crash_fails is set
 * (a crash while loading a library is an answer; a crash inside the driver's own check is not
 * evidence that tracing will fail). */
static int in_child(int (*probe)(const void *arg, char *msg, size_t n), const void *arg,
                    int crash_fails, char *msg, size_t n)
{
	msg[0] = 0;
	int pfd[2];
	if (pipe(pfd))
		return 0;
	pid_t pid = fork();
	if (pid < 0) {
		close(pfd[0]);
		close(pfd[1]);
		return 0;
	}
	if (pid == 0) {
		close(pfd[0]);
		char m[512] = "";
		int failed = probe(arg, m, sizeof(m));
		ssize_t w = write(pfd[1], m, strlen(m));
		(void)w;
		_exit(failed ? 1 : 0);
	}
	close(pfd[1]);
	ssize_t k = read(pfd[0], msg, n - 1);
	msg[k > 0 ? k : 0] = 0;
	close(pfd[0]);
	int st;
	waitpid(pid, &st, 0);
	if (WIFEXITED(st))
		return WEXITSTATUS(st) == 1 ? -1 : 0;
	return crash_fails ? -1 : 0;
}

/* Is there a CUDA driver with a device? (Never run in the tool itself: see in_child.) */
static int probe_device(const void *arg, char *m, size_t n)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(m, n,
		         "no CUDA driver (libcuda.so.1 not found): is this a "
		         "machine with an NVIDIA GPU and driver?");
		return 1;
	}
	int (*init)(unsigned) = (int (*)(unsigned))dlsym(h, "cuInit");
	int (*count)(int *) = (int (*)(int *))dlsym(h, "cuDeviceGetCount");
	int nd = 0, r = init ? init(0) : -1;
	if (r == 0 && count)
		r = count(&nd);
	if (r == 100 /* CUDA_ERROR_NO_DEVICE */ || (r == 0 && nd == 0)) {
		snprintf(m, n, "no CUDA device found");
		return 1;
	}
	if (r) {
		snprintf(m, n,
		         "the CUDA driver failed to initialize (error %d): does nvidia-smi see the "
		         "GPU, and does the driver match the installed CUDA?",
		         r);
		return 1;
	}
	/* CUDA 13's CUPTI traces compute capability 7.5 (Turing) and newer. CUPTRACE_MIN_COMPUTE
	 * (e.g. 100 for 10.0) raises the bar, so the GPU tests can see this refusal on any GPU. */
	const char *mc = getenv("CUPTRACE_MIN_COMPUTE");
	int min_cc = mc && atoi(mc) > 75 ? atoi(mc) : 75;
	int (*attr)(int *, int, int) = (int (*)(int *, int, int))dlsym(h, "cuDeviceGetAttribute");
	int (*name)(char *, int, int) = (int (*)(char *, int, int))dlsym(h, "cuDeviceGetName");
	int usable = 0, major = 0, minor = 0;
	char gpu[128] = "?";
	for (int d = 0; attr && d < nd; d++) {
		int ma = 0, mi = 0;
		attr(&ma, 75 /* COMPUTE_CAPABILITY_MAJOR */, d);
		attr(&mi, 76 /* COMPUTE_CAPABILITY_MINOR */, d);
		if (ma * 10 + mi >= min_cc)
			usable++;
		else if (!major && name)
			name(gpu, sizeof(gpu), d), major = ma, minor = mi;
	}
	if (attr && !usable) {
		snprintf(m, n,
		         "%s (compute capability %d.%d) cannot be traced: CUDA 13's CUPTI supports "
		         "compute capability %d.%d%s and newer",
		         gpu, major, minor, min_cc / 10, min_cc % 10,
		         min_cc == 75 ? " (Turing)" : "");
		return 1;
	}
	return 0;
}

/* getopt codes of the capture window options: WOPT + the setting's id. */
#define WOPT 1000

/* The oldest CUPTI the library works with: the API it was built against, 13.0. */
#define CUPTI_MIN_VERSION 130000u

/* Does libcuptrace.so (and so libcupti) load? A missing, old or mismatched libcupti must be a
 * clear error here, not a program that silently runs untraced (the driver says nothing when an
 * injection library fails to load). Loads the library as the driver will, first lazily to ask
 * the libcupti it finds for its version (an older one also lacks symbols, and "undefined
 * symbol" says less than "too old"), then with every symbol bound. Runs in a child: nothing
 * stays loaded in the tool. */
static int probe_library(const void *lib, char *m, size_t n)
{
	void *h = dlopen(lib, RTLD_LAZY | RTLD_LOCAL);
	if (h) {
		int (*ver)(unsigned *) = (int (*)(unsigned *))dlsym(h, "cuptiGetVersion");
		unsigned v = 0;
		if (ver && ver(&v) == 0 && v < CUPTI_MIN_VERSION) {
			Dl_info di;
			snprintf(m, n,
			         "the CUPTI it finds (%s) is version %u.%u (%u); cuptrace needs "
			         "CUPTI %u.%u or newer: install the CUDA 13 toolkit's CUPTI "
			         "(libcupti.so.13) or put its directory first on LD_LIBRARY_PATH",
			         dladdr((void *)ver, &di) && di.dli_fname ? di.dli_fname
			                                                  : "libcupti",
			         v / 10000, v / 10 % 100, v, CUPTI_MIN_VERSION / 10000,
			         CUPTI_MIN_VERSION / 10 % 100);
			return 1;
		}
	}
	if (dlopen(lib, RTLD_NOW | RTLD_LOCAL))
		return 0;
	const char *e = dlerror();
	snprintf(m, n, "%s", e ? e : "unknown error");
	return 1;
}

static int check_writable(const char *tmpl)
{
	char *p = strdup(tmpl);
	if (!p)
		return -ENOMEM;
	char *dir = dirname(p);
	int r = access(dir, W_OK) ? -errno : 0;
	if (!r) {
		struct stat st;
		if (stat(dir, &st) || !S_ISDIR(st.st_mode))
			r = -ENOTDIR;
	}
	free(p);
	return r;
}

static pid_t child_pid;

static void forward_signal(int sig)
{
	/* The terminal sends SIGINT to the whole group; a SIGTERM to the tool alone is passed on
	 * so the traced program can finish its trace. */
	if (child_pid > 0 && sig != SIGINT)
		kill(child_pid, sig);
}

/* Puts value first in the ':'-separated list of environment variable name. 0 or -1. */
static int prepend_env(const char *name, const char *value)
{
	const char *old = getenv(name);
	size_t n = strlen(value) + (old ? strlen(old) : 0) + 2;
	char *v = malloc(n);
	if (!v)
		return -1;
	snprintf(v, n, "%s%s%s", value, old && *old ? ":" : "", old && *old ? old : "");
	int r = setenv(name, v, 1);
	free(v);
	return r;
}

/* The step marks (default), --pytorch and --steps: Python finds our sitecustomize first on
 * PYTHONPATH (child processes inherit it); when the program imports torch it marks each
 * optimizer.step() (CUPTRACE_STEP_MARKS=1), turns PyTorch's NVTX op ranges on (--pytorch) and
 * tells the library of each step's end (--steps), then hands over to any sitecustomize it
 * shadows. The directory is next to libcuptrace.so (build tree) or in CUPTRACE_LIB_TO_PYTHON
 * from it (installed: share/cuptrace/python under the prefix). why NULL: the default marks,
 * which go without a word where the hook is missing (the option that asked for it fails). */
static int python_hook(const char *libpath, const char *why)
{
	char *lp = strdup(libpath), real[PATH_MAX];
	if (!lp)
		return -1;
	static const char *const rel[] = {"python", CUPTRACE_LIB_TO_PYTHON,
	                                  "../share/cuptrace/python"};
	int missing =
	    find_under(dirname(lp), rel, sizeof(rel) / sizeof(rel[0]), "sitecustomize.py", real);
	free(lp);
	if (missing && !why)
		return -1;
	if (missing) {
		fprintf(stderr,
		        "cuptrace record: %s needs python/sitecustomize.py next to %s "
		        "(or in " CUPTRACE_LIB_TO_PYTHON ")\n",
		        why, libpath);
		return -1;
	}
	*strrchr(real, '/') = 0; /* the directory that holds sitecustomize.py */
	return prepend_env("PYTHONPATH", real);
}

static int setup_pytorch(const char *libpath, int shapes)
{
	if (python_hook(libpath, "--pytorch"))
		return -1;
	setenv("CUPTRACE_PYTORCH", shapes ? "shapes" : "1", 1);
	return 0;
}

/* The capture window options, checked together as the library will read them, and handed to
 * it in their variables. *step_hook: steps come from optimizer.step() (the Python hook). */
static int record_windows(const char *const *given, int *step_hook, int *windows)
{
	struct cuptrace_wspec w = {0};
	char err[256] = "";
	struct cuptrace_setting_value v;
	for (int i = CUPTRACE_SET_DELAY; i <= CUPTRACE_SET_STEP_RANGE; i++) {
		const struct cuptrace_setting *s =
		    cuptrace_setting_get((enum cuptrace_setting_id)i);
		const char *text = given[i] ? given[i] : getenv(s->env);
		if (!text || !*text)
			continue;
		if (cuptrace_setting_parse(s, text,
		                           given[i] ? CUPTRACE_FROM_OPTION : CUPTRACE_FROM_ENV, &v,
		                           err, sizeof(err)))
			break; /* reported by the table's check already */
		switch (i) {
		case CUPTRACE_SET_DELAY:
			w.delay_ns = v.i;
			break;
		case CUPTRACE_SET_DURATION:
			w.duration_ns = v.i;
			break;
		case CUPTRACE_SET_CAPTURE_RANGE:
			cuptrace_wspec_parse_range(&w, text, err, sizeof(err));
			break;
		case CUPTRACE_SET_STEPS:
			cuptrace_wspec_parse_steps(&w, text, err, sizeof(err));
			break;
		case CUPTRACE_SET_CAPTURE_REPEAT:
			cuptrace_wspec_parse_repeat(&w, text, err, sizeof(err));
			break;
		case CUPTRACE_SET_ON_DEMAND:
			if (v.i && w.mode == CUPTRACE_WMODE_RUN)
				w.mode = CUPTRACE_WMODE_ON_DEMAND;
			break;
		case CUPTRACE_SET_RING:
			w.ring_ns = v.i;
			break;
		case CUPTRACE_SET_RING_SLOW:
			w.ring_slow = v.r;
			break;
		default:
			break;
		}
		if (given[i])
			setenv(s->env, text, 1);
	}
	if (given[CUPTRACE_SET_ON_DEMAND] &&
	    (given[CUPTRACE_SET_CAPTURE_RANGE] || given[CUPTRACE_SET_STEPS])) {
		fprintf(stderr, "cuptrace record: --on-demand opens windows by trigger only: drop "
		                "--capture-range and --steps\n");
		return -1;
	}
	err[0] = 0;
	if (cuptrace_wspec_finish(&w, err, sizeof(err))) {
		fprintf(stderr, "cuptrace record: %s\n", err);
		return -1;
	}
	const char *sr = given[CUPTRACE_SET_STEP_RANGE] ? given[CUPTRACE_SET_STEP_RANGE]
	                                                : getenv("CUPTRACE_STEP_RANGE");
	*step_hook = (w.mode == CUPTRACE_WMODE_STEPS || w.ring_slow > 1 ||
	              w.mode == CUPTRACE_WMODE_ON_DEMAND) &&
	             !(sr && *sr);
	/* Capture windows (not the flight recorder, which records from the start), as the
	 * library's window setup decides. */
	*windows = w.mode != CUPTRACE_WMODE_RUN && w.ring_ns <= 0;
	return 0;
}

/* Puts libcuptrace_preload.so (beside libcuptrace.so) first in LD_PRELOAD: it finishes the
 * trace when the program execs another image or ends with _exit, which skip atexit. Without
 * it tracing still works; such a program's trace may then end early, which record says. */
static void setup_preload(const char *libpath)
{
	char dir[PATH_MAX], pre[PATH_MAX + 32];
	snprintf(dir, sizeof(dir), "%s", libpath);
	snprintf(pre, sizeof(pre), "%s/libcuptrace_preload.so", dirname(dir));
	if (access(pre, R_OK)) {
		fprintf(stderr,
		        "cuptrace record: %s is missing: a program that execs or calls _exit may "
		        "lose the end of its trace\n",
		        pre);
		return;
	}
	prepend_env("LD_PRELOAD", pre);
}

static void setenv_opt(const char *k, const char *v)
{
	if (v)
		setenv(k, v, 1);
}

/* Lists (on stderr) the traces other processes of the command wrote: the output pattern with
 * %p and %h as wildcards, and NAME-*.EXT (children of a command whose pattern has no %p, and
 * exec'd images). Returns how many. */
static size_t list_other_traces(const char *outabs, const char *main_path, time_t since)
{
	char *pat[2] = {strdup(outabs), NULL};
	for (char *p = pat[0]; p && *p; p++)
		if (p[0] == '%' &&
		    (p[1] == 'p' || p[1] == 'h' || p[1] == 'r' || p[1] == 'l' || p[1] == 'n'))
			p[0] = '*', memmove(p + 1, p + 2, strlen(p + 2) + 1);
	if (pat[0] && !strcmp(pat[0], outabs)) {
		/* No wildcard: NAME-*.EXT, the names the library gives when the name is taken. */
		pat[1] = cuptrace_path_with_tag(outabs, "*");
		free(pat[0]);
		pat[0] = NULL;
	}
	size_t found = 0;
	for (int k = 0; k < 2; k++) {
		glob_t g;
		if (!pat[k] || glob(pat[k], 0, NULL, &g))
			continue;
		for (size_t i = 0; i < g.gl_pathc; i++) {
			struct stat sb;
			/* Older files of the pattern are other runs'. */
			if (stat(g.gl_pathv[i], &sb) || sb.st_mtime < since ||
			    (main_path && !strcmp(main_path, g.gl_pathv[i])))
				continue;
			fprintf(stderr, "cuptrace: trace of another process of the command: %s\n",
			        g.gl_pathv[i]);
			found++;
		}
		globfree(&g);
	}
	free(pat[0]);
	free(pat[1]);
	return found;
}

/* --list-gpu-metrics: the library lists them (the command itself never loads CUPTI). */
static int list_gpu_metrics(const char *lib)
{
	char libpath[PATH_MAX];
	if (lib ? !realpath(lib, libpath) : find_library(libpath, sizeof(libpath)) != 0) {
		fprintf(stderr, "cuptrace record: libcuptrace.so not found; use --lib PATH\n");
		return EXIT_FAIL;
	}
	void *h = dlopen(libpath, RTLD_NOW | RTLD_LOCAL);
	int (*list)(void) = (int (*)(void))(h ? dlsym(h, "cuptrace_list_gpu_metrics") : NULL);
	if (!list) {
		fprintf(stderr, "cuptrace record: cannot load %s: %s\n", libpath,
		        h ? "no cuptrace_list_gpu_metrics in it" : dlerror());
		return EXIT_FAIL;
	}
	fflush(stdout);
	return list() ? EXIT_FAIL : 0;
}

/* Empties and removes the run's directory (claims and notes, made by libcuptrace.so). */
static void remove_claims(const char *dir)
{
	if (!dir[0])
		return;
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.')
			unlinkat(dirfd(d), e->d_name, 0);
	if (d)
		closedir(d);
	rmdir(dir);
}

int cmd_record(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"output", required_argument, NULL, 'o'},
	    {"format", required_argument, NULL, 'f'},
	    {"capture", no_argument, NULL, 'C'},
	    {"compress", required_argument, NULL, 'z'},
	    {"compress-level", required_argument, NULL, WOPT + CUPTRACE_SET_COMPRESS_LEVEL},
	    {"cuda-graphs", required_argument, NULL, WOPT + CUPTRACE_SET_CUDA_GRAPHS},
	    {"cupti-early", no_argument, NULL, WOPT + CUPTRACE_SET_CUPTI_EARLY},
	    {"driver", required_argument, NULL, 'd'},
	    {"runtime", required_argument, NULL, 'R'},
	    {"stacks", required_argument, NULL, 'K'},
	    {"stacks-every", required_argument, NULL, 'e'},
	    {"pytorch", no_argument, NULL, 'P'},
	    {"pytorch-shapes", no_argument, NULL, 'Q'},
	    {"no-step-marks", no_argument, NULL, 'W'},
	    {"buffer-size", required_argument, NULL, 'b'},
	    {"flush-ms", required_argument, NULL, 'F'},
	    {"no-summary", no_argument, NULL, 'S'},
	    {"no-check", no_argument, NULL, 'N'},
	    {"private", no_argument, NULL, 'X'},
	    {"lib", required_argument, NULL, 'L'},
	    {"gpu-metrics", optional_argument, NULL, 'G'},
	    {"gpu-metrics-rate", required_argument, NULL, 'H'},
	    {"list-gpu-metrics", no_argument, NULL, 'M'},
	    {"help", no_argument, NULL, 'h'},
	    OTLP_CLI_OPTIONS,
	    /* Capture windows: the setting's id + WOPT, handed to the settings table as is. */
	    {"delay", required_argument, NULL, WOPT + CUPTRACE_SET_DELAY},
	    {"duration", required_argument, NULL, WOPT + CUPTRACE_SET_DURATION},
	    {"capture-range", required_argument, NULL, WOPT + CUPTRACE_SET_CAPTURE_RANGE},
	    {"steps", required_argument, NULL, WOPT + CUPTRACE_SET_STEPS},
	    {"capture-repeat", required_argument, NULL, WOPT + CUPTRACE_SET_CAPTURE_REPEAT},
	    {"on-demand", no_argument, NULL, WOPT + CUPTRACE_SET_ON_DEMAND},
	    {"ring", required_argument, NULL, WOPT + CUPTRACE_SET_RING},
	    {"ring-slow", required_argument, NULL, WOPT + CUPTRACE_SET_RING_SLOW},
	    {"ring-max", required_argument, NULL, WOPT + CUPTRACE_SET_RING_MAX},
	    {"step-range", required_argument, NULL, WOPT + CUPTRACE_SET_STEP_RANGE},
	    {0},
	};
	const char *wgiven[CUPTRACE_NSETTINGS] = {0};
	const char *gm = NULL, *gm_rate = NULL;
	int gm_list = 0;
	struct otlp_cli otlp = {0};
	const char *output = NULL, *format = NULL, *compress = NULL, *driver = NULL;
	const char *bufsz = NULL, *flushms = NULL, *lib = NULL, *runtime = NULL;
	const char *stacks = NULL, *stacks_every = NULL;
	int summary = 1, check = 1, pytorch = 0, marks = 1;
	optind = 1;
	int c;
	while ((c = getopt_long(argc, argv, "+o:f:h", opts, NULL)) != -1) {
		switch (c) {
		case 'o':
			output = optarg;
			break;
		case 'f':
			format = optarg;
			break;
		case 'C':
			format = "capture";
			break;
		case 'z':
			compress = optarg;
			break;
		case 'd':
			driver = optarg;
			break;
		case 'R':
			runtime = optarg;
			break;
		case 'K':
			stacks = optarg;
			break;
		case 'e':
			stacks_every = optarg;
			break;
		case 'P':
			pytorch = pytorch ? pytorch : 1;
			break;
		case 'Q':
			pytorch = 2;
			break;
		case 'W':
			marks = 0;
			break;
		case 'b':
			bufsz = optarg;
			break;
		case 'F':
			flushms = optarg;
			break;
		case 'S':
			summary = 0;
			break;
		case 'N':
			check = 0;
			break;
		case 'X':
			setenv("CUPTRACE_PRIVATE", "1", 1); /* read by the library's metadata */
			break;
		case 'L':
			lib = optarg;
			break;
		case 'G':
			/* --gpu-metrics LIST also works: metric names always hold "__", so a
			 * following word that does (and is no path) is the list, not the command.
			 */
			if (optarg)
				gm = optarg;
			else if (optind < argc && strstr(argv[optind], "__") &&
			         !strchr(argv[optind], '/'))
				gm = argv[optind++];
			else
				gm = "1";
			break;
		case 'H':
			gm_rate = optarg;
			break;
		case 'M':
			gm_list = 1;
			break;
		case 'h':
			record_usage(stdout);
			return 0;
		default:
			if (c >= WOPT && c < WOPT + CUPTRACE_NSETTINGS) {
				wgiven[c - WOPT] = optarg ? optarg : "1";
				break;
			}
			if (otlp_cli_take(&otlp, c, optarg))
				break;
			record_usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (gm_rate && !gm)
		gm = "1";
	/* Every setting through the one parser (common/options.h): the options given, and the
	 * CUPTRACE_* variables the library would read from this environment, so a bad value is a
	 * usage error here rather than a warning from each traced process. */
	const char *given[CUPTRACE_NSETTINGS] = {
	    [CUPTRACE_SET_FORMAT] = format,     [CUPTRACE_SET_COMPRESS] = compress,
	    [CUPTRACE_SET_DRIVER] = driver,     [CUPTRACE_SET_RUNTIME] = runtime,
	    [CUPTRACE_SET_BUFFER_SIZE] = bufsz, [CUPTRACE_SET_FLUSH_MS] = flushms,
	    [CUPTRACE_SET_GPU_METRICS] = gm,    [CUPTRACE_SET_GPU_METRICS_RATE] = gm_rate,
	    [CUPTRACE_SET_OUTPUT] = output,     [CUPTRACE_SET_LIB] = lib,
	    [CUPTRACE_SET_STACKS] = stacks,     [CUPTRACE_SET_STACKS_EVERY] = stacks_every,
	};
	for (int i = 0; i < CUPTRACE_NSETTINGS; i++) {
		if (wgiven[i])
			given[i] = wgiven[i];
		struct cuptrace_setting_value v;
		if (given[i] ? cmd_setting("record", (enum cuptrace_setting_id)i, given[i], &v)
		             : cmd_setting_env("record", (enum cuptrace_setting_id)i))
			return EXIT_USAGE;
	}
	int step_hook = 0, capture_windows = 0;
	if (record_windows(wgiven, &step_hook, &capture_windows))
		return EXIT_USAGE;
	const char *stacks_env = getenv("CUPTRACE_STACKS");
	if (stacks_every && !stacks && (!stacks_env || !*stacks_env)) {
		fprintf(stderr, "cuptrace record: --stacks-every samples the stacks of --stacks "
		                "python|native|all: give --stacks too\n");
		return EXIT_USAGE;
	}
	if (gm_list)
		return list_gpu_metrics(lib);
	if (optind >= argc) {
		fprintf(stderr, "cuptrace record: no command given\n\n");
		record_usage(stderr);
		return EXIT_USAGE;
	}
	if (otlp_cli_check(&otlp, "record", NULL))
		return EXIT_USAGE;
	int none = output && !strcmp(output, "none");
	if (none && !otlp.v[0]) {
		fprintf(stderr, "cuptrace record: -o none writes no trace: it needs --otlp URL\n");
		return EXIT_USAGE;
	}
	if (otlp.v[0] && format && !strcmp(format, "capture")) {
		fprintf(stderr,
		        "cuptrace record: --otlp sends a converted trace, not a raw capture "
		        "(send one later with 'cuptrace convert RUN.cupti --otlp URL')\n");
		return EXIT_USAGE;
	}
	char why[256];
	if (none && cuptrace_otlp_http_available(why, sizeof(why))) {
		fprintf(stderr,
		        "cuptrace record: --otlp needs libcurl (%s); install libcurl4 or write a "
		        "file with -o\n",
		        why);
		return EXIT_FAIL;
	}
	if (!output)
		output = format && !strcmp(format, "capture")  ? "cuptrace-%p.cupti"
		         : format && !strcmp(format, "chrome") ? "cuptrace-%p.json"
		                                               : "cuptrace-%p.pftrace";
	char libpath[PATH_MAX];
	if (lib) {
		if (!realpath(lib, libpath)) {
			fprintf(stderr, "cuptrace record: library %s not found: %s\n", lib,
			        strerror(errno));
			return EXIT_FAIL;
		}
	} else if (find_library(libpath, sizeof(libpath))) {
		fprintf(stderr, "cuptrace record: libcuptrace.so not found next to the cuptrace "
		                "executable or in " CUPTRACE_BIN_TO_LIB
		                "; use --lib PATH or CUPTRACE_LIB\n");
		return EXIT_FAIL;
	}
	/* The library resolves the path in the traced program's directory: make it absolute. */
	char outabs[PATH_MAX * 2];
	if (output[0] == '/' || none) {
		snprintf(outabs, sizeof(outabs), "%s", output);
	} else {
		char cwd[PATH_MAX];
		if (!getcwd(cwd, sizeof(cwd))) {
			fprintf(stderr, "cuptrace record: cannot read the current directory\n");
			return EXIT_FAIL;
		}
		snprintf(outabs, sizeof(outabs), "%s/%s", cwd, output);
	}
	char lmsg[512];
	if (in_child(probe_library, libpath, 1, lmsg, sizeof(lmsg))) {
		fprintf(stderr,
		        "cuptrace record: cannot load %s: %s\n(is CUPTI installed, and the "
		        "CUDA toolkit's lib64 on the library path?)\n",
		        libpath, lmsg[0] ? lmsg : "unknown error");
		return EXIT_FAIL;
	}
	int w = none ? 0 : check_writable(outabs);
	if (w) {
		fprintf(stderr, "cuptrace record: cannot write %s: %s\n", output, strerror(-w));
		return EXIT_FAIL;
	}
	if (check) {
		char msg[256];
		if (in_child(probe_device, NULL, 0, msg, sizeof(msg))) {
			fprintf(stderr, "cuptrace record: %s\n", msg);
			return EXIT_FAIL;
		}
	}
	/* Everything the library needs travels in the environment. */
	setenv("CUDA_INJECTION64_PATH", libpath, 1);
	/* NVTX loads its tool from here; libcuptrace forwards to CUPTI's NVTX implementation. */
	if (!getenv("NVTX_INJECTION64_PATH"))
		setenv("NVTX_INJECTION64_PATH", libpath, 1);
	setenv("CUPTRACE_OUTPUT", outabs, 1);
	setup_preload(libpath);
	unsetenv("CUPTRACE_TAKEN"); /* set by the preload library for exec'd images only */
	setenv_opt("CUPTRACE_FORMAT", format);
	setenv_opt("CUPTRACE_COMPRESS", compress);
	setenv_opt("CUPTRACE_COMPRESS_LEVEL", wgiven[CUPTRACE_SET_COMPRESS_LEVEL]);
	setenv_opt("CUPTRACE_CUDA_GRAPHS", wgiven[CUPTRACE_SET_CUDA_GRAPHS]);
	setenv_opt("CUPTRACE_CUPTI_EARLY", wgiven[CUPTRACE_SET_CUPTI_EARLY]);
	/* Whole graph launches cannot be switched on when a window opens (CUPTI 13.0 crashes the
	 * program on graphs made before; collect.c's graph_trace_usable): said here once for the
	 * whole job, rather than by every process of it. */
	struct cuptrace_setting_value cg;
	if (capture_windows && cuptrace_setting_env(CUPTRACE_SET_CUDA_GRAPHS, &cg) &&
	    cg.i == CUPTRACE_CUDA_GRAPHS_GRAPH) {
		fprintf(stderr, "cuptrace record: --cuda-graphs graph is not used with capture "
		                "windows: " CUPTRACE_GRAPH_TRACE_LATE_WHY "\n");
		setenv("CUPTRACE_CUDA_GRAPHS", "node", 1);
	}
	setenv_opt("CUPTRACE_DRIVER", driver);
	setenv_opt("CUPTRACE_RUNTIME", runtime);
	setenv_opt("CUPTRACE_STACKS", stacks);
	setenv_opt("CUPTRACE_STACKS_EVERY", stacks_every);
	if (pytorch && setup_pytorch(libpath, pytorch == 2))
		return EXIT_FAIL;
	if (step_hook && !pytorch && python_hook(libpath, "--steps"))
		return EXIT_FAIL;
	if (step_hook)
		setenv("CUPTRACE_STEP_HOOK", "optimizer", 1);
	/* Step marks by default (CUPTRACE_STEP_MARKS=0 in the environment also turns them off);
	 * the hook is on PYTHONPATH already where --pytorch or --steps put it. */
	const char *me = getenv("CUPTRACE_STEP_MARKS");
	if (me && !strcmp(me, "0"))
		marks = 0;
	if (marks && !pytorch && !step_hook && python_hook(libpath, NULL))
		marks = 0; /* no hook installed beside the library: no marks */
	setenv("CUPTRACE_STEP_MARKS", marks ? "1" : "0", 1);
	/* `cuptrace trigger --job PID` finds every traced process of this run by it. */
	char jobbuf[24];
	snprintf(jobbuf, sizeof(jobbuf), "%d", (int)getpid());
	setenv("CUPTRACE_JOB", jobbuf, 1);
	if (wgiven[CUPTRACE_SET_RING]) {
		/* The flight recorder's memory is bounded: say by how much, once. */
		struct cuptrace_setting_value rmax, rt;
		cmd_setting("record", CUPTRACE_SET_RING, wgiven[CUPTRACE_SET_RING], &rt);
		if (wgiven[CUPTRACE_SET_RING_MAX])
			cmd_setting("record", CUPTRACE_SET_RING_MAX, wgiven[CUPTRACE_SET_RING_MAX],
			            &rmax);
		else
			cuptrace_setting_env(CUPTRACE_SET_RING_MAX, &rmax);
		fprintf(
		    stderr,
		    "cuptrace record: flight recorder: the last %.3g s of each process, at most "
		    "%lld MiB of records in its memory\n",
		    (double)rt.i / 1e9, (long long)(rmax.i >> 20));
	}
	if (wgiven[CUPTRACE_SET_ON_DEMAND] || wgiven[CUPTRACE_SET_RING])
		fprintf(stderr, "cuptrace record: %s: `cuptrace trigger --job %d%s` %s\n",
		        wgiven[CUPTRACE_SET_RING] ? "flight recorder" : "on demand", (int)getpid(),
		        wgiven[CUPTRACE_SET_RING] ? "" : " --duration 2s",
		        wgiven[CUPTRACE_SET_RING] ? "writes what it holds"
		                                  : "opens a window in every process of the run");
	otlp_cli_setenv(&otlp);
	setenv_opt("CUPTRACE_BUFFER_SIZE", bufsz);
	setenv_opt("CUPTRACE_FLUSH_MS", flushms);
	setenv_opt("CUPTRACE_GPU_METRICS", gm);
	setenv_opt("CUPTRACE_GPU_METRICS_RATE", gm_rate);
	if (!summary)
		setenv("CUPTRACE_SUMMARY", "0", 1);
	char cmdline[4096] = "";
	size_t cl = 0;
	for (int i = optind; i < argc && cl < sizeof(cmdline) - 2; i++)
		cl += (size_t)snprintf(cmdline + cl, sizeof(cmdline) - cl, "%s%s",
		                       i > optind ? " " : "", argv[i]);
	if (cuptrace_private_env())
		unsetenv("CUPTRACE_CMDLINE");
	else
		setenv("CUPTRACE_CMDLINE", cmdline, 1);

	/* exec failures come back through a close-on-exec pipe. */
	int ep[2];
	if (pipe2(ep, O_CLOEXEC)) {
		perror("cuptrace record: pipe");
		return EXIT_FAIL;
	}
	struct sigaction sa = {.sa_handler = forward_signal}, old_int, old_term;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	/* Processes of the command where tracing could not start write a line here. */
	char errfile[PATH_MAX];
	const char *tdir = getenv("TMPDIR");
	snprintf(errfile, sizeof(errfile), "%s/cuptrace-record-XXXXXX",
	         tdir && *tdir ? tdir : "/tmp");
	int efd = mkstemp(errfile);
	if (efd >= 0) {
		close(efd);
		setenv("CUPTRACE_ERROR_FILE", errfile, 1);
	} else {
		errfile[0] = 0;
	}
	/* The run's directory (output/recfile.h): claims on trace names, and notes of the partial
	 * files traces are written to until complete. Emptied and removed when the command ends. */
	char claims[PATH_MAX];
	snprintf(claims, sizeof(claims), "%s/cuptrace-claims-XXXXXX",
	         tdir && *tdir ? tdir : "/tmp");
	if (mkdtemp(claims))
		setenv("CUPTRACE_CLAIMS", claims, 1);
	else
		claims[0] = 0;
	char startbuf[24];
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	snprintf(startbuf, sizeof(startbuf), "%lld",
	         (long long)now.tv_sec * 1000000000LL + now.tv_nsec);
	setenv("CUPTRACE_RECORD_START", startbuf, 1); /* traces older than this are other runs' */
	time_t started = time(NULL) - 1;              /* mtime granularity: a second */
	child_pid = fork();
	if (child_pid < 0) {
		perror("cuptrace record: fork");
		return EXIT_FAIL;
	}
	if (child_pid == 0) {
		sigaction(SIGINT, &old_int, NULL);
		sigaction(SIGTERM, &old_term, NULL);
		close(ep[0]);
		/* The command's own trace keeps the requested name; its children's get -PID. */
		char pidbuf[24];
		snprintf(pidbuf, sizeof(pidbuf), "%d", (int)getpid());
		setenv("CUPTRACE_ROOT_PID", pidbuf, 1);
		execvp(argv[optind], argv + optind);
		int e = errno;
		ssize_t k = write(ep[1], &e, sizeof(e));
		(void)k;
		_exit(127);
	}
	close(ep[1]);
	int exec_errno = 0;
	ssize_t k = read(ep[0], &exec_errno, sizeof(exec_errno));
	close(ep[0]);
	int st = 0;
	while (waitpid(child_pid, &st, 0) < 0 && errno == EINTR)
		;
	/* Traces that processes of the command left unfinished (SIGKILL, a crash) go in place,
	 * before the run's directory, which notes them, is removed. */
	record_leftovers(claims);
	remove_claims(claims);
	if (k == (ssize_t)sizeof(exec_errno)) {
		if (errfile[0])
			unlink(errfile);
		fprintf(stderr, "cuptrace record: cannot run '%s': %s\n", argv[optind],
		        exec_errno == ENOENT ? "command not found" : strerror(exec_errno));
		return exec_errno == ENOENT ? 127 : 126;
	}
	int status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	/* Where did the trace go? The pid of the command is the one that matters first. */
	char *expected = none ? NULL : cuptrace_path_expand(outabs, (int)child_pid);
	struct stat sb;
	int have_main = expected && stat(expected, &sb) == 0 && sb.st_mtime >= started;
	if (have_main)
		fprintf(stderr, "cuptrace: %s: %lld bytes\n", expected, (long long)sb.st_size);
	if (!none) {
		/* Children of the command that used CUDA, and exec'd images: their traces are
		 * NAME-<pid>.EXT, or the pattern's %p / %h filled in. */
		size_t found = list_other_traces(outabs, expected, started);
		/* A run whose windows (from options or CUPTRACE_* variables alike) never opened
		 * wrote nothing, as asked. */
		if (!found && !have_main && capture_windows)
			fprintf(stderr,
			        "cuptrace record: no capture window opened: no trace written\n");
		else if (!found && !have_main)
			fprintf(
			    stderr,
			    "cuptrace record: no trace was written. Either the program never "
			    "initialized CUDA, or tracing could not start (see the messages "
			    "above: CUPTI already in use by another tool, unwritable output).\n");
	}
	free(expected);
	if (errfile[0]) {
		int failed = 0, ch;
		FILE *ef = fopen(errfile, "r");
		while (ef && (ch = fgetc(ef)) != EOF)
			failed += ch == '\n';
		if (ef)
			fclose(ef);
		unlink(errfile);
		if (failed) {
			fprintf(stderr,
			        "cuptrace record: tracing could not start in %d process%s of the "
			        "command (see above)%s\n",
			        failed, failed > 1 ? "es" : "",
			        status ? "" : "; exit status 1 though the command succeeded");
			if (!status)
				status = EXIT_FAIL;
		}
	}
	return status;
}
