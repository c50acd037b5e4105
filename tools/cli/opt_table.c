/* The command line's option table and the help and option parsing made from it (opt_table.h). */
#include "opt_table.h"

#include <getopt.h>
#include <stdarg.h>
#include <string.h>

#include "cmd.h"
#include "common/options.h"

#define T(c) (1u << CLI_##c)
#define ALL  ((1u << CLI_NCMDS) - 1)
/* Options that are the settings of libcuptrace.so: the setting's id + WOPT (cmd.h). */
#define W(id) (CMD_WOPT + CUPTRACE_SET_##id)

static const char WINDOWS[] = "Tracing part of a run (README: Tracing part of a run)";
static const char OTLP[] = "OpenTelemetry (README: OpenTelemetry)";
static const char LINES[] = "By source line (README: Call stacks)";

/* Order: the order of each command's help. Rows of one name for several commands say the same
 * there; where the meaning differs by command, each command has its own row. */
const struct cli_option cli_options[] = {
    /* record */
    {"output", 'o', CLI_ARG_REQUIRED, "PATH", T(RECORD), 'o', NULL,
     "trace file (default cuptrace-%p.pftrace); %p = pid,\n"
     "%h = host name, %r / %l = global / local rank from\n"
     "torchrun, mpirun or srun (the pid without a launcher).\n"
     "No two processes write one file: a later one adds\n"
     "-PID to the name. An older file is replaced only by a\n"
     "finished trace (or one cut by SIGKILL that holds\n"
     "events). The extension picks the format:\n"
     ".pftrace, .pftrace.gz, .json, .json.gz, .cupti;\n"
     "none: no file (with --otlp)"},
    {"format", 'f', CLI_ARG_REQUIRED, "FMT", T(RECORD), 'f', NULL, "perfetto | chrome | capture"},
    {"capture", 0, CLI_ARG_NONE, NULL, T(RECORD), 'C', NULL,
     "write the raw CUPTI capture (cheapest); convert it later\n"
     "with 'cuptrace convert'"},
    {"compress", 0, CLI_ARG_REQUIRED, "MODE", T(RECORD), 'z', NULL,
     "chunks (default for .pftrace) | gzip | none"},
    {"compress-level", 0, CLI_ARG_REQUIRED, "N", T(RECORD) | T(CONVERT), W(COMPRESS_LEVEL), NULL,
     "1 (least CPU; about 9% larger) to 12 (smallest);\n"
     "default 5"},
    {"driver", 0, CLI_ARG_REQUIRED, "MODE", T(RECORD), 'd', NULL,
     "work (default): the driver calls that make, order or\n"
     "wait for GPU work (launches, copies, memsets,\n"
     "allocations, events, stream waits, synchronizations,\n"
     "module loads); user: every call the program makes\n"
     "itself (getters, context calls too); all: also the\n"
     "CUDA runtime's own driver calls"},
    {"sync-records", 0, CLI_ARG_REQUIRED, "FROM", T(RECORD), W(SYNC_RECORDS), NULL,
     "cupti (default): CUPTI's synchronization records;\n"
     "callback: timed by callbacks on the calls that\n"
     "synchronize instead (no saving measured yet)"},
    {"runtime", 0, CLI_ARG_REQUIRED, "MODE", T(RECORD), 'R', NULL,
     "filtered (default): trivial runtime calls\n"
     "(cudaGetDevice, cudaGetLastError, ...) left out at the\n"
     "source; watch: left out, but counted, and kept when\n"
     "they fail, stall or change the device (costs a\n"
     "callback per call);\n"
     "all: every call"},
    {"cuda-graphs", 0, CLI_ARG_REQUIRED, "MODE", T(RECORD), W(CUDA_GRAPHS), NULL,
     "node (default): each kernel, copy and memset of a\n"
     "CUDA graph launch; graph: one slice per launch on its\n"
     "stream, from its first node's start to its last node's\n"
     "end (no per-node cost: CUPTI adds host time to every\n"
     "node of every cudaGraphLaunch; not with capture\n"
     "windows, where CUPTI cannot switch it on: node)"},
    {"stacks", 0, CLI_ARG_REQUIRED, "WHAT", T(RECORD), 'K', NULL,
     "none (default) | python | native | all: the call stack\n"
     "at each launch, copy, memset and synchronizing call\n"
     "(Python frames of the calling thread, taking the GIL\n"
     "back if it released it; native return addresses,\n"
     "symbolized after the run); python-held | all-held:\n"
     "Python frames only where the GIL is already held"},
    {"stacks-every", 0, CLI_ARG_REQUIRED, "N", T(RECORD), 'e', NULL,
     "a stack at one such call in N on average, picked at\n"
     "random (default 1: every call)"},
    {"sample", 0, CLI_ARG_OPTIONAL, "HZ", T(RECORD), W(SAMPLE), NULL,
     "sample the Python stacks of the threads that call CUDA\n"
     "HZ times a second (default 100) of wall-clock time,\n"
     "running, sleeping or waiting, without the GIL:\n"
     "Perfetto CPU samples; analyze says what the feeding\n"
     "thread did while the GPU sat idle (src/inject/SAMPLING.md)"},
    {"sample-threads", 0, CLI_ARG_REQUIRED, "WHICH", T(RECORD), W(SAMPLE_THREADS), NULL,
     "cuda (default): the threads that called CUDA; all:\n"
     "every thread of the process"},
    {"sample-native", 0, CLI_ARG_NONE, NULL, T(RECORD), W(SAMPLE_NATIVE), NULL,
     "with --sample: native frames too (build id and offset,\n"
     "symbolized after the run), through a signal to each\n"
     "running thread; a call such as nanosleep or poll that\n"
     "begins just as it arrives returns EINTR (SAMPLING.md)"},
    {"overhead-tracks", 0, CLI_ARG_REQUIRED, "MODE", T(RECORD) | T(CONVERT), W(OVERHEAD_TRACKS),
     NULL,
     "process (default): CUPTI's own overhead (module\n"
     "loading, buffer flushes) on one track per process;\n"
     "thread: one track per thread it happened on"},
    {"pytorch", 0, CLI_ARG_NONE, NULL, T(RECORD), 'P', NULL,
     "PyTorch operators (aten::*, autograd, nn.Module) as\n"
     "slices around the CUDA calls they make (Python programs;\n"
     "inherited by child processes, e.g. under torchrun)"},
    {"pytorch-shapes", 0, CLI_ARG_NONE, NULL, T(RECORD), 'Q', NULL,
     "as --pytorch, with each op's input shapes as arguments"},
    {"no-step-marks", 0, CLI_ARG_NONE, NULL, T(RECORD), 'W', NULL,
     "no optimizer.step() marks (by default each one is an\n"
     "NVTX range \"optimizer.step\" on its thread, in Python\n"
     "programs using torch.optim: `cuptrace analyze` takes\n"
     "them as the steps)"},
    {"buffer-size", 0, CLI_ARG_REQUIRED, "N", T(RECORD), 'b', NULL,
     "bytes per CUPTI buffer (default 1048576)"},
    {"flush-ms", 0, CLI_ARG_REQUIRED, "N", T(RECORD), 'F', NULL,
     "write records at least this often (default 1000)"},
    {"no-summary", 0, CLI_ARG_NONE, NULL, T(RECORD), 'S', NULL, "no end-of-run summary on stderr"},
    {"no-check", 0, CLI_ARG_NONE, NULL, T(RECORD) | T(TOP), 'N', NULL,
     "skip the check for a CUDA device"},
    {"gpu-metrics", 0, CLI_ARG_OPTIONAL, "LIST", T(RECORD), 'G', NULL,
     "sample GPU hardware metrics (SM, tensor, DRAM, PCIe,\n"
     "NVLink) as counter tracks under each GPU; LIST: CUPTI\n"
     "metric names, comma-separated, instead of the default\n"
     "set"},
    {"gpu-metrics-rate", 0, CLI_ARG_REQUIRED, "HZ", T(RECORD), 'H', NULL,
     "samples per second per GPU (default 10000)"},
    {"list-gpu-metrics", 0, CLI_ARG_NONE, NULL, T(RECORD), 'M', NULL,
     "print the GPUs' PM sampling metrics and exit"},
    {"private", 0, CLI_ARG_NONE, NULL, T(RECORD), 'X', NULL,
     "write no host name, user name, boot id or command-line\n"
     "arguments into the trace (CUPTRACE_PRIVATE=1)"},
    {"lib", 0, CLI_ARG_REQUIRED, "PATH", T(RECORD), 'L', NULL,
     "libcuptrace.so to inject (default: next to cuptrace)"},
    {"delay", 0, CLI_ARG_REQUIRED, "T", T(RECORD), W(DELAY), WINDOWS,
     "nothing before T after the first CUDA call"},
    {"duration", 0, CLI_ARG_REQUIRED, "T", T(RECORD), W(DURATION), WINDOWS,
     "windows last at most T (alone: [delay, delay + T])"},
    {"capture-range", 0, CLI_ARG_REQUIRED, "R", T(RECORD), W(CAPTURE_RANGE), WINDOWS,
     "cuda-profiler-api: between cudaProfilerStart and Stop\n"
     "(torch.cuda.profiler.start/stop); range:NAME[#K][,N]:\n"
     "from the K-th NVTX range NAME (or the one named NAME#K,\n"
     "as torch.profiler's ProfilerStep#K) to the end of N"},
    {"steps", 0, CLI_ARG_REQUIRED, "K[,N]", T(RECORD), W(STEPS), WINDOWS,
     "training steps K to K+N-1 (1-based): a step ends when\n"
     "optimizer.step() returns (PyTorch), or --step-range's"},
    {"step-range", 0, CLI_ARG_REQUIRED, "NAME", T(RECORD), W(STEP_RANGE), WINDOWS,
     "an NVTX range that is one step (any program)"},
    {"capture-repeat", 0, CLI_ARG_REQUIRED, "N|all", T(RECORD), W(CAPTURE_REPEAT), WINDOWS,
     "the window comes back: every N-th occurrence"},
    {"on-demand", 0, CLI_ARG_NONE, NULL, T(RECORD), W(ON_DEMAND), WINDOWS,
     "off until `cuptrace trigger` (or cuptrace_start()) opens\n"
     "a window in the running processes"},
    {"cupti-early", 0, CLI_ARG_NONE, NULL, T(RECORD), W(CUPTI_EARLY), WINDOWS,
     "while waiting for a window, keep CUPTI subscribed (a\n"
     "graph replay loop ran 13% slower so): needed by programs\n"
     "that launch CUDA graphs from the GPU, whose launches\n"
     "CUPTI 13.0 makes fail when it starts after such a graph\n"
     "was made"},
    {"ring", 0, CLI_ARG_REQUIRED, "T", T(RECORD), W(RING), WINDOWS,
     "flight recorder: keep the last T, written at exit, on\n"
     "SIGINT/SIGTERM, on a crash and on `cuptrace trigger`"},
    {"ring-slow", 0, CLI_ARG_REQUIRED, "X", T(RECORD), W(RING_SLOW), WINDOWS,
     "with --ring: write out each step slower than X times\n"
     "the median of the recent steps, with the step before"},
    {"ring-max", 0, CLI_ARG_REQUIRED, "BYTES", T(RECORD), W(RING_MAX), WINDOWS,
     "the flight recorder's memory (default 1073741824)"},

    /* convert, merge, share, symbolize: outputs */
    {"output", 'o', CLI_ARG_REQUIRED, "PATH", T(CONVERT), 'o', NULL,
     "output file (required unless --otlp)"},
    {"output", 'o', CLI_ARG_REQUIRED, "PATH", T(MERGE) | T(SHARE) | T(SYMBOLIZE), 'o', NULL,
     "output file (required)"},
    {"format", 'f', CLI_ARG_REQUIRED, "FMT", T(CONVERT) | T(MERGE) | T(SYMBOLIZE), 'f', NULL,
     "perfetto | chrome (or json)"},
    {"compress", 0, CLI_ARG_REQUIRED, "MODE", T(CONVERT) | T(MERGE), 'z', NULL,
     "chunks | gzip | none"},
    {"driver", 0, CLI_ARG_REQUIRED, "MODE", T(CONVERT), 'd', NULL,
     "captures: user (default) | all: keep the runtime's own\n"
     "driver calls"},
    {"runtime", 0, CLI_ARG_REQUIRED, "MODE", T(CONVERT), 'R', NULL,
     "captures: filtered (default) | all: keep trivial runtime\n"
     "calls (cudaGetDevice, ...) a capture recorded with them\n"
     "holds"},
    {"symbol-dir", 0, CLI_ARG_REQUIRED, "DIR", T(CONVERT), CMD_LINES_OPT_DIR, NULL,
     "where to find binaries and debug files to symbolize\n"
     "native call-stack frames (see 'cuptrace symbolize')"},

    /* stats, diff, analyze: reports */
    {"markdown", 'm', CLI_ARG_NONE, NULL, T(STATS) | T(DIFF) | T(ANALYZE), 'm', NULL,
     "GitHub markdown tables (for bug reports)"},
    {"json", 'j', CLI_ARG_NONE, NULL, T(STATS) | T(DIFF) | T(ANALYZE), 'j', NULL,
     "one JSON object, times in ns (keys: README)"},
    {"group-by", 0, CLI_ARG_REQUIRED, "line", T(STATS) | T(ANALYZE), CMD_OPT_GROUP_BY, LINES,
     "add GPU time by source line: each kernel, copy and\n"
     "memset under the innermost frame of the user's own code\n"
     "in its launch's call stack"},
    {"group-by", 0, CLI_ARG_REQUIRED, "MODE", T(DIFF), CMD_OPT_GROUP_BY, LINES,
     "name (default) | base: drop template arguments and\n"
     "parameter lists (gemm<float, 64>(...) -> gemm) |\n"
     "op: kernels and copies by the op that launched them\n"
     "(the innermost range around the launch call), so a\n"
     "library choosing another kernel compares as one |\n"
     "line: kernels and copies by the source line that\n"
     "launched them (the innermost frame of the user's own\n"
     "code in the launch's call stack)"},
    {"skip-frames", 0, CLI_ARG_REQUIRED, "PAT", T(STATS) | T(DIFF) | T(ANALYZE), CMD_LINES_OPT_SKIP,
     LINES,
     "with --group-by line: frames whose file or module\n"
     "matches PAT (fnmatch) are not user code (repeatable)"},
    {"keep-frames", 0, CLI_ARG_REQUIRED, "PAT", T(STATS) | T(DIFF) | T(ANALYZE), CMD_LINES_OPT_KEEP,
     LINES, "... are user code whatever the built-in rule says"},
    {"symbol-dir", 0, CLI_ARG_REQUIRED, "DIR", T(STATS) | T(DIFF) | T(ANALYZE), CMD_LINES_OPT_DIR,
     LINES,
     "where to find binaries and debug files to symbolize\n"
     "native frames (see 'cuptrace symbolize')"},
    {"top", 'n', CLI_ARG_REQUIRED, "N", T(DIFF), 'n', NULL,
     "rows per family in text and markdown (default 20)"},
    {"per", 0, CLI_ARG_REQUIRED, "NAME", T(DIFF), 'p', NULL,
     "divide counts and times by the number of host ranges\n"
     "named NAME in each run (runs of different step counts)"},
    {"fail-above", 0, CLI_ARG_REQUIRED, "PCT", T(DIFF), 'F', NULL,
     "exit with status 3 if GPU busy time, or the total of a\n"
     "name taking at least 1% of the GPU busy time of BASE or\n"
     "of NEW (of its family's total for API calls, ranges,\n"
     "ops; a name new in NEW: of NEW's), grew by more than\n"
     "PCT percent"},
    {"annotate", 'a', CLI_ARG_REQUIRED, "OUT", T(ANALYZE), 'a', NULL,
     "write the trace (one input) plus an \"Analysis\" group"},
    {"step", 's', CLI_ARG_REQUIRED, "NAME", T(ANALYZE), 's', NULL,
     "ranges of this name are the steps"},
    {"gap-us", 'g', CLI_ARG_REQUIRED, "N", T(ANALYZE), 'g', NULL,
     "GPU gaps of at least N us are a finding (default 100)"},
    {"tiny-us", 't', CLI_ARG_REQUIRED, "N", T(ANALYZE), 't', NULL,
     "kernels shorter than N us are tiny (default 10)"},
    {"top", 'n', CLI_ARG_REQUIRED, "N", T(ANALYZE), 'n', NULL,
     "rows of the largest idle intervals (default 10)"},

    /* merge */
    {"side-by-side", 0, CLI_ARG_NONE, NULL, T(MERGE), 's', NULL,
     "one group per input, aligned as above"},
    {"ranks", 0, CLI_ARG_NONE, NULL, T(MERGE), 'r', NULL, "the ranks of one job, on one time axis"},
    {"align", 0, CLI_ARG_REQUIRED, "MODE", T(MERGE), 'A', NULL,
     "with --ranks: none | realtime | nccl (default)"},
    {"label", 'l', CLI_ARG_REQUIRED, "L", T(MERGE), 'l', NULL,
     "label of the next input (repeatable, in order;\n"
     "default: the file's name)"},
    {"align-on", 0, CLI_ARG_REQUIRED, "NAME[#K]", T(MERGE), 'a', NULL,
     "start the K-th (default 1st) slice named NAME (an\n"
     "NVTX range, an op, any slice) at the same moment in all"},
    {"no-align", 0, CLI_ARG_NONE, NULL, T(MERGE), 'N', NULL,
     "each input from its own earliest event"},

    /* share */
    {"redact-names", 0, CLI_ARG_NONE, NULL, T(SHARE), 'r', NULL,
     "kernel, NVTX, operator, thread and stream names become\n"
     "tokens (kernel_3f9a2c1b7d4e): equal names, equal tokens\n"
     "in every file shared with the same --salt"},
    {"salt", 0, CLI_ARG_REQUIRED, "S", T(SHARE), 's', NULL,
     "the tokens' key (default: empty; with the default,\n"
     "anyone can check a guessed name against its token)"},
    {"window", 0, CLI_ARG_REQUIRED, "FROM:TO", T(SHARE), 'w', NULL,
     "keep only this part of the timeline: times from the\n"
     "trace's start (1.5s, 200ms, 10us, 500ns; either side\n"
     "may be empty) or NAME#K, the K-th range named NAME\n"
     "(--window NAME#K alone: that range)"},
    {"max-size", 0, CLI_ARG_REQUIRED, "SIZE", T(SHARE), 'm', NULL,
     "keep the busiest window that fits in SIZE bytes\n"
     "(25M, 500k, 1G; M = 1000000, Mi = 1048576)"},
    {"keep-time", 0, CLI_ARG_NONE, NULL, T(SHARE), 't', NULL,
     "keep the wall-clock and boot time of the start"},

    /* symbolize */
    {"symbol-dir", 's', CLI_ARG_REQUIRED, "DIR", T(SYMBOLIZE), 's', NULL,
     "where to look for binaries and debug files (repeatable;\n"
     "also CUPTRACE_SYMBOL_PATH, a colon list): DIR/.build-id/\n"
     "xx/rest[.debug], DIR/<module's name>, DIR/<debuglink>"},

    /* top */
    {"once", 0, CLI_ARG_NONE, NULL, T(TOP), '1', NULL,
     "one refresh (after one interval), then exit"},
    {"iterations", 0, CLI_ARG_REQUIRED, "N", T(TOP), 'n', NULL, "N refreshes, then exit"},
    {"interval", 0, CLI_ARG_REQUIRED, "S", T(TOP), 'i', NULL,
     "seconds between refreshes (default 1; 0.5, 500ms)"},
    {"json", 'j', CLI_ARG_NONE, NULL, T(TOP), 'j', NULL,
     "one JSON object per interval, one a line (keys:\n"
     "src/top/README.md)"},
    {"replay", 0, CLI_ARG_REQUIRED, "CAPTURE", T(TOP), 'r', NULL,
     "show a .cupti capture by its own clock instead of a\n"
     "running program (repeatable: processes side by side)"},
    {"speed", 0, CLI_ARG_REQUIRED, "X", T(TOP), 's', NULL,
     "--replay: X trace seconds a second (default 1); max:\n"
     "as fast as it goes (each interval still one trace\n"
     "interval)"},
    {"t-duration", 0, CLI_ARG_REQUIRED, "T", T(TOP), 'D', NULL,
     "the trace the t key writes covers the next T (500ms,\n"
     "2s, 1m; default 10s), as record's windows are timed"},
    {"job", 0, CLI_ARG_REQUIRED, "RECORD_PID", T(TOP), 'J', NULL,
     "attach to every process under that `cuptrace record\n"
     "--on-demand` (ranks that start later too)"},

    /* trigger */
    {"duration", 0, CLI_ARG_REQUIRED, "T", T(TRIGGER), 'd', NULL,
     "the window lasts T (500ms, 2s, 1m); the command returns\n"
     "when the files are written"},
    {"steps", 0, CLI_ARG_REQUIRED, "N", T(TRIGGER), 's', NULL,
     "the window lasts N training steps\n"
     "(optimizer.step() calls)"},
    {"stop", 0, CLI_ARG_NONE, NULL, T(TRIGGER), 'S', NULL,
     "close the window an earlier trigger opened, and write it"},
    {"dump", 0, CLI_ARG_NONE, NULL, T(TRIGGER), 'D', NULL,
     "write the flight recorder's last seconds (--ring) now; a\n"
     "trigger without options does the same for a flight\n"
     "recorder, and for any other process opens a window until\n"
     "`trigger --stop`"},
    {"job", 0, CLI_ARG_REQUIRED, "PID", T(TRIGGER), 'j', NULL,
     "every process started under the `cuptrace record`\n"
     "of that pid"},
    {"timeout", 0, CLI_ARG_REQUIRED, "T", T(TRIGGER), 't', NULL,
     "give up waiting after T (default: the duration + 60s)"},

    /* record, convert: OpenTelemetry */
    {"otlp", 0, CLI_ARG_REQUIRED, "URL", T(RECORD) | T(CONVERT), W(OTLP_URL), OTLP,
     "also send the trace as OpenTelemetry spans (OTLP/HTTP,\n"
     "POST URL/v1/traces) to a collector, Jaeger or Tempo"},
    {"service", 0, CLI_ARG_REQUIRED, "NAME", T(RECORD) | T(CONVERT), W(OTLP_SERVICE), OTLP,
     "service.name of the spans (default: the program's name)"},
    {"otlp-trace-per", 0, CLI_ARG_REQUIRED, "NAME", T(RECORD) | T(CONVERT), W(OTLP_TRACE_PER), OTLP,
     "one trace per occurrence of the NVTX range (or any\n"
     "slice) NAME instead of one per run"},
    {"otlp-batch", 0, CLI_ARG_REQUIRED, "N", T(RECORD) | T(CONVERT), W(OTLP_BATCH), OTLP,
     "spans per request (default 512)"},
    {"otlp-interval", 0, CLI_ARG_REQUIRED, "MS", T(RECORD) | T(CONVERT), W(OTLP_INTERVAL), OTLP,
     "send a partial batch after this long (default 1000)"},
    {"otlp-window", 0, CLI_ARG_REQUIRED, "MS", T(RECORD) | T(CONVERT), W(OTLP_WINDOW), OTLP,
     "how long a span waits for the ranges around it (trace\n"
     "time, default 10000)"},
    {"otlp-timeout", 0, CLI_ARG_REQUIRED, "MS", T(RECORD) | T(CONVERT), W(OTLP_TIMEOUT), OTLP,
     "at the end, stop sending after this long (default 5000)"},

    {"help", 'h', CLI_ARG_NONE, NULL, ALL, 'h', NULL, "this help"},
};
const size_t cli_noptions = sizeof(cli_options) / sizeof(cli_options[0]);

static const char EXITS_FILE[] = "0  done\n"
                                 "1  failed (an input unreadable, the output not written: what\n"
                                 "   was at OUTPUT stays)\n"
                                 "2  bad usage (an option, its value, the arguments)";
static const char EXITS_REPORT[] = "0  done\n"
                                   "1  failed (an input unreadable, the report not written)\n"
                                   "2  bad usage (an option, its value, the arguments)";

const struct cli_command cli_commands[CLI_NCMDS] = {
    [CLI_RECORD] = {"record", cmd_record, "run a command and trace what it does with CUDA",
                    "cuptrace record [options] -- command [args...]",
                    "Runs the command with libcuptrace.so injected and writes what it does with\n"
                    "CUDA (API calls, kernels, copies, memsets, synchronization, NVTX) into a\n"
                    "trace. Options are passed to the library in CUPTRACE_* variables\n"
                    "(include/cuptrace.h lists them). Below, T is a duration such as 500ms,\n"
                    "2s or 1m; %n in -o gives each capture window a file of its own.",
                    "N    the command's exit status (128+N if it died of signal N)\n"
                    "126  the command could not be run; 127: it was not found\n"
                    "1    cuptrace failed before the command ran\n"
                    "2    bad usage (an option, its value, a CUPTRACE_* variable, no command)",
                    1},
    [CLI_CONVERT] = {"convert", cmd_convert,
                     "convert a capture, a trace or a torch.profiler JSON to Perfetto or Chrome "
                     "JSON",
                     "cuptrace convert INPUT -o OUTPUT [options]\n"
                     "cuptrace convert INPUT --otlp URL [-o OUTPUT] [options]",
                     "INPUT is a raw capture (.cupti, from 'cuptrace record --capture'), a\n"
                     "Perfetto trace (.pftrace, any compression) or a Chrome JSON trace (.json,\n"
                     ".json.gz): cuptrace's own or torch.profiler's (export_chrome_trace); '-'\n"
                     "reads standard input. Its format is told from its content. The output\n"
                     "format follows OUTPUT's extension: perfetto (.pftrace, .pftrace.gz,\n"
                     ".perfetto-trace, .perfetto-trace.gz) or chrome (.json, .json.gz); another\n"
                     "extension is refused unless -f names the format. '-o -' writes standard\n"
                     "output (Perfetto unless -f chrome). OUTPUT is written aside and renamed\n"
                     "into place when complete: a failed convert leaves what was there.",
                     EXITS_FILE, 0},
    [CLI_STATS] = {"stats", cmd_stats,
                   "summarize a trace, capture or torch.profiler JSON (counts, top kernels, GPU "
                   "busy)",
                   "cuptrace stats [--markdown | --json] [--group-by line] TRACE",
                   "TRACE is a .pftrace (any compression), a raw capture (.cupti), or a\n"
                   "Chrome JSON trace (.json, .json.gz): cuptrace's own or torch.profiler's\n"
                   "(export_chrome_trace). Its format is told from its content.",
                   EXITS_REPORT, 0},
    [CLI_DIFF] = {"diff", cmd_diff,
                  "compare two runs: what changed per kernel, API call, copy, range, op",
                  "cuptrace diff [options] BASE NEW",
                  "Compares two runs (any trace or capture cuptrace reads): wall span, GPU busy\n"
                  "time per device, kernels, bytes copied, then per kernel, API call, copy kind,\n"
                  "NVTX range and PyTorch op the count, total and mean time in both runs, sorted\n"
                  "by the change in total time.",
                  "0  done\n"
                  "1  failed (a run unreadable, the report not written)\n"
                  "2  bad usage (an option, its value, the arguments)\n"
                  "3  --fail-above exceeded",
                  0},
    [CLI_MERGE] =
        {"merge", cmd_merge, "put several runs side by side in one trace (--side-by-side)",
         "cuptrace merge --side-by-side [options] -o OUTPUT INPUT...\n"
         "cuptrace merge --ranks [--align MODE] -o OUTPUT RANK_TRACE...",
         "Puts two or more runs (any trace or capture cuptrace reads) in one trace, each\n"
         "as its own process group \"<label>: <process>\", in input order, shifted so that\n"
         "they line up: at each run's first step (its first ProfilerStep#N range, else the\n"
         "end of its first Optimizer.step#N) where every run has one, else at each run's\n"
         "first GPU work, else each from its start (--align-on and --no-align choose\n"
         "otherwise; stderr says which). Every slice, flow, counter and\n"
         "argument is kept. OUTPUT's format follows its name (.pftrace, .json, .gz) as\n"
         "for convert; OUTPUT.tar writes Perfetto's multi-trace form instead: one\n"
         "shifted .pftrace per input in a tar archive, which ui.perfetto.dev opens as\n"
         "one timeline. The shift applied to each input is printed on stderr.\n"
         "\n"
         "--ranks merges the traces of one distributed job (one per rank, recorded with\n"
         "-o 'job-%r.pftrace'): one group \"rank R @ host\" per rank in rank order, on one\n"
         "time axis. Ranks on one machine share BOOTTIME and line up exactly; ranks on\n"
         "other machines are placed by REALTIME, then (--align nccl, the default) by the\n"
         "ends of their NCCL collectives, which finish together on every rank. The offset\n"
         "and drift found for each rank and the spread of collective ends left are printed\n"
         "and stored in the trace. With OUTPUT.tar the rank files keep their own clocks\n"
         "and a perfetto_manifest names each machine and gives the offsets found.",
         EXITS_FILE, 0},
    [CLI_TRIGGER] = {"trigger", cmd_trigger,
                     "open a capture window in running traced processes, or write their flight "
                     "recorder",
                     "cuptrace trigger [--duration T | --steps N | --stop | --dump]\n"
                     "                 [--timeout T] (--job RECORD_PID | PID...)",
                     "Asks processes traced by `cuptrace record --on-demand` (or --ring, or any\n"
                     "record) to open a capture window now, and prints the files they write.",
                     "0  every process answered and wrote its files\n"
                     "1  a process could not be reached or failed (one line each)\n"
                     "2  bad usage (an option, its value, the arguments)",
                     1},
    [CLI_ANALYZE] = {"analyze", cmd_analyze,
                     "why a run is slow: steps, GPU idle by cause, GPU time per op, findings",
                     "cuptrace analyze [options] TRACE...",
                     "Says where the GPU sat idle and why, which ops the GPU time belongs to, and\n"
                     "what to change. TRACE: anything cuptrace reads (.pftrace, .cupti, Chrome or\n"
                     "torch.profiler JSON); several files are analyzed together as ranks of one\n"
                     "job.",
                     EXITS_REPORT, 0},
    [CLI_SYMBOLIZE] = {"symbolize", cmd_symbolize,
                       "fill in the native frames of a trace's call stacks (function, file, "
                       "line) from binaries",
                       "cuptrace symbolize INPUT -o OUTPUT [--symbol-dir DIR]...",
                       "Writes INPUT (any trace cuptrace reads; '-' is standard input) to OUTPUT\n"
                       "(format from its extension, as convert; '-' is standard output) with the\n"
                       "native frames of its call stacks symbolized. OUTPUT must not be INPUT.",
                       EXITS_FILE, 0},
    [CLI_TOP] = {"top", cmd_top,
                 "watch a program's GPUs live: busy, kernels, API calls, copies, memory",
                 "cuptrace top [options] -- command [args...]\n"
                 "cuptrace top [options] PID... | --job RECORD_PID\n"
                 "cuptrace top [options] --replay CAPTURE...",
                 "Runs the command traced (as 'record --format cupti', into a private\n"
                 "directory) and shows every interval: per GPU busy % (the union of kernels,\n"
                 "copies and memsets) and memory, kernels/s, the top kernels by GPU time, the\n"
                 "top API calls by host time, copies, NCCL time, steps, dropped records.\n"
                 "Keys: k a s r n (views), o (sort), p (pause), t (write a trace of the next\n"
                 "--t-duration), q (quit: the program goes on). Plain text when stdout is\n"
                 "not a terminal. PID... and --job attach to processes started with 'record\n"
                 "--on-demand': traced while watched, back to idle when top leaves.",
                 "N  the command's exit status when it ended while watched\n"
                 "0  done (replay, quit while the command goes on, left the attached processes)\n"
                 "1  failed (a capture unreadable, the command not started, a PID not watched)\n"
                 "2  bad usage (an option, its value, the arguments)",
                 1},
    [CLI_SHARE] =
        {"share", cmd_share,
         "a copy safe to attach to a public bug report: no host, user, paths; "
         "--redact-names",
         "cuptrace share TRACE -o OUTPUT [options]",
         "Writes a copy of TRACE (any format cuptrace reads) that is safe to attach to a\n"
         "public bug report, and OUTPUT.md, its summary (stats --markdown of the copy).\n"
         "Always removed: the host name, user names, home directories, the command\n"
         "line's arguments (the program's base name stays), boot id and GPU serial\n"
         "numbers, the start's wall-clock time; absolute paths anywhere become base\n"
         "names. What was removed or changed is printed on stderr. OUTPUT's extension\n"
         "picks the format: .pftrace (default), .pftrace.gz, .json, .json.gz.",
         EXITS_FILE, 0},
};

/* ---- help ---- */

#define HELP_COL 24 /* where an option's help text starts */

static void print_lines(FILE *f, const char *text, int indent)
{
	for (const char *p = text; *p;) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);
		fprintf(f, "%*s%.*s\n", n ? indent : 0, "", (int)n, p);
		p += n + (nl ? 1 : 0);
	}
}

static void print_option(FILE *f, const struct cli_option *o)
{
	char head[96];
	int n = o->shrt ? snprintf(head, sizeof(head), "  -%c, --%s", o->shrt, o->name)
	                : snprintf(head, sizeof(head), "      --%s", o->name);
	if (o->meta && n > 0 && (size_t)n < sizeof(head))
		snprintf(head + n, sizeof(head) - (size_t)n,
		         o->arg == CLI_ARG_OPTIONAL ? "[=%s]" : " %s", o->meta);
	const char *nl = strchr(o->help, '\n');
	int first = nl ? (int)(nl - o->help) : (int)strlen(o->help);
	int len = (int)strlen(head);
	if (len < HELP_COL - 1)
		fprintf(f, "%-*s%.*s\n", HELP_COL, head, first, o->help);
	else
		fprintf(f, "%s  %.*s\n", head, first, o->help);
	if (nl)
		print_lines(f, nl + 1, HELP_COL);
}

void cli_help(enum cli_cmd cmd, FILE *f)
{
	const struct cli_command *c = &cli_commands[cmd];
	const char *u = c->usage;
	fprintf(f, "usage: ");
	for (int first = 1; *u; first = 0) {
		const char *nl = strchr(u, '\n');
		size_t n = nl ? (size_t)(nl - u) : strlen(u);
		fprintf(f, "%s%.*s\n", first ? "" : "       ", (int)n, u);
		u += n + (nl ? 1 : 0);
	}
	fprintf(f, "\n%s\n", c->about);
	/* The rows of no group first ("options"), then each group in the order it first appears. */
	const char *groups[8];
	size_t ngroups = 0;
	fprintf(f, "\noptions:\n");
	for (size_t i = 0; i < cli_noptions; i++) {
		const struct cli_option *o = &cli_options[i];
		if (!(o->cmds & (1u << cmd)))
			continue;
		if (!o->group) {
			print_option(f, o);
			continue;
		}
		size_t g = 0;
		while (g < ngroups && groups[g] != o->group)
			g++;
		if (g == ngroups && ngroups < sizeof(groups) / sizeof(groups[0]))
			groups[ngroups++] = o->group;
	}
	for (size_t g = 0; g < ngroups; g++) {
		fprintf(f, "\n%s:\n", groups[g]);
		for (size_t i = 0; i < cli_noptions; i++)
			if ((cli_options[i].cmds & (1u << cmd)) &&
			    cli_options[i].group == groups[g])
				print_option(f, &cli_options[i]);
	}
	fprintf(f, "\nexit codes:\n");
	print_lines(f, c->exits, 2);
}

void cli_list_options(FILE *f)
{
	for (size_t i = 0; i < cli_noptions; i++) {
		size_t j = 0;
		while (j < i && strcmp(cli_options[j].name, cli_options[i].name))
			j++;
		if (j == i)
			fprintf(f, "--%s\n", cli_options[i].name);
	}
}

void cli_usage_error(enum cli_cmd cmd, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "cuptrace %s: ", cli_commands[cmd].name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "; see cuptrace %s --help\n", cli_commands[cmd].name);
}

/* ---- parsing ---- */

/* getopt_long's arguments for the command cli_next last built them for. The CLI runs one
 * command per process, on one thread. */
#define LONG_BASE 256 /* getopt_long's value of long option i: LONG_BASE + i */
static struct {
	int built; /* 1 + the command */
	struct option longs[128];
	const struct cli_option *rows[128]; /* by longs[] index */
	char shorts[64];
	const struct cli_option *current;
	int status; /* cli_status */
} P;

static void build(enum cli_cmd cmd)
{
	size_t nl = 0, ns = 0;
	memset(&P, 0, sizeof(P));
	/* ':' first: a missing argument returns ':', told apart from an unknown option. */
	if (cli_commands[cmd].in_order)
		P.shorts[ns++] = '+';
	P.shorts[ns++] = ':';
	for (size_t i = 0; i < cli_noptions && nl + 1 < sizeof(P.longs) / sizeof(P.longs[0]); i++) {
		const struct cli_option *o = &cli_options[i];
		if (!(o->cmds & (1u << cmd)))
			continue;
		int has = o->arg == CLI_ARG_REQUIRED   ? required_argument
		          : o->arg == CLI_ARG_OPTIONAL ? optional_argument
		                                       : no_argument;
		P.rows[nl] = o;
		P.longs[nl] = (struct option){o->name, has, NULL, LONG_BASE + (int)nl};
		nl++;
		if (o->shrt && ns + 3 < sizeof(P.shorts)) {
			P.shorts[ns++] = o->shrt;
			if (o->arg != CLI_ARG_NONE)
				P.shorts[ns++] = ':';
		}
	}
	P.built = 1 + (int)cmd;
	P.status = -1;
	optind = 1;
}

static const struct cli_option *by_short(enum cli_cmd cmd, int c)
{
	for (size_t i = 0; i < cli_noptions; i++)
		if (cli_options[i].shrt == c && (cli_options[i].cmds & (1u << cmd)))
			return &cli_options[i];
	return NULL;
}

/* How the user wrote the option getopt stopped at: "--name" from argv, or "-c". */
static void named(char *buf, size_t n, char **argv, int at, int c)
{
	const char *a = at > 0 ? argv[at] : NULL;
	if (a && a[0] == '-' && a[1] == '-') {
		const char *eq = strchr(a, '=');
		snprintf(buf, n, "%.*s", eq ? (int)(eq - a) : (int)strlen(a), a);
	} else if (c > 0 && c < 128) {
		snprintf(buf, n, "-%c", c);
	} else {
		snprintf(buf, n, "%s", a ? a : "?");
	}
}

int cli_next(enum cli_cmd cmd, int argc, char **argv)
{
	if (P.built != 1 + (int)cmd)
		build(cmd);
	opterr = 0; /* our messages, not getopt's */
	int idx = -1;
	int c = getopt_long(argc, argv, P.shorts, P.longs, &idx);
	if (c == -1)
		return CLI_END;
	char name[128];
	const struct cli_option *o = NULL;
	if (c >= LONG_BASE)
		o = P.rows[c - LONG_BASE];
	else if (c != '?' && c != ':')
		o = by_short(cmd, c);
	if (c == '?' || c == ':') {
		/* optopt: the short letter, or LONG_BASE + the row of a long option. */
		const struct cli_option *known = optopt >= LONG_BASE ? P.rows[optopt - LONG_BASE]
		                                 : optopt > 0        ? by_short(cmd, optopt)
		                                                     : NULL;
		named(name, sizeof(name), argv, optind - 1, optopt < LONG_BASE ? optopt : 0);
		if (c == ':')
			cli_usage_error(cmd, "%s needs a value (%s)", name,
			                known && known->meta ? known->meta : "see the help");
		else if (known)
			cli_usage_error(cmd, "%s takes no value", name);
		else
			cli_usage_error(cmd, "unrecognized option '%s'", name);
		P.status = EXIT_USAGE;
		return CLI_END;
	}
	if (!o) { /* not reached: getopt returns only what the tables hold */
		cli_usage_error(cmd, "unrecognized option '%s'", argv[optind - 1]);
		P.status = EXIT_USAGE;
		return CLI_END;
	}
	P.current = o;
	if (o->id == 'h' && !strcmp(o->name, "help")) {
		cli_help(cmd, stdout);
		P.status = 0;
		return CLI_END;
	}
	return o->id;
}

const char *cli_current(void)
{
	static char buf[96];
	snprintf(buf, sizeof(buf), "--%s", P.current ? P.current->name : "?");
	return buf;
}

int cli_status(void)
{
	return P.status;
}
