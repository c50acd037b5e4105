/* GPU time by source line (--group-by line, issue 27): a synthetic trace built here with Python
 * stacks through site-packages, dist-packages, the standard library and a frozen frame, user
 * frames, native frames (symbolized and not), a stack of runtime frames only, and GPU work
 * without a stack; the work reaches its stack by its own stack id, by the flow from its launch
 * and by correlation id. Rows and times are computed here from the launch table and lines
 * written by hand; then `cuptrace stats`, `diff` and `analyze --group-by line` on the trace
 * written as Chrome JSON (stacks in the "stack" arg), --skip-frames and --keep-frames. */
#include "check.h"

#include "lines/lines.h"
#include "stats/stats.h"
#include "format/formats.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PY     CUPTRACE_FRAME_PYTHON
#define NA     CUPTRACE_FRAME_NATIVE
#define CUDART "/usr/lib/x86_64-linux-gnu/libcudart.so.13"

/* Outermost first. */
static const struct cuptrace_frame s0[] = {
    {PY, "main", "/home/u/proj/train.py", 10, NULL, NULL, 0},
    {PY, "forward", "/home/u/proj/model.py", 42, NULL, NULL, 0},
    {PY, "linear", "/opt/venv/lib/python3.12/site-packages/torch/nn/functional.py", 100, NULL, NULL,
     0},
    {PY, "__enter__", "/usr/lib/python3.12/contextlib.py", 137, NULL, NULL, 0},
};
static const struct cuptrace_frame s1[] = {
    {PY, "main", "/home/u/proj/train.py", 10, NULL, NULL, 0},
    {PY, "step", "/home/u/proj/train.py", 20, NULL, NULL, 0},
    {PY, "_call", "<frozen importlib._bootstrap>", 241, NULL, NULL, 0},
    {PY, "f", "/usr/lib/python3/dist-packages/cupy/_core.py", 5, NULL, NULL, 0},
};
static const struct cuptrace_frame s2[] = {
    {PY, "main", "/home/u/proj/train.py", 10, NULL, NULL, 0},
    {PY, "launch", "/home/u/proj/utils/helpers.py", 7, NULL, NULL, 0},
};
static const struct cuptrace_frame s3[] = {
    {PY, "main", "/home/u/proj/train.py", 30, NULL, NULL, 0},
    {PY, "op", "/opt/venv/lib/python3.12/site-packages/mylib/ops.py", 33, NULL, NULL, 0},
};
static const struct cuptrace_frame s4[] = {
    {NA, NULL, NULL, 0, "/home/u/app/app", NULL, 0x1100},
    {NA, NULL, NULL, 0, "/home/u/app/libmine.so", NULL, 0x1234},
    {NA, NULL, NULL, 0, CUDART, NULL, 0x5000},
    {NA, NULL, NULL, 0, "/usr/lib/x86_64-linux-gnu/libcuda.so.1", NULL, 0x7000},
};
static const struct cuptrace_frame s5[] = {
    {NA, "main", "/home/u/app/app.c", 12, "/home/u/app/app", NULL, 0x1100},
    {NA, "cudaLaunchKernel", NULL, 0, CUDART, NULL, 0x5000},
};
static const struct cuptrace_frame s6[] = {
    {NA, NULL, NULL, 0, "/lib/x86_64-linux-gnu/libc.so.6", NULL, 0x29d90},
    {NA, NULL, NULL, 0, CUDART, NULL, 0x6000},
};
static const struct cuptrace_stack stacks[] = {
    {1, s0, 4}, {2, s1, 4}, {3, s2, 2}, {4, s3, 2}, {5, s4, 4}, {6, s5, 2}, {7, s6, 2},
};
enum { NSTACKS = sizeof(stacks) / sizeof(stacks[0]) };

/* The user line of each stack, by hand: [0] built-in rule, [1] with skip_pats and keep_pats
 * below. */
static const char *const expect_line[NSTACKS][2] = {
    {"/home/u/proj/model.py:42 forward", "/home/u/proj/model.py:42 forward"},
    {"/home/u/proj/train.py:20 step", "/home/u/proj/train.py:20 step"},
    {"/home/u/proj/utils/helpers.py:7 launch", "/home/u/proj/train.py:10 main"},
    {"/home/u/proj/train.py:30 main", "/opt/venv/lib/python3.12/site-packages/mylib/ops.py:33 op"},
    {"libmine.so+0x1234", "libmine.so+0x1234"},
    {"/home/u/app/app.c:12 main", "/home/u/app/app.c:12 main"},
    {"libcudart.so.13+0x6000", "libcudart.so.13+0x6000"},
};
static const char *const skip_pats[] = {"*/utils/*"};
static const char *const keep_pats[] = {"*/mylib/*"};

/* How a work finds its stack: the launch's through the flow; its own stack id; the launch's
 * through the correlation id only; none. */
enum link { BY_FLOW, OWN, BY_CORR, NONE };
struct launch {
	int stack; /* index in stacks, -1: none */
	const char *cat, *name;
	int64_t dur;
	enum link link;
};
static const struct launch launches[] = {
    {0, "kernel", "gemm", 3000, BY_FLOW},
    {0, "kernel", "relu", 500, BY_FLOW},
    {1, "kernel", "gemm", 2000, OWN},
    {1, "memcpy", "Memcpy HtoD (Pageable -> Device)", 1000, BY_FLOW},
    {2, "kernel", "softmax", 800, BY_FLOW},
    {3, "kernel", "gemm", 1500, BY_CORR},
    {4, "kernel", "k_native", 700, BY_FLOW},
    {5, "memset", "Memset (Device)", 300, BY_FLOW},
    {6, "kernel", "k_lib", 400, BY_FLOW},
    {-1, "kernel", "orphan", 900, NONE},
    {-1, "memcpy", "Memcpy DtoH (Device -> Pageable)", 600, NONE},
};
enum { NLAUNCH = sizeof(launches) / sizeof(launches[0]), REPS = 3 };

/* A launch's duration in a run: `slow` doubles the work of stack 0 (the diff's NEW run). */
static int64_t dur_of(const struct launch *l, int slow)
{
	return slow && l->stack == 0 ? 2 * l->dur : l->dur;
}

/* The stack as the Chrome writer's "stack" arg: one frame a line, innermost first. */
static void stack_text(const struct cuptrace_stack *st, char *buf, size_t cap)
{
	size_t n = 0;
	buf[0] = 0;
	for (size_t i = st->nframes; i-- > 0 && n < cap;) {
		const struct cuptrace_frame *f = &st->frames[i];
		const char *fn = f->function ? f->function : "??";
		int w;
		if (f->file)
			w = snprintf(buf + n, cap - n, "%s (%s:%u)\n", fn, f->file, f->line);
		else
			w = snprintf(buf + n, cap - n, "%s (%s+0x%llx)\n", fn, f->module,
			             (unsigned long long)f->rel_pc);
		n += w > 0 ? (size_t)w : 0;
	}
}

/* Feeds the trace. as_text: stacks as the "stack" arg (a file for the JSON reader), so no
 * correlation-only link (the JSON writer keeps flows) and no stack on the work itself. */
static int feed(struct cuptrace_sink *s, int slow, int as_text)
{
	struct cuptrace_trace_info info = {.pid = 7, .process_name = "lines"};
	const struct cuptrace_track tr[] = {
	    {.uuid = 1, .kind = CUPTRACE_TRACK_PROCESS, .pid = 7, .name = "lines"},
	    {.uuid = 2,
	     .kind = CUPTRACE_TRACK_THREAD,
	     .parent_uuid = 1,
	     .pid = 7,
	     .tid = 7,
	     .name = "main"},
	    {.uuid = 3,
	     .kind = CUPTRACE_TRACK_GROUP,
	     .parent_uuid = 1,
	     .pid = 7,
	     .name = "GPU 0: Test"},
	    {.uuid = 4,
	     .kind = CUPTRACE_TRACK_SLICES,
	     .parent_uuid = 3,
	     .pid = 7,
	     .name = "Stream 7"},
	};
	static char text[NSTACKS][2048];
	int err = s->ops->begin(s, &info);
	for (size_t i = 0; i < 4 && !err; i++)
		err = s->ops->track(s, &tr[i]);
	for (size_t i = 0; i < NSTACKS && !err; i++) {
		if (as_text)
			stack_text(&stacks[i], text[i], sizeof(text[i]));
		else if (s->ops->stack)
			err = s->ops->stack(s, &stacks[i]);
	}
	uint64_t id = 1;
	for (int r = 0; r < REPS; r++) {
		for (size_t i = 0; i < NLAUNCH && !err; i++, id++) {
			const struct launch *l = &launches[i];
			int64_t ts = 1000 + (int64_t)(id * 10000);
			uint64_t sid = l->stack >= 0 ? stacks[l->stack].id : 0;
			uint64_t flow = id;
			int use_flow = l->link != BY_CORR || as_text;
			struct cuptrace_arg arg = {.key = "stack", .type = CUPTRACE_ARG_STRING};
			struct cuptrace_slice api = {
			    .track_uuid = 2,
			    .ts = ts,
			    .dur = 2000,
			    .name = "cudaLaunchKernel",
			    .category = "cuda_runtime",
			    .correlation_id = id,
			    .flows_out = &flow,
			    .nflows_out = use_flow,
			    .stack_id = as_text || l->link == OWN ? 0 : sid,
			};
			if (as_text && l->stack >= 0) {
				arg.v.s = text[l->stack];
				api.args = &arg;
				api.nargs = 1;
			}
			struct cuptrace_slice work = {
			    .track_uuid = 4,
			    .ts = ts + 3000,
			    .dur = dur_of(l, slow),
			    .name = l->name,
			    .category = l->cat,
			    .correlation_id = id,
			    .flows_in = &flow,
			    .nflows_in = use_flow,
			    .stack_id = !as_text && l->link == OWN ? sid : 0,
			};
			err = s->ops->slice(s, &api);
			if (!err)
				err = s->ops->slice(s, &work);
		}
	}
	return err;
}

/* The expected rows, computed from the table. */
struct erow {
	const char *line;
	int64_t ns, kns, cns;
	uint64_t count;
};
static size_t expected(int slow, int opts, struct erow *rows, int64_t *total)
{
	size_t n = 0;
	*total = 0;
	for (int r = 0; r < REPS; r++) {
		for (size_t i = 0; i < NLAUNCH; i++) {
			const struct launch *l = &launches[i];
			const char *line =
			    l->stack < 0 ? CUPTRACE_LINES_NO_STACK : expect_line[l->stack][opts];
			size_t k = 0;
			while (k < n && strcmp(rows[k].line, line))
				k++;
			if (k == n)
				rows[n++] = (struct erow){.line = line};
			int64_t d = dur_of(l, slow);
			rows[k].ns += d;
			rows[k].count++;
			if (!strcmp(l->cat, "kernel"))
				rows[k].kns += d;
			else
				rows[k].cns += d;
			*total += d;
		}
	}
	return n;
}

static void check_rows(const struct cuptrace_lines *got, int slow, int opts)
{
	struct erow e[NLAUNCH + 1];
	int64_t total;
	size_t n = expected(slow, opts, e, &total);
	CHECK_EQ_INT(got->nrows, n);
	CHECK_EQ_INT(got->gpu_ns, total);
	CHECK_EQ_INT(got->count, REPS * NLAUNCH);
	CHECK_EQ_INT(got->with_stack, REPS * (NLAUNCH - 2));
	for (size_t k = 0; k < n; k++) {
		const struct cuptrace_line_row *r = NULL;
		for (size_t i = 0; i < got->nrows; i++)
			if (!strcmp(got->rows[i].line, e[k].line))
				r = &got->rows[i];
		CHECK(r != NULL);
		if (!r) {
			fprintf(stderr, "missing row %s\n", e[k].line);
			continue;
		}
		CHECK_EQ_INT(r->gpu_ns, e[k].ns);
		CHECK_EQ_INT(r->count, e[k].count);
		CHECK_EQ_INT(r->kernel_ns, e[k].kns);
		CHECK_EQ_INT(r->copy_ns, e[k].cns);
	}
	for (size_t i = 1; i < got->nrows; i++)
		CHECK(got->rows[i - 1].gpu_ns >= got->rows[i].gpu_ns);
	/* model.py:42's kernels: gemm (3 us) before relu (0.5 us). */
	for (size_t i = 0; i < got->nrows; i++) {
		const struct cuptrace_line_row *r = &got->rows[i];
		if (strcmp(r->line, expect_line[0][0]))
			continue;
		CHECK_EQ_INT(r->nwork, 2);
		if (r->nwork == 2) {
			CHECK_EQ_STR(r->work[0].name, "gemm");
			CHECK_EQ_INT(r->work[0].gpu_ns, REPS * dur_of(&launches[0], slow));
			CHECK_EQ_STR(r->work[1].name, "relu");
		}
	}
}

static void test_rule(void)
{
	struct cuptrace_lines_opts o = {
	    .skip = skip_pats, .nskip = 1, .keep = keep_pats, .nkeep = 1};
	for (size_t i = 0; i < NSTACKS; i++) {
		char key[512];
		for (int k = 0; k < 2; k++) {
			long f = cuptrace_stack_user_frame(&stacks[i], k ? &o : NULL);
			CHECK(f >= 0);
			cuptrace_frame_key(&stacks[i].frames[f], key, sizeof(key));
			CHECK_EQ_STR(key, expect_line[i][k]);
		}
	}
	struct cuptrace_frame f = {PY, "x", "/usr/lib64/python3.13t/json/__init__.py", 1, 0, 0, 0};
	CHECK(!cuptrace_frame_is_user(&f, NULL));
	f.file = "/home/u/python3.12/mine.py"; /* not under lib/ */
	CHECK(cuptrace_frame_is_user(&f, NULL));
	f.file = "<string>";
	CHECK(!cuptrace_frame_is_user(&f, NULL));
	struct cuptrace_frame n = {NA, NULL, NULL, 0, "/usr/lib/libcublasLt.so.13", NULL, 0};
	CHECK(!cuptrace_frame_is_user(&n, NULL));
	n.module = "/opt/venv/lib/python3.12/site-packages/cupy/_core.so";
	CHECK(!cuptrace_frame_is_user(&n, NULL));
	n.module = "/home/u/libcustom.so"; /* "libc" alone is no prefix of the rule */
	CHECK(cuptrace_frame_is_user(&n, NULL));
	struct cuptrace_stack empty = {9, NULL, 0};
	CHECK_EQ_INT(cuptrace_stack_user_frame(&empty, NULL), -1);

	/* A native frame's row without a module path: its build id, else the address itself (in
	 * no module: JIT code, an anonymous mapping); never a "?". */
	char key[128];
	struct cuptrace_frame u = {NA, NULL, NULL, 0, NULL, "0123456789abcdef0123", 0x4010};
	cuptrace_frame_key(&u, key, sizeof(key));
	CHECK_EQ_STR(key, "build id 0123456789ab+0x4010");
	u.function = "jit_fn";
	cuptrace_frame_key(&u, key, sizeof(key));
	CHECK_EQ_STR(key, "jit_fn (build id 0123456789ab)");
	u.build_id = "";
	cuptrace_frame_key(&u, key, sizeof(key));
	CHECK_EQ_STR(key, "jit_fn [unknown module]");
	u.function = NULL;
	u.rel_pc = 0x7f0012345678;
	cuptrace_frame_key(&u, key, sizeof(key));
	CHECK_EQ_STR(key, "[unknown module] 0x7f0012345678");
	u.module = "/opt/app/libx.so.1";
	cuptrace_frame_key(&u, key, sizeof(key));
	CHECK_EQ_STR(key, "libx.so.1+0x7f0012345678");
}

static void run_sink(int slow, int opts)
{
	struct cuptrace_lines_opts o = {
	    .skip = skip_pats, .nskip = 1, .keep = keep_pats, .nkeep = 1};
	struct cuptrace_stats st;
	struct cuptrace_lines got;
	struct cuptrace_sink *s =
	    cuptrace_lines_sink_new(&got, opts ? &o : NULL, cuptrace_stats_sink_new(&st));
	CHECK(s != NULL);
	if (!s)
		return;
	CHECK_EQ_INT(feed(s, slow, 0), 0);
	CHECK_EQ_INT(s->ops->finish(s), 0);
	cuptrace_sink_destroy(s);
	check_rows(&got, slow, opts);
	CHECK_EQ_INT(st.slices, 2 * REPS * NLAUNCH); /* everything reached the inner sink */
	cuptrace_lines_free(&got);
	cuptrace_stats_free(&st);
}

static void test_sink(void)
{
	run_sink(0, 0);
	run_sink(0, 1);
	run_sink(1, 0);
}

static char *tmp_path(const char *name)
{
	static char p[2][512];
	static int i;
	i ^= 1;
	snprintf(p[i], sizeof(p[i]), "%s/%s",
	         getenv("CUPTRACE_TMP") ? getenv("CUPTRACE_TMP") : "/tmp", name);
	return p[i];
}

static int write_trace(const char *path, int slow)
{
	struct cuptrace_sink *w = cuptrace_sink_open(path, NULL, NULL);
	if (!w)
		return -1;
	int err = feed(w, slow, 1);
	if (!err)
		err = w->ops->finish(w);
	cuptrace_sink_destroy(w);
	return err;
}

static char *run(const char *args)
{
	const char *bin = getenv("CUPTRACE_BIN");
	char cmd[2048];
	static char out[1 << 18];
	snprintf(cmd, sizeof(cmd), "%s %s 2>/dev/null", bin, args);
	FILE *p = popen(cmd, "r");
	size_t n = p ? fread(out, 1, sizeof(out) - 1, p) : 0;
	out[n] = 0;
	int st = p ? pclose(p) : -1;
	CHECK_EQ_INT(st, 0);
	return out;
}

/* Every expected row as the JSON's rows hold it. */
static void check_json_rows(const char *json, int slow, int opts)
{
	struct erow e[NLAUNCH + 1];
	int64_t total;
	size_t n = expected(slow, opts, e, &total);
	char want[512];
	snprintf(want, sizeof(want), "\"lines\":{\"gpu_ns\":%lld,\"count\":%d,\"with_stack\":%d,",
	         (long long)total, REPS * NLAUNCH, REPS * (NLAUNCH - 2));
	CHECK(strstr(json, want) != NULL);
	for (size_t k = 0; k < n; k++) {
		snprintf(want, sizeof(want), "{\"line\":\"%s\",\"gpu_ns\":%lld,\"count\":%llu,",
		         e[k].line, (long long)e[k].ns, (unsigned long long)e[k].count);
		CHECK(strstr(json, want) != NULL);
		if (!strstr(json, want))
			fprintf(stderr, "not in the JSON: %s\n", want);
	}
}

static void test_cli(void)
{
	if (!getenv("CUPTRACE_BIN")) {
		printf("skip cli: CUPTRACE_BIN not set\n");
		return;
	}
	char a[512], b[512], args[2048];
	snprintf(a, sizeof(a), "%s", tmp_path("lines_a.json"));
	snprintf(b, sizeof(b), "%s", tmp_path("lines_b.json"));
	CHECK_EQ_INT(write_trace(a, 0), 0);
	CHECK_EQ_INT(write_trace(b, 1), 0);

	snprintf(args, sizeof(args), "stats --json --group-by line %s", a);
	const char *out = run(args);
	CHECK(strstr(out, "\"schema\":\"cuptrace-stats/1\"") != NULL);
	check_json_rows(out, 0, 0);
	snprintf(
	    args, sizeof(args),
	    "stats --json --group-by line --skip-frames '*/utils/*' --keep-frames '*/mylib/*' %s",
	    a);
	check_json_rows(run(args), 0, 1);
	snprintf(args, sizeof(args), "analyze --json --group-by line %s", a);
	out = run(args);
	CHECK(strstr(out, "\"schema\":\"cuptrace-analyze/1\"") != NULL);
	check_json_rows(out, 0, 0);
	snprintf(args, sizeof(args), "stats --group-by line %s", a);
	out = run(args);
	CHECK(strstr(out, "GPU time by source line") != NULL);
	CHECK(strstr(out, "/home/u/proj/model.py:42 forward") != NULL);
	snprintf(args, sizeof(args), "analyze --markdown --group-by line %s", a);
	CHECK(strstr(run(args), "| /home/u/proj/model.py:42 forward |") != NULL);

	/* diff: stack 0's kernels doubled in NEW, every other line unchanged. */
	snprintf(args, sizeof(args), "diff --json --group-by line %s %s", a, b);
	out = run(args);
	CHECK(strstr(out, "\"group_by\":\"line\"") != NULL);
	const char *row = strstr(out, "{\"name\":\"/home/u/proj/model.py:42 forward\"");
	CHECK(row != NULL);
	if (row) {
		char want[256];
		int64_t base = REPS * (launches[0].dur + launches[1].dur);
		snprintf(want, sizeof(want), "\"total_ns\":{\"base\":%lld,\"new\":%lld",
		         (long long)base, (long long)(2 * base));
		const char *end = strchr(row, '}');
		const char *hit = strstr(row, want);
		CHECK(hit != NULL && end != NULL);
		if (!hit)
			fprintf(stderr, "diff row: %.400s\n", row);
	}
	/* Copies are rows of their own family, under their line. */
	CHECK(strstr(out, "{\"name\":\"/home/u/app/app.c:12 main\"") != NULL);
	CHECK(strstr(out, "{\"name\":\"(no stack)\"") != NULL);
	snprintf(args, sizeof(args), "diff --group-by line %s %s", a, b);
	CHECK(strstr(run(args), "grouped by the source line") != NULL);
	/* Kept when something failed, or with CUPTRACE_KEEP set, to look at. */
	if (!check_failures && !getenv("CUPTRACE_KEEP")) {
		unlink(a);
		unlink(b);
	}
}

TEST_MAIN({"rule", test_rule}, {"sink", test_sink}, {"cli", test_cli})
