#!/usr/bin/env python3
"""The C launch loop against the CUPTI floor, with confidence intervals.

    tools/bench/loop_bench.py BUILD_DIR [--reps 20] [--threads 4] [--launches 20000]
                              [--extra none,l1,wait,wait_early,loaded]
                              [--alt NAME=LIBCUPTRACE ...] [--seconds S] [--raw FILE]
                              [--pool FILE ...]

Runs examples/multi_stream (each thread launching tiny kernels back to back on its own stream)
untraced, under the CUPTI floor (libcupti_floor.so: the same activity kinds, settings, buffer
size and flush period as cuptrace, every buffer thrown away), under cuptrace writing the
default .pftrace, and under cuptrace --capture. --extra adds: none and l1, the .pftrace
uncompressed or at level 1 (what the compression's CPU costs the loop); wait and wait_early,
an on-demand window that never opens, by default and with --cupti-early (against untraced);
loaded, the floor's library injected with no CUPTI call, and with only cuptiGetVersion.
--alt adds cuptrace's default .pftrace from another build's libcuptrace.so, to compare two
builds in the same rounds. One round runs each variant once, in an order rotated every round;
ratios are paired by round (shared machines drift), and their 95% confidence intervals
bootstrap the rounds. A ratio whose interval holds the target's value is a tie.
--seconds stops starting rounds after that many seconds (to fit a time limit); --raw appends
each round's times as one JSON line to FILE; --pool reads such files (same variants, same
threads and launches) and reports their rounds with this run's, so rounds taken in several
sessions on one machine kind make one interval."""
import json
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
    ap.add_argument("--extra", default="",
                    help="also: none, l1, wait, wait_early, loaded (comma-separated)")
    ap.add_argument("--alt", action="append", default=[],
                    help="NAME=path/to/libcuptrace.so: another build's recorder, as cuptrace")
    ap.add_argument("--seconds", type=float, default=0,
                    help="start no round after this many seconds (0: run all --reps)")
    ap.add_argument("--raw", help="append each round's times to this file (JSON lines)")
    ap.add_argument("--phases", action="store_true",
                    help="also split each variant's time at the program's last line (run under "
                    "stdbuf -oL): before it the launches, after it the exit's work")
    ap.add_argument("--pool", action="append", default=[],
                    help="a --raw file of earlier rounds to report with these")
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
    # wait, wait_early: an on-demand window that never opens, with CUPTI attached only when one
    # would (the default) or from the start (--cupti-early): what waiting costs, against untraced
    extra = {"none": {"CUPTRACE_COMPRESS": "none"}, "l1": {"CUPTRACE_COMPRESS_LEVEL": "1"},
             "wait": {"CUPTRACE_ON_DEMAND": "1", "CUPTRACE_CUPTI_EARLY": "0"},
             "wait_early": {"CUPTRACE_ON_DEMAND": "1", "CUPTRACE_CUPTI_EARLY": "1"},
             # the floor's library injected with no CUPTI call: what waiting costs at best
             "loaded": {}}
    for e in filter(None, a.extra.split(",")):
        if e not in extra:
            sys.exit(f"loop_bench: unknown extra variant {e} ({', '.join(extra)})")
        if e == "loaded":
            variants["floor_loaded"] = dict(variants["floor"], CUPTRACE_FLOOR_NOTHING="1")
            variants["floor_version"] = dict(variants["floor"], CUPTRACE_FLOOR_NOTHING="version")
            continue
        variants["cuptrace_" + e] = dict(variants["cuptrace"], **extra[e],
                                         CUPTRACE_OUTPUT=os.path.join(tmp, e + ".pftrace"))
    for alt in a.alt:
        name, sep, path = alt.partition("=")
        if not sep or not os.path.isfile(path):
            sys.exit(f"loop_bench: --alt wants NAME=path/to/libcuptrace.so, got {alt}")
        variants["cuptrace_" + name] = dict(variants["cuptrace"],
                                            CUDA_INJECTION64_PATH=os.path.abspath(path),
                                            CUPTRACE_OUTPUT=os.path.join(tmp, name + ".pftrace"))
    names = list(variants)
    times = {v: [] for v in names}
    tails = {v: [] for v in names}  # --phases: seconds from the program's last line to its end
    # earlier rounds (--pool): only those that ran the same loop and every variant of this run
    pooled = 0
    for path in a.pool:
        with open(path) as f:
            for line in f:
                row = json.loads(line)
                if (row.get("threads"), row.get("launches")) != (a.threads, a.launches) or \
                        any(v not in row["times"] for v in names):
                    sys.exit(f"loop_bench: {path}: a round of another loop or other variants")
                for v in names:
                    times[v].append(row["times"][v])
                pooled += 1
    subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)  # warm-up
    began = time.monotonic()
    rounds = 0
    for r in range(a.reps):
        if a.seconds and time.monotonic() - began > a.seconds:
            break
        row = {}
        for v in names[r % len(names):] + names[:r % len(names)]:
            t0 = time.monotonic()
            if a.phases:
                # the line comes when main has done its work, before exit handlers (cuptrace's
                # finish among them) run
                p = subprocess.Popen(["stdbuf", "-oL"] + cmd, env=dict(os.environ, **variants[v]),
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                p.stdout.readline()
                t_line = time.monotonic()
                err = p.communicate()[1]  # both pipes read to the end: neither can fill
                tails[v].append(time.monotonic() - t_line)
            else:
                p = subprocess.run(cmd, env=dict(os.environ, **variants[v]),
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                err = p.stderr
            if p.returncode:
                sys.exit(f"loop_bench: {v} failed:\n{err.decode(errors='replace')}")
            row[v] = time.monotonic() - t0
        for v in names:
            times[v].append(row[v])
        rounds += 1
        if a.raw:  # one line a round, written as it ends, so a run cut short keeps its rounds
            with open(a.raw, "a") as f:
                f.write(json.dumps({"threads": a.threads, "launches": a.launches,
                                    "times": row}) + "\n")
    k = a.threads * a.launches
    print(f"loop_bench: multi_stream {a.threads} threads x {a.launches} launches = {k} kernels, "
          f"{rounds} rounds" + (f" and {pooled} pooled" if pooled else ""))
    print(f"{'variant':14} {'median ms':>10} {'us/launch':>10}" +
          (f" {'exit ms':>8}" if a.phases else ""))
    for v in names:
        m = statistics.median(times[v])
        print(f"{v:14} {m * 1e3:10.1f} {m * 1e6 / a.launches:10.3f}" +
              (f" {statistics.median(tails[v]) * 1e3:8.1f}" if a.phases else ""))
    pairs = [("cuptrace", "floor"), ("capture", "floor"), ("floor", "untraced"),
             ("cuptrace", "untraced")]
    pairs += [(v, "untraced" if v.startswith("cuptrace_wait") else "floor")
              for v in names if v.startswith("cuptrace_")]
    pairs += [(v, "untraced") for v in ("floor_loaded", "floor_version") if v in names]
    pairs += [("cuptrace", "cuptrace_" + alt.partition("=")[0]) for alt in a.alt]
    for num, den in pairs:
        ratios = [x / y for x, y in zip(times[num], times[den])]
        lo, hi = boot(ratios, statistics.median)
        print(f"{num}/{den}: {statistics.median(ratios):.3f} [{lo:.3f}, {hi:.3f}]")
        if a.phases:  # this run's rounds (pooled ones have no split): launches, then exit
            run = [(x - tx, y - ty, tx - ty) for x, tx, y, ty in
                   zip(times[num][pooled:], tails[num], times[den][pooled:], tails[den])]
            ratios = [x / y for x, y, _ in run]
            lo, hi = boot(ratios, statistics.median)
            d = [e * 1e3 for _, _, e in run]
            dlo, dhi = boot(d, statistics.median)
            print(f"  before the last line {statistics.median(ratios):.3f} [{lo:.3f}, {hi:.3f}]; "
                  f"exit {statistics.median(d):+.1f} ms [{dlo:+.1f}, {dhi:+.1f}]")
    for v in names:
        if v == "cuptrace" or v.startswith("cuptrace_"):
            out = variants[v]["CUPTRACE_OUTPUT"]
            if not os.path.exists(out):
                continue  # a window that never opened writes nothing
            size = os.path.getsize(out)
            print(f"trace {v}: {size} bytes, {size / k:.2f} bytes per kernel")


if __name__ == "__main__":
    main()
