/* cuptrace public C API, and the one list of every CUPTRACE_* environment variable.
 *
 * Two ways in:
 *  - No code change: `cuptrace record -o run.pftrace -- ./app` sets CUDA_INJECTION64_PATH to
 *    libcuptrace.so and the variables below; the CUDA driver loads the library at cuInit and
 *    tracing runs from then until exit (or SIGINT/SIGTERM).
 *  - Linking libcuptrace.so: call cuptrace_start() before the work to trace (ideally before the
 *    first CUDA call), cuptrace_stop() when done. Don't also set CUDA_INJECTION64_PATH.
 *
 * Environment variables (read once, when tracing starts; `cuptrace record` sets them from its
 * options). One table (src/common/options.c) checks each value for record and for the library
 * alike: record refuses a bad one (exit 2); the library says so once on stderr and uses the
 * default (the OTLP ones included: the sink's own default where none is given).
 *   CUPTRACE_OUTPUT       output path; %p = pid, %h = host name, %r / %l = the global / local
 *                         rank the launcher gives (RANK/LOCAL_RANK of torchrun, OMPI_COMM_WORLD_*,
 *                         PMI_RANK/MPI_LOCALRANKID, SLURM_PROCID/SLURM_LOCALID; the pid without
 *                         one), %% = '%'. Default
 *                         "cuptrace-%p.pftrace". The extension picks the format unless
 *                         CUPTRACE_FORMAT says otherwise: .pftrace (Perfetto, zlib chunks),
 *                         .pftrace.gz, .json, .json.gz (Chrome JSON), .cupti (raw capture).
 *   CUPTRACE_FORMAT       perfetto | chrome | capture
 *   CUPTRACE_COMPRESS     chunks | gzip | none (default: from the extension)
 *   CUPTRACE_COMPRESS_LEVEL  1 (least CPU, files about 9% larger) to 12 (smallest); default 5.
 *                         zlib (gzip outputs, or chunks where libdeflate.so.0 is missing) stops
 *                         at 9
 *   CUPTRACE_BUFFER_SIZE  bytes per CUPTI activity buffer (default 1048576, 8192 to 1 GiB)
 *   CUPTRACE_QUEUE        completed buffers waiting for the writer before cuptrace drops one
 *                         (default 64; a dropped buffer's records are counted in the trace)
 *   CUPTRACE_FLUSH_MS     how often records are pulled from CUPTI and written (default 1000)
 *   CUPTRACE_DRIVER       work (default: the driver calls that make, order or wait for GPU
 *                         work; getters and context calls are left out) | user (every call
 *                         the application made itself) | all (the runtime's own calls too)
 *   CUPTRACE_SYNC_RECORDS cupti (default: CUPTI's SYNCHRONIZATION records) | callback
 *                         (synchronizations timed by callbacks on the calls that synchronize
 *                         instead: the same slices, no saving measured yet)
 *   CUPTRACE_RUNTIME      filtered (default: trivial runtime calls such as cudaGetDevice are
 *                         switched off in CUPTI) | watch (off, but counted, and kept when they
 *                         fail, take 50 us or more, or change the device) | all
 *   CUPTRACE_API_ENABLE   kind (default) | cbid: switch API records on call by call instead of
 *                         by kind (an experiment: measured no faster)
 *   CUPTRACE_CUDA_GRAPHS  node (default): each kernel, copy and memset of a CUDA graph launch |
 *                         graph: one slice per launch, first node's start to last node's end
 *                         (CUPTI's GRAPH_TRACE: no per-node cost, no per-node detail; only
 *                         from before CUDA starts: with capture windows, or cuptrace_start
 *                         after the first CUDA call, graphs are recorded node by node)
 *   CUPTRACE_OVERHEAD_TRACKS  process (default): CUPTI's own overhead (module loading, buffer
 *                         flushes, ...) on one track "CUPTI overhead" per process, each slice's
 *                         thread in its arg "tid" | thread: a track per thread it happened on
 *   CUPTRACE_CUPTI_EARLY  1: with capture windows, keep CUPTI subscribed while waiting (costs a
 *                         subscription; needed by programs that launch CUDA graphs from the
 *                         GPU: CUPTI 13.0 makes those launches fail when it starts later)
 *   CUPTRACE_STACKS       none (default) | python | native | all | python-held | all-held: the
 *                         call stack at each launch, copy, memset and synchronizing call
 *                         (`record --stacks`)
 *   CUPTRACE_STACKS_EVERY N: a stack at one such call in N on average (default 1: every call)
 *   CUPTRACE_SAMPLE       HZ: sample the Python stacks of the threads that call CUDA HZ times a
 *                         second of wall-clock time (1 to 1000; 0, the default: off), without
 *                         the GIL (`record --sample`; src/inject/SAMPLING.md)
 *   CUPTRACE_SAMPLE_THREADS cuda (default) | all: which threads CUPTRACE_SAMPLE samples
 *   CUPTRACE_SAMPLE_NATIVE 1: the samples carry native frames too, through a signal to each
 *                         running thread (`record --sample-native`; SAMPLING.md)
 *   CUPTRACE_UNWINDER     glibc: native stacks through glibc's backtrace() instead of
 *                         libunwind (a test hook, to run both paths)
 *   CUPTRACE_PYTORCH      set by `record --pytorch` (1, or "shapes") for its Python hook, which
 *                         `record` puts first on PYTHONPATH; CUPTRACE_PYTORCH_MODULES=0 leaves
 *                         out the nn.Module ranges; CUPTRACE_PYTORCH_DEBUG=1 makes the hook
 *                         say why disabling its profiler at exit failed
 *   CUPTRACE_GPU_METRICS  1: sample the default GPU hardware metrics (PM sampling) of every GPU
 *                         a context is created on, as counter tracks under the GPU; or a
 *                         comma-separated list of CUPTI metric names; unset or 0: off
 *   CUPTRACE_GPU_METRICS_RATE  samples per second per GPU (default 10000)
 *   CUPTRACE_GPU_METRICS_CLOCK auto (default) | realtime | boottime | monotonic |
 *                         monotonic_raw: the clock of PM sample timestamps (auto: found per
 *                         GPU from the first sample; they follow CUPTI's clock)
 *   CUPTRACE_GPU_METRICS_NICE  the nice value of the PM sampling thread (default 10)
 *   CUPTRACE_SUMMARY      1 (default) prints the end-of-run summary on stderr; 0 silences it
 *   CUPTRACE_LOG          error | warn (default) | info | debug
 *   CUPTRACE_CMDLINE      the traced command line, as `cuptrace record` saw it (metadata)
 *   CUPTRACE_PRIVATE      1 (`record --private`): no host name, boot id, record_cmdline or
 *                         command-line arguments (the program's base name stays) in the trace
 *   CUPTRACE_ROOT_PID     set by `cuptrace record` to the command's pid: any other process
 *                         (children, subprocesses) whose CUPTRACE_OUTPUT lacks %p writes to
 *                         NAME-<pid>.EXT instead, so no trace overwrites another
 *   CUPTRACE_SIGNALS      1 (default): finish the trace on SIGINT/SIGTERM, then die of the signal
 *                         as the program would have; 0: leave signal handling alone
 *   CUPTRACE_TAKEN        set by libcuptrace_preload.so (which `cuptrace record` preloads) in
 *                         the environment of an exec'd image: the traces its earlier images
 *                         (same pid) wrote, ':'-separated; the new image writes NAME-<pid>.EXT
 *                         (then NAME-<pid>-2.EXT, ...) instead of writing over one of them
 *   CUPTRACE_RECORD_START set by `cuptrace record` (Unix ns): a process whose trace name
 *                         another process of the run already took (two CUDA processes of one
 *                         rank with "%r", say) writes NAME-<pid>.EXT instead
 *   CUPTRACE_CLAIMS       set by `cuptrace record`: the run's directory, where processes claim
 *                         trace names and note the partial files their traces are written to
 *                         until finished (.NAME.cuptrace-PID.partial beside NAME), so that
 *                         record can rename into place what a killed process left
 *   CUPTRACE_ERROR_FILE   set by `cuptrace record`: a process where tracing cannot start
 *                         appends a line there, so record exits non-zero
 *   CUPTRACE_FAULT_BUFFERS  N > 0: refuse every N-th buffer CUPTI asks for (a drill: CUPTI
 *                         then drops records, which the summary and the trace count)
 *   CUPTRACE_LIB          read by `cuptrace record`: the libcuptrace.so to inject (`--lib`;
 *                         default: next to the cuptrace command)
 *   CUPTRACE_SYMBOL_PATH  read by `cuptrace symbolize`, `convert`, `stats`, `diff`, `analyze`:
 *                         a colon-separated list of directories with binaries and debug files
 *                         to symbolize native frames from, after the --symbol-dir options
 *   CUPTRACE_LIBDW_NAME   the libdw the symbolizer loads (default libdw.so.1; a test hook)
 *   CUPTRACE_MIN_COMPUTE  read by `cuptrace record`: the lowest compute capability (x10) it
 *                         accepts, 75 unless higher (a test of the unsupported-GPU refusal)
 *   CUPTRACE_OTLP_URL     also send the trace as OpenTelemetry spans (OTLP/HTTP) to this
 *                         collector (`record --otlp`); CUPTRACE_OUTPUT=none: spans only, no file.
 *                         libcurl.so.4 is loaded (dlopen) only then; CUPTRACE_OTLP_LIBCURL names
 *                         another (tests). Not with CUPTRACE_FORMAT=capture
 *   CUPTRACE_DELAY, CUPTRACE_DURATION, CUPTRACE_CAPTURE_RANGE, CUPTRACE_STEPS,
 *   CUPTRACE_STEP_RANGE, CUPTRACE_CAPTURE_REPEAT, CUPTRACE_ON_DEMAND, CUPTRACE_RING,
 *   CUPTRACE_RING_SLOW, CUPTRACE_RING_MAX
 *                         the record options of the same names (README: Tracing part of a run);
 *                         %n in CUPTRACE_OUTPUT: a file per window (its number)
 *   CUPTRACE_WINDOW_DRAIN how long GPU work launched in a window may take to report after it
 *                         closes (default 500ms)
 *   CUPTRACE_JOB          set by `cuptrace record` to its pid: the trigger socket's name holds
 *                         it (`cuptrace trigger --job PID`)
 *   CUPTRACE_STEP_HOOK    set by record: "optimizer" makes its Python hook call cuptrace_step()
 *                         when optimizer.step() returns
 *   CUPTRACE_STEP_MARKS   set by record: 1 (default) makes its Python hook mark every
 *                         optimizer.step() with an NVTX range "optimizer.step" on its thread;
 *                         0 (record --no-step-marks, or set so before record) leaves it out
 *   CUPTRACE_OTLP_SERVICE, CUPTRACE_OTLP_TRACE_PER, CUPTRACE_OTLP_BATCH,
 *   CUPTRACE_OTLP_INTERVAL_MS, CUPTRACE_OTLP_WINDOW_MS, CUPTRACE_OTLP_TIMEOUT_MS
 *                         the record options --service, --otlp-trace-per, --otlp-batch,
 *                         --otlp-interval, --otlp-window, --otlp-timeout (README: OpenTelemetry)
 *
 * Threading: all functions are thread-safe and idempotent. Ownership: the library owns every
 * buffer and thread it creates and releases them in cuptrace_stop() (or at exit). */
#ifndef CUPTRACE_H
#define CUPTRACE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CUPTRACE_API __attribute__((visibility("default")))

/* Starts tracing into `path` (NULL: CUPTRACE_OUTPUT or its default). Returns 0, -EALREADY if
 * tracing is already running (for instance through injection), or a negative errno; a message
 * goes to stderr. Options come from the environment variables above. The trace is written to
 * .NAME.cuptrace-PID.partial beside path and renamed onto path when finished: a file already
 * there stays until then. */
CUPTRACE_API int cuptrace_start(const char *path);

/* Pulls every record out of CUPTI and hands it to the writer thread; returns once the writer
 * has taken it. It reaches the partial file within CUPTRACE_FLUSH_MS (cuptrace_stop() writes
 * everything and puts the file in place before it returns). Does not synchronize the GPU: call
 * cudaDeviceSynchronize() first for work still running, whose records CUPTI would otherwise report
 * without times. */
CUPTRACE_API int cuptrace_flush(void);

/* With capture windows (record --on-demand, --capture-range, ...; CUPTRACE_ON_DEMAND=1 and the
 * other variables below), cuptrace_start() opens a window and cuptrace_stop() closes it, as
 * `cuptrace trigger` would: the session itself ends with the program. Otherwise: */
/* Flushes, finishes the file and renames it onto its name, prints the summary (unless
 * CUPTRACE_SUMMARY=0) and stops tracing. Returns 0 or the first error seen while writing. A later
 * cuptrace_start() begins a new session into a new file (tested: 100 start/stop cycles in one
 * process, each file complete, no descriptor, thread or memory left behind). */
CUPTRACE_API int cuptrace_stop(void);

/* Marks the end of a training step: `record --steps`, `--ring-slow` and `cuptrace trigger
 * --steps` count steps by it. PyTorch programs need not call it (record's Python hook calls it
 * when optimizer.step() returns); any other program can. Returns 0; a no-op outside tracing. */
CUPTRACE_API int cuptrace_step(void);

/* Ends the session cuptrace_start() began, with capture windows or without: closes an open
 * window, drains CUPTI, finishes the file(s) and renames them into place, prints the summary
 * once (unless CUPTRACE_SUMMARY=0). With windows, cuptrace_stop() only closes a window: this is
 * how a program (the Python package's stop()) gets its files finished before it exits. Returns
 * 0 or the first error seen while writing; -EINVAL when no session runs; -EPERM for the session
 * `cuptrace record` injected (record's: it ends with the program). */
CUPTRACE_API int cuptrace_end(void);

/* A named range on the calling thread, without NVTX: cuptrace_range_push(name) begins it,
 * cuptrace_range_pop() ends the thread's innermost one. It is what an NVTX push/pop range of
 * that name is: a slice on the thread's track in the trace (category "nvtx", nested with the
 * thread's NVTX ranges), and for capture windows (--capture-range range:NAME, --step-range
 * NAME) a range of that name. Not in the flight recorder's dumps (--ring). Outside a session
 * push and pop only keep the thread's stack (no record). Returns 0; -EINVAL for a NULL name,
 * or a pop with no range open on this thread. */
CUPTRACE_API int cuptrace_range_push(const char *name);
CUPTRACE_API int cuptrace_range_pop(void);

/* Checks value as the CUPTRACE_* variable var with the parser `record` and the library use
 * (one table, src/common/options.c; the OTLP variables' own): 0, or -EINVAL with the reason
 * ("bad value for CUPTRACE_DRIVER: 'x' (takes user or all)") in why (n bytes, NUL-ended);
 * -ENOENT: var is not one the library reads. Sets nothing. */
CUPTRACE_API int cuptrace_setting_check(const char *var, const char *value, char *why, size_t n);

/* With call stacks (record --stacks, CUPTRACE_STACKS) or host stack samples (record --sample,
 * CUPTRACE_SAMPLE): on = 0 pauses them, from now on and for every thread, until
 * cuptrace_stacks(1): launches made meanwhile carry no stack, no sample is taken, and they cost
 * what they cost without those options (CUPTI's callbacks for those calls are switched off, not
 * just ignored). For code whose stacks you know already, or to measure what stacks cost in one
 * process (tools/bench/torch_workload.py --ab-stacks). Callable before tracing starts (it starts
 * paused) and before a capture window opens. Returns 0, or -ENOTSUP when the process takes no
 * stacks and no samples. */
CUPTRACE_API int cuptrace_stacks(int on);

#ifdef __cplusplus
}
#endif

#endif
