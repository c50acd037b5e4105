#!/usr/bin/env python3
"""What watching costs (issue 48, item 5): a program untraced, under `cuptrace record`, and under
`cuptrace top` (which runs `record --capture --flush-ms 200` and reads the capture as it grows:
its aggregation must not slow the program more than recording does).

    tools/bench/top_bench.py BUILD [--rounds 8] [--workloads storm,add,transformer]
                             [--storm-seconds 5] [--steps 300] [--raw FILE]

Workloads: storm is examples/launch_storm (4 threads launching tiny kernels back to back for
--storm-seconds; the measure is the program's own count of kernels launched, as time per
launch); add and transformer are tools/bench/torch_workload.py (time per step, timed inside the
process after warm-up). Each round runs every variant once, in an order that rotates round by
round (untraced, record, top; then record, top, untraced; ...), so a drift of the machine
favours none. Prints per workload the median per variant and the ratios record/untraced,
top/untraced and top/record, each with a 95% bootstrap interval (rounds resampled; the ratio
taken within each round). A ratio whose interval holds 1 is a tie.

top runs with --json (stdout to a file, as a script would); its own CPU is the cost of the
watcher, which runs beside the program, not in it: what reaches the program is the capture's
writer and the 200 ms flushes. Needs a GPU; torch for add and transformer.
"""
import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from torch_bench import boot, tie_or  # the same bootstrap and verdicts

HERE = os.path.dirname(os.path.abspath(__file__))
VARIANTS = ["untraced", "record", "top"]


def command(build, workload, a, tmp):
    """The program's argv and how to read its measure (seconds per unit) from a run."""
    if workload == "storm":
        count = os.path.join(tmp, "count")
        argv = [os.path.join(build, "examples", "launch_storm"), "4", str(a.storm_seconds), count]

        def measure(_out):
            with open(count) as f:
                return float(a.storm_seconds) / int(f.read().split()[0])
        return argv, measure
    argv = [sys.executable, os.path.join(HERE, "torch_workload.py"), "--workload", workload,
            "--steps", str(a.steps)]

    def measure(out):
        for line in reversed(out.splitlines()):
            if line.startswith("{"):
                return json.loads(line)["step_s"]
        raise RuntimeError("no JSON line from torch_workload.py")
    return argv, measure


def run_one(build, variant, workload, a):
    """One process of the program under variant: its measure (seconds per launch or step)."""
    tmp = tempfile.mkdtemp(prefix="topbench.")
    try:
        argv, measure = command(build, workload, a, tmp)
        ct = os.path.join(build, "cuptrace")
        env = dict(os.environ, TMPDIR=tmp)
        if variant == "record":
            argv = [ct, "record"] + a.check + ["-o", os.path.join(tmp, "t.pftrace"), "--"] + argv
        elif variant == "top":
            argv = [ct, "top"] + a.check + ["--json", "--"] + argv
        p = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=1800)
        if p.returncode:
            raise RuntimeError(f"{variant} {workload}: exit {p.returncode}: {p.stderr[-2000:]}")
        out = p.stdout
        if variant == "top":  # the program's output is in the run's log
            logs = glob.glob(os.path.join(tmp, "cuptrace-top-*", "output.log"))
            out = open(logs[0]).read() if logs else ""
        return measure(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def ratio(rounds, num, den):
    def stat(rs):
        v = [r[num] / r[den] for r in rs]
        return statistics.median(v)
    est = stat(rounds)
    lo, hi = boot(rounds, stat)
    return est, lo, hi


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--workloads", default="storm,add,transformer")
    ap.add_argument("--storm-seconds", type=float, default=5)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--raw", help="write every round's measures here (JSON)")
    ap.add_argument("--no-check", action="store_true",
                    help="pass --no-check (a dry run of the script with stand-in programs)")
    a = ap.parse_args()
    a.check = ["--no-check"] if a.no_check else []
    build = os.path.abspath(a.build)
    raw = {}
    for w in a.workloads.split(","):
        rounds = []
        for r in range(a.rounds):
            order = VARIANTS[r % 3:] + VARIANTS[:r % 3]
            got = {v: run_one(build, v, w, a) for v in order}
            rounds.append(got)
            print(f"{w} round {r + 1}: " + "  ".join(f"{v} {got[v] * 1e6:.3f} us" for v in VARIANTS),
                  file=sys.stderr, flush=True)
        raw[w] = rounds
        unit = "launch" if w == "storm" else "step"
        print(f"{w}: {a.rounds} rounds, median us per {unit}: " +
              "  ".join(f"{v} {statistics.median(r[v] for r in rounds) * 1e6:.3f}"
                        for v in VARIANTS))
        for num, den in (("record", "untraced"), ("top", "untraced"), ("top", "record")):
            est, lo, hi = ratio(rounds, num, den)
            print(f"  {num}/{den}: {est:.3f} [{lo:.3f}, {hi:.3f}] ({tie_or(lo, hi)})")
    if a.raw:
        with open(a.raw, "w") as f:
            json.dump(raw, f)


if __name__ == "__main__":
    main()
