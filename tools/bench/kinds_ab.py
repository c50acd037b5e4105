#!/usr/bin/env python3
"""Where CUPTI's time goes (issue 45): what each activity kind and each type of API record
costs a step, measured inside one process under the CUPTI floor.

    tools/bench/kinds_ab.py BUILD --workload ddp|transformer|add|launch [--procs 3]
                            [--pairs 10] [--block N] [--specs "k5;k4;rt~Launch;..."]
                            [--raw FILE]

Each process runs the workload under libcupti_floor.so (cuptrace's activity kinds and settings,
every buffer thrown away) and times blocks of steps: per pair and per spec, one block with the
floor's default set and one with the spec switched off (cuptrace_floor_ab, called between
blocks with the GPU idle; the order alternates pair by pair, and the specs' order rotates).
The difference of the two blocks of a pair is what the spec costs a step, free of the
process-to-process spread of a shared machine. ddp runs under torchrun on two GPUs (both ranks
switch together; rank 0 reports); launch is the C launch loop (BUILD/examples/launch_ab, a
step being one launch). Prints per spec: the cost per step (median over pairs, 95% bootstrap
interval resampling pairs), as a share of the default step, and of what the whole host side
("gpu": every kind but the GPU's off) costs.

Specs: "kN" an activity kind (cupti_activity.h numbers), "rt~SUB" / "drv~SUB" the runtime /
driver API records of every call whose name contains SUB; joined by commas.

--tracer cuptrace measures cuptrace itself instead of the floor: the workload runs under
`BUILD/cuptrace record --sync-records callback` (records converted and written as users get
them) and cuptrace_bench_ab (src/inject/collect_bench.c) switches between blocks: "kN" off,
"+kN" on, "cb-sync" the synchronizing calls' callbacks off. Its default specs include "gpu"
(every host-side kind and callback off: the GPU alone) and "none" (nothing recorded per call:
CUPTI attached and idle, the in-process stand-in for untraced), from which it prints issue 45's
target, the default's added time over the GPU alone's, for callbacks and for CUPTI's
synchronization records, with 95% intervals (pairs resampled per spec).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

from torch_bench import boot  # the same bootstrap (no torch import)

HERE = os.path.dirname(os.path.abspath(__file__))
HOST_KINDS = "k4,k5,k38,k49,k50,k36,k12,k13,k17"
# (spec, what it is)
SPECS = [
    ("k5", "runtime API records (kind 5)"),
    ("k4", "driver API records (kind 4)"),
    ("k38", "synchronization (38)"),
    ("k49,k50", "memory, memory pool (49, 50)"),
    ("k36", "CUDA events (36)"),
    ("k12,k13", "NVTX markers (12, 13)"),
    ("k17", "overhead records (17)"),
    ("k10", "kernels (10)"),
    ("k1,k2", "memcpy, memset (1, 2)"),
    ("k37", "streams (37)"),
    ("rt~Launch", "runtime records: launches"),
    ("rt~Memcpy,rt~Memset", "runtime records: copies, memsets"),
    ("rt~Synchronize", "runtime records: synchronizations"),
    ("rt~Event", "runtime records: events"),
    ("rt~StreamWait,rt~StreamGet,rt~StreamIs,rt~StreamQuery", "runtime records: stream queries, waits"),
    ("rt~Malloc,rt~Free", "runtime records: allocations"),
    ("rt~Get,rt~Peek,rt~Set", "runtime records: getters, setters"),
    ("drv~Launch", "driver records: launches"),
    ("drv~Mem", "driver records: memory calls"),
    ("drv~Event,drv~Stream", "driver records: events, streams"),
    ("drv~Ctx,drv~Get,drv~Func", "driver records: context, getters, functions"),
    (HOST_KINDS, "gpu: every host-side kind off (the GPU alone)"),
]


# cuptrace's own switch (--tracer cuptrace): the run is `record --sync-records callback`
PER_CALL_KINDS = "k1,k2,k4,k5,k10,k12,k13,k17,k22,k36,k38,k49,k50,k51"
CT_SPECS = [
    ("+k38,cb-sync", "CUPTI's synchronization records instead of callbacks"),
    ("k5,cb-rt", "runtime API records from callbacks instead of CUPTI's (kind 5)"),
    ("cb-sync", "synchronization callbacks off (no synchronization slices)"),
    ("k5", "runtime API records (kind 5)"),
    ("k4", "driver API records (kind 4)"),
    ("k49,k50", "memory, memory pool (49, 50)"),
    ("k36", "CUDA events (36)"),
    ("k12,k13,k17", "NVTX markers, overhead records (12, 13, 17)"),
    ("k10", "kernels (10)"),
    ("api-cbid", "API records switched on call by call (CUPTRACE_API_ENABLE=cbid)"),
    (HOST_KINDS + ",cb-sync", "gpu: every host-side kind and callback off (the GPU alone)"),
    (PER_CALL_KINDS + ",cb-sync", "none: nothing recorded per call (CUPTI attached, idle)"),
    # the GPU alone against nothing, in the same pair: the target's denominator, measured
    # directly instead of as the difference of two savings
    (HOST_KINDS + ",cb-sync>" + PER_CALL_KINDS + ",cb-sync", "the GPU alone against none"),
]


def run(a, specs):
    env = dict(os.environ, CUDA_INJECTION64_PATH=os.path.join(a.build, "libcupti_floor.so"),
               NCCL_NVLS_ENABLE="0")
    pre = []
    if a.tracer == "cuptrace":
        env.pop("CUDA_INJECTION64_PATH")
        out = os.path.join(a.tmp, "ab.pftrace")
        pre = [os.path.join(a.build, "cuptrace"), "record", "--sync-records", a.sync_records,
               "-o", out, "--"]
    if a.workload == "launch":
        cmd = [os.path.join(a.build, "examples", "launch_ab"), str(a.pairs),
               str(a.block or 20000)] + specs
    else:
        w = [os.path.join(HERE, "torch_workload.py"), "--workload", a.workload,
             "--ab-kinds", ";".join(specs), "--ab-pairs", str(a.pairs),
             "--ab-block", str(a.block or {"ddp": 10, "transformer": 5}.get(a.workload, 200))]
        cmd = [sys.executable] + w
        if a.workload == "ddp":
            cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                   "--nproc-per-node", "2"] + w
    p = subprocess.run(pre + cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    if p.returncode or not lines:
        raise SystemExit("kinds_ab: %s failed (exit %d): %s" % (" ".join(cmd[:3]), p.returncode,
                                                                p.stderr[-800:]))
    return json.loads(lines[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build")
    ap.add_argument("--workload", required=True, choices=["ddp", "transformer", "add", "launch"])
    ap.add_argument("--procs", type=int, default=3)
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument("--block", type=int)
    ap.add_argument("--specs", help="';'-separated specs (default: the built-in list)")
    ap.add_argument("--raw", help="append each process's JSON line to this file")
    ap.add_argument("--tracer", choices=["floor", "cuptrace"], default="floor")
    ap.add_argument("--sync-records", choices=["callback", "cupti"], default="callback",
                    help="--tracer cuptrace: the recording's synchronization records")
    ap.add_argument("--tmp", default=os.environ.get("TMPDIR", "/tmp"),
                    help="where --tracer cuptrace writes its traces")
    a = ap.parse_args()
    table = CT_SPECS if a.tracer == "cuptrace" else SPECS
    specs = a.specs.split(";") if a.specs else [s for s, _ in table]
    names = dict(table)
    pooled = {s: [] for s in specs}
    for i in range(a.procs):
        res = run(a, specs)
        if a.raw:
            with open(a.raw, "a") as f:
                f.write(json.dumps(res) + "\n")
        for s in specs:
            pooled[s] += res["abk"][s]
    base = statistics.median(b for s in specs for b, _ in pooled[s])
    host = None
    gpu_spec = HOST_KINDS + (",cb-sync" if a.tracer == "cuptrace" else "")
    if gpu_spec in pooled:
        host = statistics.median(b - o for b, o in pooled[gpu_spec])
    unit = "launch" if a.workload == "launch" else "step"
    print("kinds_ab: %s, %d processes x %d pairs per spec; default %s %.2f us per %s" % (
        a.workload, a.procs, a.pairs, a.tracer, base * 1e6, unit))
    print("| switched off | what | saves per %s, median [95%% CI] | of the step | of the host "
          "side |" % unit)
    print("|---|---|---:|---:|---:|")
    for s in specs:
        d = [b - o for b, o in pooled[s]]
        med = statistics.median(d)
        lo, hi = boot(d, statistics.median)
        print("| `%s` | %s | %.2f us [%.2f, %.2f] | %.1f%% | %s |" % (
            s, names.get(s, ""), med * 1e6, lo * 1e6, hi * 1e6, 100 * med / base,
            "%.0f%%" % (100 * med / host) if host and host > 0 else "-"))
    if a.tracer == "cuptrace":
        targets(pooled, unit, a.sync_records)


def targets(pooled, unit, sync_records):
    """(A ">" B specs: the pair's blocks are A and B: b - o is what A costs over B.)"""
    """Issue 45's target from the in-process blocks: added = X - none; the default's added time
    over the GPU alone's, and over the untraced stand-in's step."""
    none = PER_CALL_KINDS + ",cb-sync"
    gpu = HOST_KINDS + ",cb-sync"
    cupti = "+k38,cb-sync"
    direct = gpu + ">" + none
    if not all(k in pooled for k in (none, gpu)):
        return
    keys = (none, gpu, cupti) + ((direct,) if direct in pooled else ())
    if cupti not in pooled:  # a run whose default is CUPTI's records: no switch to them
        pooled = dict(pooled, **{cupti: [[b, b] for b, _ in pooled[none]]})
    import random
    rng = random.Random(45)

    def est(p):
        d = {k: statistics.median(b - o for b, o in p[k]) for k in keys}
        base = statistics.median(b for b, _ in p[none])
        untraced = base - d[none]
        add_cb = d[none]
        add_gpu = d[direct] if direct in d else d[none] - d[gpu]
        add_cupti = d[none] - d[cupti]
        return (add_cb / add_gpu if add_gpu > 0 else float("inf"),
                add_cupti / add_gpu if add_gpu > 0 else float("inf"),
                add_cb / untraced, add_cupti / untraced, add_gpu / untraced,
                add_cb * 1e6, add_cupti * 1e6, add_gpu * 1e6)

    point = est(pooled)
    reps = []
    for _ in range(2000):
        reps.append(est({k: [rng.choice(pooled[k]) for _ in pooled[k]] for k in keys}))
    lo = [sorted(r[i] for r in reps)[50] for i in range(len(point))]
    hi = [sorted(r[i] for r in reps)[1949] for i in range(len(point))]
    rows = [("added per %s, the run's default (sync records: %s)" % (unit, sync_records), 5,
             "%.1f us"),
            ("added per %s, CUPTI synchronization records" % unit, 6, "%.1f us"),
            ("added per %s, the GPU alone (%s)" % (unit, "its own pairs against none"
                                                   if direct in pooled else "none - gpu"),
             7, "%.1f us"),
            ("the run's default / GPU alone (target <= 2)", 0, "%.2f"),
            ("CUPTI syncs / GPU alone", 1, "%.2f"),
            ("the run's default, of the untraced step (target <= 10%)", 2, "%.1f%%"),
            ("CUPTI syncs, of the untraced step", 3, "%.1f%%"),
            ("GPU alone, of the untraced step", 4, "%.1f%%")]
    print("\n| target (in-process; untraced = nothing recorded per call) | point [95% CI] |")
    print("|---|---:|")
    for name, i, f in rows:
        m = 100 if "%%" in f else 1
        print("| %s | %s [%s, %s] |" % (name, f % (point[i] * m), f % (lo[i] * m),
                                        f % (hi[i] * m)))


if __name__ == "__main__":
    main()
