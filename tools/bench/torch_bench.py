"""cuptrace against torch.profiler on PyTorch workloads (README "PyTorch").

  python3 torch_bench.py run --build BUILD --workload add|transformer [--rounds 15]
                             [--configs a,b,...] [--out results.jsonl] [--steps N]
                             [--cpus LIST [--pin-main CPU]] [--max-seconds S]
  python3 torch_bench.py report results.jsonl [...]

`run` starts one process per configuration and round; the configurations of a round run one
after the other in an order rotated every round, so slow phases of a shared machine hit them all
alike. Each process times its own loop (torch_workload.py). Results are appended as JSON lines,
so a cut run still reports what it did and two runs' files can be reported together.

`report` prints, per workload, the median time per step of each configuration, the time each
tracer adds per step over the untraced run of the same round (median over rounds, with a 95%
bootstrap confidence interval resampling rounds), the ratios the targets are about (with their
intervals), bytes per kernel and kernel counts. A difference whose interval contains zero (or a
ratio whose interval contains 1) is a tie. For --gpu-metrics it adds: the ratio paired by round
(the median of each round's ratio), the ratio within each speed of the machine (each block of
steps is preceded by a fixed pure-Python CPU probe; shared VMs switch between two speeds for
seconds at a time, see by_state), and the sampler thread's CPU time per run.

Configurations:
  none               untraced
  tp_cuda            torch.profiler, CUDA activities only
  tp_cpu_cuda        torch.profiler, CPU and CUDA activities
  cuptrace           cuptrace record, defaults (trivial runtime calls left out, unwatched)
  cuptrace_watch     --runtime watch: the same, with the callback that keeps failed, slow
                     and device-changing trivial calls and counts the rest
  cuptrace_full      --driver user: the recording before issue 45 (driver getters and
                     context calls too); cuptrace_synccb: --sync-records callback;
                     floor_full: the floor likewise (floor, floor_gpu: see FLOOR_VARIANTS)
  cuptrace_all       --runtime all: every runtime call recorded
  cuptrace_pytorch   --pytorch: PyTorch ops and modules as NVTX ranges
  cuptrace_graphs    --cuda-graphs graph: a CUDA graph launch as one slice (CUPTI's
                     GRAPH_TRACE); floor_graphs: the floor likewise
  cuptrace_gpumetrics  --gpu-metrics: the default set of GPU hardware metrics sampled at
                     10 kHz beside the default trace (not in the default list: ask for it,
                     e.g. --configs none,cuptrace,cuptrace_gpumetrics); the report gives its
                     time per step over plain cuptrace's, with the interval (issue 15 wants a
                     tie or under 1.02); cuptrace_gpumetrics_1k: the same at 1 kHz
  cuptrace_ondemand  record --on-demand with no trigger: tracing loaded, no window ever open
  cuptrace_range     --capture-range range:never-seen: NVTX ranges watched, none matches
  cuptrace_steps     --steps 1000000: optimizer.step() followed, the window never reached
  cuptrace_stacks_py --stacks python: the Python call stack at every launch (issue 27)
  cuptrace_stacks_ab --stacks python, stacks on and paused (cuptrace_stacks) in alternating
                     blocks of one process (torch_workload.py --ab-stacks): report gives the
                     on / paused ratio per process and over rounds, free of the machine's
                     process-to-process spread (--ab-pairs, --ab-block)
  cuptrace_sample_abHZ --sample=HZ (50, 100, 200, 500), sampling on and paused
                     (cuptrace_stacks) in alternating blocks, as cuptrace_stacks_ab (issue 46);
                     cuptrace_sample_native_ab100: --sample=100 --sample-native
  tp_cpu_cuda_stack  torch.profiler, CPU and CUDA activities, with_stack=True
  floor              libcupti_floor.so: CUPTI with the same kinds and settings as the default,
                     every buffer thrown away (the cost of CUPTI itself)
"""
import argparse
import glob
import json
import os
import random
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "torch_workload.py")
CONFIGS = ["none", "tp_cuda", "tp_cpu_cuda", "cuptrace", "cuptrace_watch", "cuptrace_pytorch",
           "floor"]


# Floors with fewer kinds or another way of enabling API records, to find where CUPTI's time
# goes (kind numbers from cupti_activity.h: 1 MEMCPY, 2 MEMSET, 4 DRIVER, 5 RUNTIME,
# 10 CONCURRENT_KERNEL, 17 OVERHEAD).
FLOOR_VARIANTS = {
    "floor": {},
    "floor_cbid": {"CUPTRACE_API_ENABLE": "cbid"},
    "floor_nodriver": {"CUPTRACE_FLOOR_KINDS": "1,2,5,10,17"},
    "floor_kernels": {"CUPTRACE_FLOOR_KINDS": "10"},
    "floor_kineto": {"CUPTRACE_FLOOR_KINDS": "1,2,4,5,10,17"},
    # the GPU alone (issue 45's floor): device, context, concurrent kernel, memcpy, memset,
    # stream, name; no API, synchronization, memory, event or marker records
    "floor_gpu": {"CUPTRACE_FLOOR_KINDS": "8,9,10,1,2,37,11"},
    # cuptrace's recording before issue 45 on the floor: the driver records of calls that do no
    # GPU work (getters, context calls)
    "floor_full": {"CUPTRACE_DRIVER": "user"},
    # CUPTI loaded and subscribed, no kind enabled (no kind has number 999): what waiting for a
    # capture window can cost at best
    "floor_idle": {"CUPTRACE_FLOOR_KINDS": "999"},
    # graph replays' slow mode: more device buffers up front (CUPTI's default 3), or CUPTI
    # emptied ten times as often
    "floor_prealloc": {"CUPTRACE_FLOOR_PREALLOC": "32"},
    "floor_flush100": {"CUPTRACE_FLUSH_MS": "100"},
    # --cuda-graphs graph on the floor: one GRAPH_TRACE record per launch instead of its nodes'
    "floor_graphs": {"CUPTRACE_CUDA_GRAPHS": "graph"},
    # subscribed and nothing else (no clock or buffer callback), and with the four callbacks a
    # profiler-range window (--capture-range cuda-profiler-api) waits on
    "floor_sub": {"CUPTRACE_FLOOR_SUBONLY": "1"},
    "floor_sub_prof": {"CUPTRACE_FLOOR_SUBONLY": "prof"},
    # injected with libcupti loaded, not one CUPTI call: a deferred window's best case
    "floor_loaded": {"CUPTRACE_FLOOR_NOTHING": "1"},
    # the floor's buffers walked record by record on CUPTI's thread, or handed to a thread that
    # walks them (cuptrace's hand-off, no conversion): where cuptrace's time beyond the floor goes
    "floor_walk": {"CUPTRACE_FLOOR_HANDLE": "walk"},
    "floor_defer": {"CUPTRACE_FLOOR_HANDLE": "defer"},
    # where CUPTI keeps GPU timestamps (pinned host memory instead of device memory), one
    # activity buffer for all threads, CUPTI's own clock: candidates for the graph slow mode
    "floor_pinned": {"CUPTRACE_FLOOR_PINNED": "1"},
    "floor_shared_buf": {"CUPTRACE_FLOOR_PER_THREAD": "0"},
    "floor_nots": {"CUPTRACE_FLOOR_NO_TS": "1"},
}


def under_tracer(cfg, build, cmd, env, tmp):
    """cmd run under configuration cfg (none, floor*, cuptrace*; graph_host.py shares it):
    returns the command and the trace it writes (None if none), and sets env."""
    trace = None
    if cfg.startswith("cuptrace"):
        trace = os.path.join(tmp, "run.cupti" if cfg == "cuptrace_capture" else "run.pftrace")
        if cfg == "cuptrace_cbid":
            env["CUPTRACE_API_ENABLE"] = "cbid"
        extra = {"cuptrace": [], "cuptrace_cbid": [], "cuptrace_watch": ["--runtime", "watch"],
                 # the recording before issue 45: every driver call the program makes and
                 # CUPTI's synchronization records (the default: GPU-work driver calls,
                 # synchronizations from callbacks)
                 "cuptrace_full": ["--driver", "user"],
                 # synchronizations from callbacks instead of CUPTI's kind (not the default)
                 "cuptrace_synccb": ["--sync-records", "callback"],
                 "cuptrace_all": ["--runtime", "all"], "cuptrace_pytorch": ["--pytorch"],
                 # a CUDA graph launch as one slice (CUPTI's GRAPH_TRACE), no per-node cost
                 "cuptrace_graphs": ["--cuda-graphs", "graph"],
                 "cuptrace_gpumetrics": ["--gpu-metrics"],
                 "cuptrace_gpumetrics_1k": ["--gpu-metrics", "--gpu-metrics-rate", "1000"],
                 # capture windows, none open: what waiting for a window costs
                 "cuptrace_ondemand": ["--on-demand"],
                 "cuptrace_ondemand_early": ["--on-demand", "--cupti-early"],
                 "cuptrace_range": ["--capture-range", "range:never-seen"],
                 "cuptrace_profapi": ["--capture-range", "cuda-profiler-api"],
                 # one time window over the whole run: tracing through the window machinery
                 # (deferred attach, the filter that files records by window)
                 "cuptrace_timewin": ["--duration", "1h"],
                 # steps ended by the NVTX range "replay" (cgraphNn), no window reached
                 "cuptrace_steprange": ["--steps", "1000000", "--step-range", "replay"],
                 "cuptrace_steps": ["--steps", "1000000"],
                 # raw CUPTI records to the file: cuptrace's hand-off without the conversion
                 "cuptrace_capture": ["--capture"],
                 # call stacks at every launch (issue 27)
                 "cuptrace_stacks_py": ["--stacks", "python"],
                 "cuptrace_stacks_ab": ["--stacks", "python"],
                 # host stack samples (issue 46), on and paused in alternating blocks
                 "cuptrace_sample_ab50": ["--sample=50"],
                 "cuptrace_sample_ab100": ["--sample=100"],
                 "cuptrace_sample_ab200": ["--sample=200"],
                 "cuptrace_sample_ab500": ["--sample=500"],
                 "cuptrace_sample_native_ab100": ["--sample=100", "--sample-native"],
                 "cuptrace_stacks_all": ["--stacks", "all"],
                 # a stack at one launch in 2 on average
                 "cuptrace_stacks_py2": ["--stacks", "python", "--stacks-every", "2"]}[cfg]
        cmd = [os.path.join(build, "cuptrace"), "record", "--no-summary", "-o", trace] + \
            extra + ["--"] + cmd
    elif cfg.startswith("floor"):
        env["CUDA_INJECTION64_PATH"] = os.path.join(build, "libcupti_floor.so")
        env.update(FLOOR_VARIANTS[cfg])
    elif cfg != "none":
        raise SystemExit("unknown configuration " + cfg)
    return cmd, trace


def run_one(cfg, build, workload, tmp, cpus=None, steps=None, pin_main=None, ab=(40, 3)):
    m = re.fullmatch(r"cgraph(\d+)(n?)", workload)
    if m:
        # the C program (examples/graph_replay.cu): cudaGraphLaunch with no Python around it;
        # cgraphNn: each replay in an NVTX range (what following ranges costs)
        cmd = [os.path.join(build, "examples", "graph_replay"), m.group(1), str(steps or 2000)]
        if m.group(2):
            cmd += ["5", "nvtx"]
        if cfg.startswith("tp_") or cfg == "cuptrace_pytorch":
            return {"skip": "%s needs PyTorch" % cfg}
    else:
        cmd = [sys.executable, WORKER, "--workload", workload]
        if workload == "ddp":  # two ranks on two GPUs, rank 0 prints the result
            cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                   "--nproc-per-node", "2", WORKER, "--workload", workload]
        if steps:
            cmd += ["--steps", str(steps)]
        if pin_main is not None:
            cmd += ["--pin-main", str(pin_main)]
        if cfg == "cuptrace_stacks_ab" or cfg.startswith("cuptrace_sample_"):
            cmd += ["--ab-stacks", str(ab[0]), "--ab-block", str(ab[1])]
    env = dict(os.environ)
    if cfg.startswith("tp_"):
        cmd += ["--profile", cfg[3:], "--trace-out", os.path.join(tmp, "tp.json")]
        trace = None
    else:
        cmd, trace = under_tracer(cfg, build, cmd, env, tmp)
    if cpus:
        cmd = ["taskset", "-c", cpus] + cmd
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    if p.returncode or not lines:
        return {"error": "exit %d: %s" % (p.returncode, p.stderr[-500:])}
    res = json.loads(lines[-1])
    if trace:
        # no file: a capture window never opened (cuptrace_ondemand and the like)
        # a launcher's workers (torchrun's ranks) write NAME-<pid>.EXT each: count them all
        base, ext = os.path.splitext(trace)
        traces = [trace] if os.path.exists(trace) else sorted(glob.glob(base + "-*" + ext))
        res["bytes"] = sum(os.path.getsize(t) for t in traces)
        res["kernels"] = 0
        meta = {}
        for t in traces:
            st = subprocess.run([os.path.join(build, "cuptrace"), "stats", "--json", t],
                                stdout=subprocess.PIPE, text=True).stdout
            try:
                meta = json.loads(st)["metadata"]
            except (ValueError, KeyError):
                meta = {}
            res["kernels"] += int(meta.get("kernels", 0))
        if "graph_launches" in meta:
            res["graph_launches"] = int(meta["graph_launches"])
        # what GPU metrics sampling cost: the sampler thread's CPU time, and its samples
        if "gpu_metrics_sampler_cpu_ms" in meta:
            res["sampler_cpu_ms"] = float(meta["gpu_metrics_sampler_cpu_ms"])
            res["gm_samples"] = sum(int(v) for k, v in meta.items()
                                    if re.fullmatch(r"gpu\d+_metrics_samples", k))
        for t in traces:
            os.unlink(t)
    return res


def cmd_run(a):
    configs = a.configs.split(",")
    os.makedirs(a.tmp, exist_ok=True)
    t_end = time.time() + a.max_seconds if a.max_seconds else None
    with open(a.out, "a") as out:
        for r in range(a.first_round, a.first_round + a.rounds):
            k = r % len(configs)
            order = configs[k:] + configs[:k]
            for cfg in order:
                res = run_one(cfg, a.build, a.workload, a.tmp, a.cpus, a.steps, a.pin_main,
                              (a.ab_pairs, a.ab_block))
                res.update({"round": r, "config": cfg, "workload": a.workload,
                            "tag": a.tag})
                out.write(json.dumps(res) + "\n")
                out.flush()
                print(json.dumps(res), flush=True)
            if t_end and time.time() > t_end:
                print("stopping after round %d: time limit" % r, flush=True)
                break


def boot(rounds, stat, n=4000, seed=1):
    """95% interval of stat(sample of rounds), resampling rounds with replacement."""
    rng = random.Random(seed)
    vals = []
    for _ in range(n):
        s = [rounds[rng.randrange(len(rounds))] for _ in rounds]
        v = stat(s)
        if v is not None:
            vals.append(v)
    vals.sort()
    return vals[int(0.025 * len(vals))], vals[int(0.975 * len(vals)) - 1]


def fmt_ci(est, lo, hi, scale=1e6, unit="µs", digits=2):
    return "%.*f %s [%.*f, %.*f]" % (digits, est * scale, unit, digits, lo * scale, digits,
                                     hi * scale)


def tie_or(lo, hi):
    """The verdict on a ratio's 95% interval."""
    return "tie" if lo <= 1 <= hi else ("lower" if hi < 1 else "higher")


def by_state(by, num, den):
    """num / den within each speed of the machine. Shared machines were seen to switch for
    seconds at a time between two speeds (H100 VM: the same step 6.5 or 10.5 ms, the workers'
    CPU probe 7-9 or 14-17 ms), which no tracer causes and which swamps a small difference.
    A block counts as fast where its probe is under 1.25x the fastest probe of the file, slow
    over 1.6x (between: a change of state, left out); the ratio compares the medians of the
    two configurations' blocks of one state, the interval resamples rounds."""
    rs = [v for v in by.values() if num in v and den in v and "probe_s" in v[num] and
          "probe_s" in v[den]]
    if len(rs) < 3:
        return
    pmin = min(p for v in rs for c in (num, den) for p in v[c]["probe_s"])
    states = {"fast": lambda p: p < 1.25 * pmin, "slow": lambda p: p > 1.6 * pmin}
    for state, keep in states.items():
        def blocks(s, c):
            return [b for v in s for b, p in zip(v[c]["blocks_s"], v[c]["probe_s"]) if keep(p)]

        def f(s):
            a, d = blocks(s, num), blocks(s, den)
            return statistics.median(a) / statistics.median(d) if a and d else None
        na, nd = len(blocks(rs, num)), len(blocks(rs, den))
        if na < 5 or nd < 5:
            continue
        est = f(rs)
        lo, hi = boot(rs, f)
        verdict = tie_or(lo, hi)
        print("- %s / %s, time per step with the machine %s (%d and %d blocks of %d rounds, "
              "CPU probe %s %.1f ms): %.3f [%.3f, %.3f] (%s)" % (
                  num, den, state, na, nd, len(rs), "under" if state == "fast" else "over",
                  pmin * 1e3 * (1.25 if state == "fast" else 1.6), est, lo, hi, verdict))


def fast_mode(by, pairs):
    """Graph replays traced node by node run GPU-bound (the "fast mode": the GPU's time per
    replay, timestamps included) or host-bound where CUPTI's host work inside cudaGraphLaunch,
    which varies from process to process and over time, takes longer (README "CUDA graphs"),
    whichever tracer holds CUPTI: a median over processes then measures where each landed as
    much as what the tracer adds. Each process's fastest block measures its cost in the fast
    mode: num / den of those, as added time over the untraced run's fastest block (the interval
    resamples rounds); and per configuration how many processes had a block in the fast mode
    (within 3% of the fastest block of any run traced node by node: --cuda-graphs graph runs
    are counted against that too, but do not set it)."""
    def per_node(c):
        return c != "none" and not c.endswith("_graphs")
    rs_all = [v for v in by.values() if "none" in v]
    traced = [min(r["blocks_s"]) for v in rs_all for c, r in v.items()
              if per_node(c) and r.get("blocks_s")]
    if len(rs_all) < 3 or not traced:
        return
    fastest = min(traced)
    census = {}
    for v in rs_all:
        for c, r in v.items():
            if c != "none" and r.get("blocks_s"):
                n = census.setdefault(c, [0, 0])
                n[0] += min(r["blocks_s"]) < 1.03 * fastest
                n[1] += 1
    print("- processes with a block in CUPTI's fast mode (within 3%% of %.2f µs): %s" % (
        fastest * 1e6, ", ".join("%s %d/%d" % (c, n[0], n[1]) for c, n in sorted(census.items()))))
    for num, den in pairs:
        rs = [v for v in rs_all if num in v and den in v and v[num].get("blocks_s") and
              v[den].get("blocks_s")]
        if len(rs) < 3:
            continue

        def f(s):
            a = statistics.median(min(v[num]["blocks_s"]) - min(v["none"]["blocks_s"]) for v in s)
            d = statistics.median(min(v[den]["blocks_s"]) - min(v["none"]["blocks_s"]) for v in s)
            return a / d if d > 0 else None
        lo, hi = boot(rs, f)
        print("- %s / %s, added time of each process's fastest block (%d rounds): %.3f "
              "[%.3f, %.3f] (%s)" % (num, den, len(rs), f(rs) or 0, lo, hi, tie_or(lo, hi)))


def ab_report(rows, what="--stacks python"):
    """cuptrace_stacks_ab: time per step with stacks on over paused, blocks adjacent in time in
    one process. Per process the median of its pairs' ratios; over processes their median, the
    interval resampling processes (the pairs of one process are not independent of each other:
    they share its speed)."""
    procs = [r["ab"] for r in rows if r.get("ab")]
    if len(procs) < 3:
        return
    per = [statistics.median(on / off for on, off in ab) for ab in procs]
    pairs = [x for ab in procs for x in ab]
    npairs = len(pairs)
    est = statistics.median(per)
    lo, hi = boot(per, statistics.median)
    on = statistics.median(x[0] for x in pairs)
    off = statistics.median(x[1] for x in pairs)
    print("- %s on / paused, one process, adjacent blocks (%d processes, %d "
          "pairs; steps %.2f / %.2f ms): %.3f [%.3f, %.3f] (%s); per process: %s" % (
              what, len(per), npairs, on * 1e3, off * 1e3, est, lo, hi, tie_or(lo, hi),
              " ".join("%.3f" % x for x in sorted(per))))


def cmd_report(a):
    rows = []
    for f in a.files:
        with open(f) as fh:
            rows += [json.loads(l) for l in fh if l.strip()]
    errors = [r for r in rows if "error" in r]
    for e in errors:
        print("error in round %s %s: %s" % (e.get("round"), e.get("config"), e["error"][-200:]))
    rows = [r for r in rows if "error" not in r and "skip" not in r]
    for wl in sorted({r["workload"] for r in rows}):
        # round key: (tag, round) so that several runs' files combine
        by = {}
        for r in rows:
            if r["workload"] == wl:
                by.setdefault((r.get("tag"), r["round"]), {})[r["config"]] = r
        configs = [c for c in dict.fromkeys(CONFIGS + ["cuptrace_all", "cuptrace_cbid", "cuptrace_gpumetrics", "cuptrace_gpumetrics_1k", "cuptrace_ondemand", "cuptrace_range", "cuptrace_profapi", "cuptrace_timewin", "cuptrace_steprange", "cuptrace_steps", "cuptrace_capture", "cuptrace_stacks_py", "cuptrace_stacks_py2", "cuptrace_stacks_ab", "cuptrace_sample_ab50", "cuptrace_sample_ab100", "cuptrace_sample_ab200", "cuptrace_sample_ab500", "cuptrace_sample_native_ab100", "cuptrace_stacks_all", "tp_cpu_cuda_stack", "cuptrace_graphs", "cuptrace_full", "cuptrace_synccb"] + sorted(FLOOR_VARIANTS)
                                           # and any other configuration the rows have
                                           + sorted({c for v in by.values() for c in v}))
                   if any(c in v for v in by.values())]
        full = [v for v in by.values() if "none" in v]
        print("\n## %s: %d rounds (%d with an untraced run)\n" % (wl, len(by), len(full)))
        if full:
            print("| configuration | runs | time per step, median | added per step, median "
                  "[95% CI] | added %, paired by round [95% CI] | kernels | bytes per kernel |")
            print("|---|---:|---:|---:|---:|---:|---:|")
        for c in configs:
            rs = [v for v in full if c in v]
            if not rs:
                continue
            t = statistics.median(v[c]["step_s"] for v in rs)
            if c == "none":
                added = pct = "-"
            else:
                med = lambda s: statistics.median(v[c]["step_s"] - v["none"]["step_s"] for v in s)
                lo, hi = boot(rs, med)
                added = fmt_ci(med(rs), lo, hi)
                rel = lambda s: statistics.median(100 * (v[c]["step_s"] / v["none"]["step_s"] - 1)
                                                  for v in s)
                rlo, rhi = boot(rs, rel)
                pct = "%+.1f%% [%+.1f, %+.1f]" % (rel(rs), rlo, rhi)
            ks = sorted({v[c].get("kernels") for v in rs if v[c].get("kernels") is not None})
            kern = ", ".join(str(k) for k in ks) if ks else "-"
            if "bytes_raw" in rs[0][c]:
                bpk = "%.1f raw, %.1f gzipped" % (
                    statistics.median(v[c]["bytes_raw"] / v[c]["kernels"] for v in rs),
                    statistics.median(v[c]["bytes_gz"] / v[c]["kernels"] for v in rs))
            elif "bytes" in rs[0][c] and rs[0][c].get("graph_launches"):
                # --cuda-graphs graph: launches, not kernels, and bytes per launch
                kern = ", ".join(sorted({"%d launches" % v[c]["graph_launches"] for v in rs}))
                bpk = "%.1f per launch" % statistics.median(
                    v[c]["bytes"] / max(1, v[c]["graph_launches"]) for v in rs)
            elif "bytes" in rs[0][c]:
                bpk = "%.1f" % statistics.median(v[c]["bytes"] / max(1, v[c]["kernels"])
                                                 for v in rs)
            else:
                bpk = "-"
            print("| %s | %d | %.2f µs | %s | %s | %s | %s |" % (c, len(rs), t * 1e6, added, pct, kern,
                                                           bpk))
        if full:
            print()

        def ratio(num, den, what):
            need = (num, den, "none") if what == "added" else (num, den)
            rs = [v for v in by.values() if all(c in v for c in need)]
            if len(rs) < 3:
                return

            def st(s):
                d = statistics.median(v[den]["step_s"] - v["none"]["step_s"] for v in s)
                n = statistics.median(v[num]["step_s"] - v["none"]["step_s"] for v in s)
                return n / d if d > 0 else None

            def st_abs(s):
                return (statistics.median(v[num]["step_s"] for v in s) /
                        statistics.median(v[den]["step_s"] for v in s))

            def st_paired(s):
                # the two ran in the same round, minutes apart at most: the round's ratio
                # cancels the machine's slow drifts, which a ratio of medians does not
                return statistics.median(v[num]["step_s"] / v[den]["step_s"] for v in s)

            f = {"time": st_abs, "added": st, "paired": st_paired}[what]
            est = f(rs)
            lo, hi = boot(rs, f)
            word = {"added": "added time", "time": "time per step",
                    "paired": "time per step, paired by round"}[what]
            verdict = tie_or(lo, hi)
            print("- %s / %s, %s (%d rounds): %.3f [%.3f, %.3f] (%s)" % (
                num, den, word, len(rs), est if est else 0, lo, hi, verdict))

        # Kernel counts: every tracer must see what the program launched (the C program says
        # how many; torch.profiler counts inside its own window, which covers the same work).
        counts = {}
        for v in by.values():
            for c, r in v.items():
                if r.get("kernels") is not None and (c.startswith("cuptrace") or
                                                      c.startswith("tp_")) and \
                        c != "cuptrace_graphs":
                    counts.setdefault(c, set()).add(r["kernels"])
        launched = {r["kernels_launched"] for v in by.values() for r in v.values()
                    if "kernels_launched" in r}
        if counts:
            same = len({k for ks in counts.values() for k in ks} | launched) == 1
            print("- kernel counts: %s%s (%s)" % (
                "; ".join("%s %s" % (c, ",".join(map(str, sorted(k))))
                          for c, k in sorted(counts.items())),
                "; launched %s" % ",".join(map(str, sorted(launched))) if launched else "",
                "equal" if same else "DIFFERENT"))
        # --cuda-graphs graph: launches, not kernels; the C program says how many it made.
        gl = {r.get("graph_launches", 0) for v in by.values() for c, r in v.items()
              if c == "cuptrace_graphs" and "kernels" in r}
        if gl:
            m = re.fullmatch(r"cgraph(\d+)n?", wl)
            want = {k // int(m.group(1)) for k in launched} if m else set()
            print("- cuptrace_graphs: graph launches %s%s" % (
                ",".join(map(str, sorted(gl))),
                (" (launched %s: %s)" % (",".join(map(str, sorted(want))),
                                         "equal" if gl == want else "DIFFERENT")) if want
                else ""))
        ratio("cuptrace", "tp_cuda", "added")
        ratio("cuptrace_graphs", "tp_cuda", "added")
        ratio("cuptrace_graphs", "floor", "added")
        ratio("cuptrace_graphs", "floor_graphs", "added")
        if wl.startswith(("graph", "cgraph", "compile")):
            fast_mode(by, [("cuptrace", "tp_cuda"), ("cuptrace", "floor")])
        ratio("cuptrace_stacks_py", "tp_cpu_cuda_stack", "added")
        ratio("cuptrace_stacks_py", "cuptrace", "paired")
        ratio("cuptrace_stacks_py2", "cuptrace", "paired")
        ratio("cuptrace_stacks_all", "cuptrace", "paired")
        ratio("cuptrace_watch", "tp_cuda", "added")
        ratio("cuptrace_pytorch", "tp_cpu_cuda", "added")
        # issue 45's targets: the default recording against the GPU alone
        ratio("cuptrace", "floor_gpu", "added")
        ratio("cuptrace_full", "floor_gpu", "added")
        ratio("cuptrace", "cuptrace_full", "added")
        ratio("cuptrace_synccb", "cuptrace", "added")
        ratio("floor", "floor_gpu", "added")
        ratio("floor_full", "floor_gpu", "added")
        ratio("cuptrace", "floor", "time")
        ratio("cuptrace", "floor", "added")
        ratio("cuptrace_capture", "floor", "added")
        ratio("floor_defer", "floor", "added")
        ratio("cuptrace_ondemand", "floor_idle", "paired")
        ratio("cuptrace_ondemand", "none", "paired")
        ratio("cuptrace_steps", "none", "paired")
        ratio("cuptrace_watch", "cuptrace", "time")
        ratio("cuptrace_gpumetrics", "cuptrace", "time")
        ratio("cuptrace_gpumetrics", "cuptrace", "paired")
        ratio("cuptrace_gpumetrics_1k", "cuptrace", "paired")
        by_state(by, "cuptrace_gpumetrics", "cuptrace")
        by_state(by, "cuptrace_stacks_py", "cuptrace")
        by_state(by, "cuptrace_stacks_py2", "cuptrace")
        ab_report([v["cuptrace_stacks_ab"] for v in by.values() if "cuptrace_stacks_ab" in v])
        for hz in ("50", "100", "200", "500", "native_100"):
            c = "cuptrace_sample_ab" + hz if hz[0] != "n" else "cuptrace_sample_native_ab100"
            ab_report([v[c] for v in by.values() if c in v],
                      "--sample=%s" % hz.replace("native_", "") +
                      (" --sample-native" if hz[0] == "n" else ""))
        for c in ("cuptrace_ondemand", "cuptrace_range", "cuptrace_profapi", "cuptrace_steps",
                  "cuptrace_steprange"):
            by_state(by, c, "none")
        for c in ("cuptrace_gpumetrics", "cuptrace_gpumetrics_1k"):
            gm = [v[c] for v in by.values() if c in v and v[c].get("gm_samples")]
            if gm:
                print("- %s: sampler thread CPU %.0f ms per run for %.0f samples (%.1f µs per "
                      "sample), medians of %d runs" % (
                          c, statistics.median(r["sampler_cpu_ms"] for r in gm),
                          statistics.median(r["gm_samples"] for r in gm),
                          statistics.median(r["sampler_cpu_ms"] * 1e3 / r["gm_samples"]
                                            for r in gm), len(gm)))
        bytes_rows = [v for v in full if "cuptrace" in v and "tp_cuda" in v]
        if bytes_rows:
            r = statistics.median((v["cuptrace"]["bytes"] / v["cuptrace"]["kernels"]) /
                                  (v["tp_cuda"]["bytes_gz"] / v["tp_cuda"]["kernels"])
                                  for v in bytes_rows)
            print("- cuptrace bytes per kernel / torch.profiler (CUDA) gzipped: %.3f" % r)
        pt_rows = [v for v in full if "cuptrace_pytorch" in v and "tp_cpu_cuda" in v]
        if pt_rows:
            r = statistics.median(
                (v["cuptrace_pytorch"]["bytes"] / v["cuptrace_pytorch"]["kernels"]) /
                (v["tp_cpu_cuda"]["bytes_gz"] / v["tp_cpu_cuda"]["kernels"]) for v in pt_rows)
            print("- cuptrace --pytorch bytes per kernel / torch.profiler (CPU+CUDA) gzipped: "
                  "%.3f" % r)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--build", required=True)
    r.add_argument("--workload", required=True)
    r.add_argument("--rounds", type=int, default=15)
    r.add_argument("--configs", default=",".join(CONFIGS))
    r.add_argument("--out", default="torch_bench.jsonl")
    r.add_argument("--tmp", default="/tmp/torch_bench")
    r.add_argument("--tag", default="")
    r.add_argument("--pin-main", type=int, metavar="CPU",
                   help="the stepping thread alone on this CPU once the model is built (give "
                   "--cpus without it): the tracer's threads cannot take its CPU")
    r.add_argument("--steps", type=int, help="timed steps per process (the workload's default "
                   "if not given): more steps, less noise per process")
    r.add_argument("--first-round", type=int, default=0,
                   help="continue an earlier run's rotation (its file's round numbers go on)")
    r.add_argument("--cpus", help="run every process on these CPUs (taskset -c), the same "
                   "for all configurations: fewer migrations, less spread")
    r.add_argument("--max-seconds", type=float, default=0,
                   help="stop after the round during which this much time has passed")
    r.add_argument("--ab-pairs", type=int, default=40,
                   help="cuptrace_stacks_ab: pairs of blocks per process (default 40)")
    r.add_argument("--ab-block", type=int, default=3,
                   help="cuptrace_stacks_ab: steps per block (default 3)")
    q = sub.add_parser("report")
    q.add_argument("files", nargs="+")
    a = p.parse_args()
    return cmd_run(a) if a.cmd == "run" else cmd_report(a)


if __name__ == "__main__":
    sys.exit(main())
