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
#include "opt_table.h"
#include "otlp_cli.h"
#include "output/otlp_http.h"
#include "output/output.h"

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

/* The Python package (`import cuptrace`, always), the step marks (default), --pytorch and
 * --steps: Python finds the package and our sitecustomize first on PYTHONPATH (child processes
 * inherit it); when the program imports torch the hook marks each
 * optimizer.step() (CUPTRACE_STEP_MARKS=1), turns PyTorch's NVTX op ranges on (--pytorch) and
 * tells the library of each step's end (--steps), then hands over to any sitecustomize it
 * shadows. The directory is next to libcuptrace.so (build tree) or in CUPTRACE_LIB_TO_PYTHON
 * from it (installed: share/cuptrace/python under the prefix). why NULL: the package and the
 * default marks, which go without a word where the hook is missing (the option that asked for
 * it fails). */
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

/* What `record` was asked: the options as given (borrowed from argv), then what the check
 * step worked out from them (the library, the output's absolute path). */
struct record_opts {
	const char *wgiven[CUPTRACE_NSETTINGS]; /* settings given as options, by id */
	const char *output, *format, *compress, *driver, *bufsz, *flushms, *lib, *runtime;
	const char *stacks, *stacks_every, *gm, *gm_rate;
	int gm_list, summary, check, pytorch, marks, private_;
	/* from the check */
	int none, step_hook, capture_windows;
	char libpath[PATH_MAX];
	char outabs[PATH_MAX * 2];
};

/* record_check's answer for --list-gpu-metrics: list them instead of running a command. */
#define RECORD_LIST_METRICS (-2)

/* The options into o: -1 to go on, else the exit code (0 after --help). */
static int record_parse(struct record_opts *o, int argc, char **argv)
{
	int c;
	while ((c = cli_next(CLI_RECORD, argc, argv)) != CLI_END) {
		switch (c) {
		case 'o':
			o->output = optarg;
			break;
		case 'f':
			o->format = optarg;
			break;
		case 'C':
			o->format = "capture";
			break;
		case 'z':
			o->compress = optarg;
			break;
		case 'd':
			o->driver = optarg;
			break;
		case 'R':
			o->runtime = optarg;
			break;
		case 'K':
			o->stacks = optarg;
			break;
		case 'e':
			o->stacks_every = optarg;
			break;
		case 'P':
			o->pytorch = o->pytorch ? o->pytorch : 1;
			break;
		case 'Q':
			o->pytorch = 2;
			break;
		case 'W':
			o->marks = 0;
			break;
		case 'b':
			o->bufsz = optarg;
			break;
		case 'F':
			o->flushms = optarg;
			break;
		case 'S':
			o->summary = 0;
			break;
		case 'N':
			o->check = 0;
			break;
		case 'X':
			o->private_ = 1;
			break;
		case 'L':
			o->lib = optarg;
			break;
		case 'G':
			/* --gpu-metrics LIST also works: metric names always hold "__", so a
			 * following word that does (and is no path) is the list, not the command.
			 */
			if (optarg)
				o->gm = optarg;
			else if (optind < argc && strstr(argv[optind], "__") &&
			         !strchr(argv[optind], '/'))
				o->gm = argv[optind++];
			else
				o->gm = "1";
			break;
		case 'H':
			o->gm_rate = optarg;
			break;
		case 'M':
			o->gm_list = 1;
			break;
		default:
			if (c >= CMD_WOPT && c < CMD_WOPT + CUPTRACE_NSETTINGS)
				o->wgiven[c - CMD_WOPT] = optarg ? optarg
				                          : c == CMD_WOPT + CUPTRACE_SET_SAMPLE
				                              ? "100" /* --sample alone */
				                              : "1";
			break;
		}
	}
	return cli_status();
}

/* Every value through the one parser of settings (so a bad option or CUPTRACE_* variable is a
 * usage error here rather than a warning from each traced process), the combinations, the
 * library, the output and the device: -1 to go on, RECORD_LIST_METRICS, or the exit code after
 * one line on stderr. */
static int record_check(struct record_opts *o, int argc, char **argv)
{
	(void)argv;
	if (o->gm_rate && !o->gm)
		o->gm = "1";
	/* Every setting through the one parser (common/options.h): the options given, and the
	 * CUPTRACE_* variables the library would read from this environment, so a bad value is a
	 * usage error here rather than a warning from each traced process. */
	const char *given[CUPTRACE_NSETTINGS] = {
	    [CUPTRACE_SET_FORMAT] = o->format,     [CUPTRACE_SET_COMPRESS] = o->compress,
	    [CUPTRACE_SET_DRIVER] = o->driver,     [CUPTRACE_SET_RUNTIME] = o->runtime,
	    [CUPTRACE_SET_BUFFER_SIZE] = o->bufsz, [CUPTRACE_SET_FLUSH_MS] = o->flushms,
	    [CUPTRACE_SET_GPU_METRICS] = o->gm,    [CUPTRACE_SET_GPU_METRICS_RATE] = o->gm_rate,
	    [CUPTRACE_SET_OUTPUT] = o->output,     [CUPTRACE_SET_LIB] = o->lib,
	    [CUPTRACE_SET_STACKS] = o->stacks,     [CUPTRACE_SET_STACKS_EVERY] = o->stacks_every,
	};
	for (int i = 0; i < CUPTRACE_NSETTINGS; i++) {
		if (o->wgiven[i])
			given[i] = o->wgiven[i];
		struct cuptrace_setting_value v;
		if (given[i] ? cmd_setting("record", (enum cuptrace_setting_id)i, given[i], &v)
		             : cmd_setting_env("record", (enum cuptrace_setting_id)i))
			return EXIT_USAGE;
	}
	if (record_windows(o->wgiven, &o->step_hook, &o->capture_windows))
		return EXIT_USAGE;
	const char *stacks_env = getenv("CUPTRACE_STACKS");
	if (o->stacks_every && !o->stacks && (!stacks_env || !*stacks_env)) {
		fprintf(stderr, "cuptrace record: --stacks-every samples the stacks of --stacks "
		                "python|native|all: give --stacks too\n");
		return EXIT_USAGE;
	}
	if (o->gm_list)
		return RECORD_LIST_METRICS;
	if (optind >= argc) {
		cli_usage_error(CLI_RECORD,
		                "no command given (cuptrace record [options] -- command)");
		return EXIT_USAGE;
	}
	if (otlp_cli_check(CLI_RECORD, o->wgiven))
		return EXIT_USAGE;
	const char *otlp = o->wgiven[CUPTRACE_SET_OTLP_URL];
	o->none = o->output && !strcmp(o->output, "none");
	if (o->none && !otlp) {
		fprintf(stderr, "cuptrace record: -o none writes no trace: it needs --otlp URL\n");
		return EXIT_USAGE;
	}
	if (otlp && o->format && !strcmp(o->format, "capture")) {
		fprintf(stderr,
		        "cuptrace record: --otlp sends a converted trace, not a raw capture "
		        "(send one later with 'cuptrace convert RUN.cupti --otlp URL')\n");
		return EXIT_USAGE;
	}
	char why[256];
	if (o->none && cuptrace_otlp_http_available(why, sizeof(why))) {
		fprintf(stderr,
		        "cuptrace record: --otlp needs libcurl (%s); install libcurl4 or write a "
		        "file with -o\n",
		        why);
		return EXIT_FAIL;
	}
	if (!o->output)
		o->output = o->format && !strcmp(o->format, "capture")  ? "cuptrace-%p.cupti"
		            : o->format && !strcmp(o->format, "chrome") ? "cuptrace-%p.json"
		                                                        : "cuptrace-%p.pftrace";
	if (o->lib) {
		if (!realpath(o->lib, o->libpath)) {
			fprintf(stderr, "cuptrace record: library %s not found: %s\n", o->lib,
			        strerror(errno));
			return EXIT_FAIL;
		}
	} else if (find_library(o->libpath, sizeof(o->libpath))) {
		fprintf(stderr, "cuptrace record: libcuptrace.so not found next to the cuptrace "
		                "executable or in " CUPTRACE_BIN_TO_LIB
		                "; use --lib PATH or CUPTRACE_LIB\n");
		return EXIT_FAIL;
	}
	/* The library resolves the path in the traced program's directory: make it absolute. */
	if (o->output[0] == '/' || o->none) {
		snprintf(o->outabs, sizeof(o->outabs), "%s", o->output);
	} else {
		char cwd[PATH_MAX];
		if (!getcwd(cwd, sizeof(cwd))) {
			fprintf(stderr, "cuptrace record: cannot read the current directory\n");
			return EXIT_FAIL;
		}
		snprintf(o->outabs, sizeof(o->outabs), "%s/%s", cwd, o->output);
	}
	char lmsg[512];
	if (in_child(probe_library, o->libpath, 1, lmsg, sizeof(lmsg))) {
		fprintf(stderr,
		        "cuptrace record: cannot load %s: %s\n(is CUPTI installed, and the "
		        "CUDA toolkit's lib64 on the library path?)\n",
		        o->libpath, lmsg[0] ? lmsg : "unknown error");
		return EXIT_FAIL;
	}
	int w = o->none ? 0 : check_writable(o->outabs);
	if (w) {
		fprintf(stderr, "cuptrace record: cannot write %s: %s\n", o->output, strerror(-w));
		return EXIT_FAIL;
	}
	if (o->check) {
		char msg[256];
		if (in_child(probe_device, NULL, 0, msg, sizeof(msg))) {
			fprintf(stderr, "cuptrace record: %s\n", msg);
			return EXIT_FAIL;
		}
	}
	return -1;
}

/* Everything the library needs travels in the environment: -1, or the exit code. */
static int record_env(struct record_opts *o, int argc, char **argv)
{
	/* Everything the library needs travels in the environment. */
	setenv("CUDA_INJECTION64_PATH", o->libpath, 1);
	/* NVTX loads its tool from here; libcuptrace forwards to CUPTI's NVTX implementation. */
	if (!getenv("NVTX_INJECTION64_PATH"))
		setenv("NVTX_INJECTION64_PATH", o->libpath, 1);
	setenv("CUPTRACE_OUTPUT", o->outabs, 1);
	if (o->private_)
		setenv("CUPTRACE_PRIVATE", "1", 1); /* read by the library's metadata */
	setup_preload(o->libpath);
	unsetenv("CUPTRACE_TAKEN"); /* set by the preload library for exec'd images only */
	setenv_opt("CUPTRACE_FORMAT", o->format);
	setenv_opt("CUPTRACE_COMPRESS", o->compress);
	setenv_opt("CUPTRACE_COMPRESS_LEVEL", o->wgiven[CUPTRACE_SET_COMPRESS_LEVEL]);
	setenv_opt("CUPTRACE_CUDA_GRAPHS", o->wgiven[CUPTRACE_SET_CUDA_GRAPHS]);
	setenv_opt("CUPTRACE_CUPTI_EARLY", o->wgiven[CUPTRACE_SET_CUPTI_EARLY]);
	setenv_opt("CUPTRACE_SYNC_RECORDS", o->wgiven[CUPTRACE_SET_SYNC_RECORDS]);
	setenv_opt("CUPTRACE_SAMPLE", o->wgiven[CUPTRACE_SET_SAMPLE]);
	setenv_opt("CUPTRACE_SAMPLE_THREADS", o->wgiven[CUPTRACE_SET_SAMPLE_THREADS]);
	setenv_opt("CUPTRACE_SAMPLE_NATIVE", o->wgiven[CUPTRACE_SET_SAMPLE_NATIVE]);
	setenv_opt("CUPTRACE_OVERHEAD_TRACKS", o->wgiven[CUPTRACE_SET_OVERHEAD_TRACKS]);
	/* Whole graph launches cannot be switched on when a window opens (CUPTI 13.0 crashes the
	 * program on graphs made before; collect.c's graph_trace_usable): said here once for the
	 * whole job, rather than by every process of it. */
	struct cuptrace_setting_value cg;
	if (o->capture_windows && cuptrace_setting_env(CUPTRACE_SET_CUDA_GRAPHS, &cg) &&
	    cg.i == CUPTRACE_CUDA_GRAPHS_GRAPH) {
		fprintf(stderr, "cuptrace record: --cuda-graphs graph is not used with capture "
		                "windows: " CUPTRACE_GRAPH_TRACE_LATE_WHY "\n");
		setenv("CUPTRACE_CUDA_GRAPHS", "node", 1);
	}
	setenv_opt("CUPTRACE_DRIVER", o->driver);
	setenv_opt("CUPTRACE_RUNTIME", o->runtime);
	setenv_opt("CUPTRACE_STACKS", o->stacks);
	setenv_opt("CUPTRACE_STACKS_EVERY", o->stacks_every);
	if (o->pytorch && setup_pytorch(o->libpath, o->pytorch == 2))
		return EXIT_FAIL;
	if (o->step_hook && !o->pytorch && python_hook(o->libpath, "--steps"))
		return EXIT_FAIL;
	if (o->step_hook)
		setenv("CUPTRACE_STEP_HOOK", "optimizer", 1);
	/* The hook's folder holds the Python package too: on PYTHONPATH always, so that `import
	 * cuptrace` works under record whatever the step marks are (the hook does nothing without
	 * CUPTRACE_STEP_MARKS=1, --pytorch or --steps). --pytorch and --steps put it there already.
	 * Step marks by default (CUPTRACE_STEP_MARKS=0 in the environment also turns them off). */
	int hooked = o->pytorch || o->step_hook || python_hook(o->libpath, NULL) == 0;
	const char *me = getenv("CUPTRACE_STEP_MARKS");
	if (me && !strcmp(me, "0"))
		o->marks = 0;
	if (!hooked)
		o->marks = 0; /* no hook installed beside the library: no marks */
	setenv("CUPTRACE_STEP_MARKS", o->marks ? "1" : "0", 1);
	/* `cuptrace trigger --job PID` finds every traced process of this run by it. */
	char jobbuf[24];
	snprintf(jobbuf, sizeof(jobbuf), "%d", (int)getpid());
	setenv("CUPTRACE_JOB", jobbuf, 1);
	if (o->wgiven[CUPTRACE_SET_RING]) {
		/* The flight recorder's memory is bounded: say by how much, once. */
		struct cuptrace_setting_value rmax, rt;
		cmd_setting("record", CUPTRACE_SET_RING, o->wgiven[CUPTRACE_SET_RING], &rt);
		if (o->wgiven[CUPTRACE_SET_RING_MAX])
			cmd_setting("record", CUPTRACE_SET_RING_MAX,
			            o->wgiven[CUPTRACE_SET_RING_MAX], &rmax);
		else
			cuptrace_setting_env(CUPTRACE_SET_RING_MAX, &rmax);
		fprintf(
		    stderr,
		    "cuptrace record: flight recorder: the last %.3g s of each process, at most "
		    "%lld MiB of records in its memory\n",
		    (double)rt.i / 1e9, (long long)(rmax.i >> 20));
	}
	if (o->wgiven[CUPTRACE_SET_ON_DEMAND] || o->wgiven[CUPTRACE_SET_RING])
		fprintf(stderr, "cuptrace record: %s: `cuptrace trigger --job %d%s` %s\n",
		        o->wgiven[CUPTRACE_SET_RING] ? "flight recorder" : "on demand",
		        (int)getpid(), o->wgiven[CUPTRACE_SET_RING] ? "" : " --duration 2s",
		        o->wgiven[CUPTRACE_SET_RING]
		            ? "writes what it holds"
		            : "opens a window in every process of the run");
	for (int i = CUPTRACE_SET_OTLP_URL; i <= CUPTRACE_SET_OTLP_TIMEOUT; i++)
		setenv_opt(cuptrace_setting_get((enum cuptrace_setting_id)i)->env, o->wgiven[i]);
	setenv_opt("CUPTRACE_BUFFER_SIZE", o->bufsz);
	setenv_opt("CUPTRACE_FLUSH_MS", o->flushms);
	setenv_opt("CUPTRACE_GPU_METRICS", o->gm);
	setenv_opt("CUPTRACE_GPU_METRICS_RATE", o->gm_rate);
	if (!o->summary)
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

	return -1;
}

/* Runs the command (argv[optind]...), waits for it, and says where the traces went. Returns
 * the command's exit status (128+N for signal N; 126/127 when it could not be run). */
static int record_run(struct record_opts *o, int argc, char **argv)
{
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
	char *expected = o->none ? NULL : cuptrace_path_expand(o->outabs, (int)child_pid);
	struct stat sb;
	int have_main = expected && stat(expected, &sb) == 0 && sb.st_mtime >= started;
	if (have_main)
		fprintf(stderr, "cuptrace: %s: %lld bytes\n", expected, (long long)sb.st_size);
	if (!o->none) {
		/* Children of the command that used CUDA, and exec'd images: their traces are
		 * NAME-<pid>.EXT, or the pattern's %p / %h filled in. */
		size_t found = list_other_traces(o->outabs, expected, started);
		/* A run whose windows (from options or CUPTRACE_* variables alike) never opened
		 * wrote nothing, as asked. */
		if (!found && !have_main && o->capture_windows)
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

int cmd_record(int argc, char **argv)
{
	struct record_opts o = {.summary = 1, .check = 1, .marks = 1};
	int r = record_parse(&o, argc, argv);
	if (r < 0)
		r = record_check(&o, argc, argv);
	if (r == RECORD_LIST_METRICS)
		return list_gpu_metrics(o.lib);
	if (r < 0)
		r = record_env(&o, argc, argv);
	return r < 0 ? record_run(&o, argc, argv) : r;
}
