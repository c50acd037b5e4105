#!/usr/bin/env python3
"""The C launch loop against the CUPTI floor, with confidence intervals.

    tools/bench/loop_bench.py BUILD_DIR [--reps 20] [--threads 4] [--launches 20000]
                              [--extra none,l1]

Runs examples/multi_stream (each thread launching tiny kernels back to back on its own stream)
untraced, under the CUPTI floor (libcupti_floor.so: the same activity kinds, settings, buffer
size and flush period as cuptrace, every buffer thrown away), under cuptrace writing the default
.pftrace, and under cuptrace --capture (--extra: also the .pftrace uncompressed, or compressed
at level 1, to see what the compression's CPU costs the loop). One round runs each variant once, in an order rotated
every round; ratios are paired by round (shared machines drift), and their 95% confidence
intervals bootstrap the rounds. A ratio whose interval holds the target's value is a tie."""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

from torch_bench import boot  # the same bootstrap over rounds (no torch import)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--launches", type=int, default=20000)
    # where the writer's share goes: the default .pftrace uncompressed (none), or at level 1
    ap.add_argument("--extra", default="", help="also: none, l1 (comma-separated)")
    a = ap.parse_args()
    b = os.path.abspath(a.build)
    tmp = tempfile.mkdtemp()
    cmd = [os.path.join(b, "examples", "multi_stream"), str(a.threads), str(a.launches)]
    lib = os.path.join(b, "libcuptrace.so")
    variants = {
        "untraced": {},
        "floor": {"CUDA_INJECTION64_PATH": os.path.join(b, "libcupti_floor.so")},
        "cuptrace": {"CUDA_INJECTION64_PATH": lib, "CUPTRACE_SUMMARY": "0",
                     "CUPTRACE_OUTPUT": os.path.join(tmp, "t.pftrace")},
        "capture": {"CUDA_INJECTION64_PATH": lib, "CUPTRACE_SUMMARY": "0",
                    "CUPTRACE_OUTPUT": os.path.join(tmp, "t.cupti")},
    }
    extra = {"none": {"CUPTRACE_COMPRESS": "none"}, "l1": {"CUPTRACE_COMPRESS_LEVEL": "1"}}
    for e in filter(None, a.extra.split(",")):
        if e not in extra:
            sys.exit(f"loop_bench: unknown extra variant {e} (none, l1)")
        variants["cuptrace_" + e] = dict(variants["cuptrace"], **extra[e],
                                         CUPTRACE_OUTPUT=os.path.join(tmp, e + ".pftrace"))
    names = list(variants)
    times = {v: [] for v in names}
    subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)  # warm-up
    for r in range(a.reps):
        for v in names[r % len(names):] + names[:r % len(names)]:
            t0 = time.monotonic()
            p = subprocess.run(cmd, env=dict(os.environ, **variants[v]), stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
            if p.returncode:
                sys.exit(f"loop_bench: {v} failed:\n{p.stderr.decode(errors='replace')}")
            times[v].append(time.monotonic() - t0)
    k = a.threads * a.launches
    print(f"loop_bench: multi_stream {a.threads} threads x {a.launches} launches = {k} kernels, "
          f"{a.reps} rounds")
    print(f"{'variant':14} {'median ms':>10} {'us/launch':>10}")
    for v in names:
        m = statistics.median(times[v])
        print(f"{v:14} {m * 1e3:10.1f} {m * 1e6 / a.launches:10.3f}")
    pairs = [("cuptrace", "floor"), ("capture", "floor"), ("floor", "untraced"),
             ("cuptrace", "untraced")] + [(v, "floor") for v in names if v.startswith("cuptrace_")]
    for num, den in pairs:
        ratios = [x / y for x, y in zip(times[num], times[den])]
        lo, hi = boot(ratios, statistics.median)
        print(f"{num}/{den}: {statistics.median(ratios):.3f} [{lo:.3f}, {hi:.3f}]")
    size = os.path.getsize(os.path.join(tmp, "t.pftrace"))
    print(f"trace: {size} bytes, {size / k:.2f} bytes per kernel")


if __name__ == "__main__":
    main()
