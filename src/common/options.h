/* The settings `cuptrace record` / `convert` take as options and libcuptrace.so reads from
 * CUPTRACE_* variables: one table, one parser per kind of value, one message per bad value.
 * The command line parses `--opt VALUE` with cuptrace_setting_parse and hands the text on to
 * the traced program in the setting's variable; the library parses that variable with the same
 * function (cuptrace_setting_env). A bad option is a usage error; a bad variable costs the
 * library one warning and the setting's default, never the program (the library never exits).
 *
 * Adding a setting: an id below, a row in settings[] (options.c), and, for a command-line
 * option, a row in the command line's option table (tools/cli/opt_table.c) whose id is
 * CMD_WOPT + the setting's id, which `record` hands to cuptrace_setting_parse.
 * Thread-safe: the table is constant; cuptrace_setting_env only reads the environment. */
#ifndef CUPTRACE_COMMON_OPTIONS_H
#define CUPTRACE_COMMON_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

enum cuptrace_setting_kind {
	CUPTRACE_SETTING_BOOL,     /* 1/0, true/false, yes/no, on/off -> i */
	CUPTRACE_SETTING_ENUM,     /* one of names[] -> its value in i */
	CUPTRACE_SETTING_DURATION, /* 500ms, 2s, 1m, 1h, 250us, 10ns, or a number in unit_ns -> ns
	                            */
	CUPTRACE_SETTING_SIZE,     /* a byte count -> i */
	CUPTRACE_SETTING_COUNT,    /* a whole number (may be negative where min is) -> i */
	CUPTRACE_SETTING_REAL,     /* a decimal number -> r */
	CUPTRACE_SETTING_STRING,   /* any non-empty text -> s */
	CUPTRACE_SETTING_LIST,     /* comma-separated non-empty items -> s (see validate) */
};

enum cuptrace_setting_id {
	CUPTRACE_SET_OUTPUT,
	CUPTRACE_SET_FORMAT,
	CUPTRACE_SET_COMPRESS,
	CUPTRACE_SET_DRIVER,
	CUPTRACE_SET_RUNTIME,
	CUPTRACE_SET_BUFFER_SIZE,
	CUPTRACE_SET_FLUSH_MS,
	CUPTRACE_SET_SUMMARY,
	CUPTRACE_SET_GPU_METRICS,
	CUPTRACE_SET_GPU_METRICS_RATE,
	CUPTRACE_SET_GPU_METRICS_CLOCK,
	CUPTRACE_SET_GPU_METRICS_NICE,
	CUPTRACE_SET_QUEUE,
	CUPTRACE_SET_FAULT_BUFFERS,
	CUPTRACE_SET_SIGNALS,
	CUPTRACE_SET_LOG,
	CUPTRACE_SET_API_ENABLE,
	CUPTRACE_SET_LIB,
	/* Capture windows (common/wspec.h, window/window.h). */
	CUPTRACE_SET_DELAY,
	CUPTRACE_SET_DURATION,
	CUPTRACE_SET_CAPTURE_RANGE,
	CUPTRACE_SET_STEPS,
	CUPTRACE_SET_CAPTURE_REPEAT,
	CUPTRACE_SET_ON_DEMAND,
	CUPTRACE_SET_RING,
	CUPTRACE_SET_RING_SLOW,
	CUPTRACE_SET_RING_MAX,
	CUPTRACE_SET_STEP_RANGE,
	CUPTRACE_SET_WINDOW_DRAIN,
	CUPTRACE_SET_JOB,
	CUPTRACE_SET_STACKS,
	CUPTRACE_SET_STACKS_EVERY,
	CUPTRACE_SET_COMPRESS_LEVEL,
	CUPTRACE_SET_CUDA_GRAPHS,
	CUPTRACE_SET_CUPTI_EARLY,
	CUPTRACE_SET_SYNC_RECORDS,
	CUPTRACE_SET_SAMPLE,         /* host stack samples a second per thread, 0: off (issue 46) */
	CUPTRACE_SET_SAMPLE_THREADS, /* CUPTRACE_SAMPLE_THREADS_* */
	CUPTRACE_SET_SAMPLE_NATIVE,  /* host stack samples carry native frames too */
	CUPTRACE_SET_OVERHEAD_TRACKS,
	/* --otlp and its options (format/otlp.h's struct cuptrace_otlp_opts): record hands them to
	 * the library, convert gives them to the sink. */
	CUPTRACE_SET_OTLP_URL,
	CUPTRACE_SET_OTLP_SERVICE,
	CUPTRACE_SET_OTLP_TRACE_PER,
	CUPTRACE_SET_OTLP_BATCH,
	CUPTRACE_SET_OTLP_INTERVAL,
	CUPTRACE_SET_OTLP_WINDOW,
	CUPTRACE_SET_OTLP_TIMEOUT,
	CUPTRACE_NSETTINGS
};

/* Values of enum settings. */
enum { CUPTRACE_SAMPLE_THREADS_CUDA, CUPTRACE_SAMPLE_THREADS_ALL };
enum {
	CUPTRACE_OUTFMT_AUTO,
	CUPTRACE_OUTFMT_PERFETTO,
	CUPTRACE_OUTFMT_CHROME,
	CUPTRACE_OUTFMT_CAPTURE
};
/* CUPTRACE_SET_DRIVER: which driver API calls are recorded (inject/api_enable.h). WORK (the
 * default): the calls that make, order or wait for GPU work (convert.h's
 * cuptrace_driver_cbid_is_work); USER: every call but the runtime's own; ALL: every call. */
enum { CUPTRACE_DRIVER_USER, CUPTRACE_DRIVER_ALL, CUPTRACE_DRIVER_WORK };
/* CUPTRACE_SET_SYNC_RECORDS: synchronizations timed by cuptrace's callbacks on the calls that
 * synchronize (inject/sync_watch.h), or CUPTI's SYNCHRONIZATION kind (paid on every launch). */
enum { CUPTRACE_SYNC_RECORDS_CALLBACK, CUPTRACE_SYNC_RECORDS_CUPTI };
/* CUPTRACE_SET_STACKS: bits of what is unwound at each launch-type call (inject/stacks.h). */
enum {
	CUPTRACE_STACKS_NONE = 0,
	CUPTRACE_STACKS_PYTHON = 1,
	CUPTRACE_STACKS_NATIVE = 2,
	CUPTRACE_STACKS_ALL = 3,
	/* with PYTHON: only threads that hold the GIL at the call (never take it back) */
	CUPTRACE_STACKS_HELD_ONLY = 4
};
/* CUPTRACE_SET_RUNTIME: enum cuptrace_runtime_mode's values (inject/runtime_watch.h). */
enum { CUPTRACE_RUNTIME_MODE_FILTERED, CUPTRACE_RUNTIME_MODE_WATCH, CUPTRACE_RUNTIME_MODE_ALL };
/* CUPTRACE_SET_CUDA_GRAPHS: a CUDA graph launch as its nodes (kernels, copies, memsets), or as
 * one slice (CUPTI's GRAPH_TRACE kind; inject/kinds.h). */
enum { CUPTRACE_CUDA_GRAPHS_NODE, CUPTRACE_CUDA_GRAPHS_GRAPH };
/* CUPTRACE_SET_OVERHEAD_TRACKS: CUPTI's overhead on one track per process, or one per thread
 * (src/format/TIMELINE.md). */
enum { CUPTRACE_OVERHEAD_PROCESS, CUPTRACE_OVERHEAD_THREAD };
/* Why graph falls back to node with capture windows or a late C API start: said by `record`
 * (once for the job) and by the library (collect.c's graph_trace_usable), in the same words. */
#define CUPTRACE_GRAPH_TRACE_LATE_WHY                                                              \
	"CUPTI 13.0 crashes the program when it starts recording whole graph launches after "      \
	"graphs exist. CUDA graphs are recorded node by node."
/* CUPTRACE_SET_COMPRESS: enum cuptrace_compress's values (output/output.h); -1 = by extension. */
/* CUPTRACE_SET_GPU_METRICS: i = 0 off, 1 the default set, 2 the list in s. */
enum { CUPTRACE_GPU_METRICS_OFF, CUPTRACE_GPU_METRICS_DEFAULT, CUPTRACE_GPU_METRICS_LIST };
/* CUPTRACE_SET_GPU_METRICS_CLOCK: -1 auto, else a clockid_t. CUPTRACE_SET_LOG: a log level.
 * CUPTRACE_SET_API_ENABLE: 0 by kind, 1 by cbid (inject/kinds.h). */

struct cuptrace_setting_name {
	const char *name;
	int64_t value;
	int alias; /* accepted, not listed in messages */
};

struct cuptrace_setting_value {
	int64_t i;     /* BOOL, ENUM, DURATION (ns), SIZE, COUNT, GPU_METRICS's mode */
	double r;      /* REAL */
	const char *s; /* STRING, LIST: the text parsed (not copied: lives as long as it does) */
};

struct cuptrace_setting {
	enum cuptrace_setting_id id;
	const char *option; /* long option, without "--"; NULL: a variable only */
	const char *env;    /* CUPTRACE_* variable */
	enum cuptrace_setting_kind kind;
	const struct cuptrace_setting_name *names; /* ENUM: ends with a NULL name */
	int64_t min, max;                          /* DURATION (ns), SIZE, COUNT: inclusive */
	double rmin, rmax;                         /* REAL: inclusive */
	int64_t unit_ns;                           /* DURATION: the unit of a bare number */
	const char *def;                           /* the default, as text ("" for none) */
	const char *expect;                        /* what a good value is, for messages */
	/* Checks what the kind cannot (or sets what it means, as GPU_METRICS's mode): 0, or
	 * -EINVAL with why (the part after the value in parentheses) in err. NULL: none. */
	int (*validate)(const char *text, struct cuptrace_setting_value *v, char *err, size_t n);
};

/* The setting with this id / long option / variable name; NULL if none. */
const struct cuptrace_setting *cuptrace_setting_get(enum cuptrace_setting_id id);
const struct cuptrace_setting *cuptrace_setting_by_option(const char *option);
const struct cuptrace_setting *cuptrace_setting_by_env(const char *env);

/* How a setting is named in its messages: where the text came from. */
enum cuptrace_setting_from { CUPTRACE_FROM_OPTION, CUPTRACE_FROM_ENV };

/* Parses text as setting s into *v. 0, or -EINVAL with one line in err (n bytes):
 * "bad value for --driver: 'x' (takes user or all)", or "... for CUPTRACE_DRIVER: ...". */
int cuptrace_setting_parse(const struct cuptrace_setting *s, const char *text,
                           enum cuptrace_setting_from from, struct cuptrace_setting_value *v,
                           char *err, size_t n);

/* The library's side: the setting from its variable; unset or empty gives the default. A bad
 * value is warned about (cuptrace_warn, once per setting and process) and gives the default.
 * Returns 1 if the variable gave the value, 0 if the default did. */
int cuptrace_setting_env(enum cuptrace_setting_id id, struct cuptrace_setting_value *v);

/* A duration: a decimal number with an optional unit (ns, us, ms, s, m, h; none: unit_ns),
 * e.g. "500ms", "2s", "1.5m", "250". 0 with *ns set, or -EINVAL (negative, garbage, overflow).
 */
int cuptrace_parse_duration(const char *text, int64_t unit_ns, int64_t *ns);

#endif
