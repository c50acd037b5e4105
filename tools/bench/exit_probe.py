#!/usr/bin/env python3
"""Where the launch loop's exit goes: the program's own time, its exit handlers, the kernel.

    tools/bench/exit_probe.py BUILD_DIR [--reps 40] [--threads 4] [--launches 20000]
                              [--floor-off] [--seconds S]

Runs examples/multi_stream (under `stdbuf -oL`, as loop_bench.py --phases) untraced, under the
CUPTI floor, under cuptrace writing the default .pftrace and under cuptrace --capture, with
libexit_shim.so preloaded (tools/bench/exit_shim.c), and splits each process at three marks:
the program's last line (its launches before it), its last atexit handler (cuptrace's finish,
the CUDA runtime's teardown and the program's own handlers before it), and its last ELF
destructor; what follows that is the kernel's part of the exit (the GPU's context torn down as
its device files close). cuptrace runs with CUPTRACE_LOG=info, whose lines give its finish's
phases. --floor-off adds the floor doing at exit what cuptrace's finish does to CUPTI besides
flushing (every kind off, a second flush, unsubscribing). One round runs each variant once,
in an order rotated every round; each variant's phases are compared with the floor's of the
same round, with 95% bootstrap intervals over the rounds."""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

from torch_bench import boot  # the same bootstrap over rounds (no torch import)

MARK = "cuptrace-exit-shim "
PHASES = ("launches", "handlers", "kernel", "total")


def run_once(cmd, env):
    """One process: its phases in seconds, peak RSS in MiB and cuptrace's finish lines."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.readline()  # the program's last line: its launches are done
    t_line = time.monotonic()
    p.stdout.read()
    err = p.stderr.read().decode(errors="replace")  # a few lines: neither pipe fills
    _, status, ru = os.wait4(p.pid, 0)
    t_end = time.monotonic()
    if status:
        sys.exit(f"exit_probe: {cmd[2]} failed (status {status}):\n{err[-2000:]}")
    marks = {}
    for line in err.splitlines():
        if line.startswith(MARK):
            what, t = line[len(MARK):].split()
            marks[what] = float(t)
    if "atexit_last" not in marks or "dtor" not in marks:
        sys.exit("exit_probe: the shim's marks are missing (is libexit_shim.so built?)")
    finish = " ".join(l for l in err.splitlines() if l.startswith("cuptrace: finish"))
    return ({"launches": t_line - t0, "handlers": marks["atexit_last"] - t_line,
             "kernel": t_end - marks["dtor"], "total": t_end - t0},
            ru.ru_maxrss / 1024, [float(x) for x in re.findall(r"([\d.]+) ms", finish)])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--launches", type=int, default=20000)
    ap.add_argument("--floor-off", action="store_true",
                    help="also the floor turning CUPTI off at exit as cuptrace's finish does")
    ap.add_argument("--seconds", type=float, default=0,
                    help="start no round after this many seconds (0: run all --reps)")
    a = ap.parse_args()
    b = os.path.abspath(a.build)
    shim = os.path.join(b, "libexit_shim.so")
    if not os.path.exists(shim):
        sys.exit(f"exit_probe: {shim} not found: build the exit_shim target")
    tmp = tempfile.mkdtemp()
    cmd = ["stdbuf", "-oL", os.path.join(b, "examples", "multi_stream"), str(a.threads),
           str(a.launches)]
    floor = os.path.join(b, "libcupti_floor.so")
    lib = os.path.join(b, "libcuptrace.so")
    variants = {
        "untraced": {},
        "floor": {"CUDA_INJECTION64_PATH": floor},
        "cuptrace": {"CUDA_INJECTION64_PATH": lib, "CUPTRACE_SUMMARY": "0",
                     "CUPTRACE_LOG": "info", "CUPTRACE_OUTPUT": os.path.join(tmp, "t.pftrace")},
        "capture": {"CUDA_INJECTION64_PATH": lib, "CUPTRACE_SUMMARY": "0",
                    "CUPTRACE_OUTPUT": os.path.join(tmp, "t.cupti")},
    }
    if a.floor_off:
        variants["floor_off"] = {"CUDA_INJECTION64_PATH": floor, "CUPTRACE_FLOOR_EXIT_OFF": "1"}
    names = list(variants)
    rows = {v: [] for v in names}
    subprocess.run(cmd[2:], stdout=subprocess.DEVNULL, check=True)  # warm-up
    began = time.monotonic()
    for r in range(a.reps):
        if a.seconds and time.monotonic() - began > a.seconds:
            break
        for v in names[r % len(names):] + names[:r % len(names)]:
            env = dict(os.environ, **variants[v], LD_PRELOAD=shim)
            rows[v].append(run_once(cmd, env))
    n = len(rows["floor"])
    print(f"exit_probe: multi_stream {a.threads} threads x {a.launches} launches, {n} rounds; "
          "medians in ms")
    print(f"{'variant':10}" + "".join(f" {p:>9}" for p in PHASES) + f" {'peak MiB':>9}")
    for v in names:
        med = [statistics.median(x[0][p] for x in rows[v]) * 1e3 for p in PHASES]
        rss = statistics.median(x[1] for x in rows[v])
        print(f"{v:10}" + "".join(f" {m:9.2f}" for m in med) + f" {rss:9.1f}")
    fin = [x[2] for x in rows["cuptrace"] if len(x[2]) >= 7]
    if fin:
        names_f = ("CUPTI flush", "last buffers", "last records", "last chunks", "summary",
                   "freeing", "unsubscribing")
        print("cuptrace's finish (CUPTRACE_LOG=info), medians in ms: " + ", ".join(
            f"{nm} {statistics.median(f[i] for f in fin):.2f}" for i, nm in enumerate(names_f)))
    for v in names:
        if v == "floor":
            continue
        for p in PHASES:
            d = [(x[0][p] - y[0][p]) * 1e3 for x, y in zip(rows[v], rows["floor"])]
            lo, hi = boot(d, statistics.median)
            print(f"{v} - floor, {p}: {statistics.median(d):+.2f} ms [{lo:+.2f}, {hi:+.2f}]")


if __name__ == "__main__":
    main()
