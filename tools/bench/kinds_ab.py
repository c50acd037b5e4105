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


def run(a, specs):
    env = dict(os.environ, CUDA_INJECTION64_PATH=os.path.join(a.build, "libcupti_floor.so"),
               NCCL_NVLS_ENABLE="0")
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
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
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
    a = ap.parse_args()
    specs = a.specs.split(";") if a.specs else [s for s, _ in SPECS]
    names = dict(SPECS)
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
    if HOST_KINDS in pooled:
        host = statistics.median(b - o for b, o in pooled[HOST_KINDS])
    unit = "launch" if a.workload == "launch" else "step"
    print("kinds_ab: %s, %d processes x %d pairs per spec; default floor %.2f us per %s" % (
        a.workload, a.procs, a.pairs, base * 1e6, unit))
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


if __name__ == "__main__":
    main()
