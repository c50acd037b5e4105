#!/usr/bin/env python3
"""Memory benchmark: peak RSS of a launch loop traced by cuptrace, against the CUPTI floor (a
client that enables the same activity kinds and discards every buffer), at 0.5 M and 4 M
kernels. What cuptrace adds is its own memory: buffers queued for the writer, the converter's
tables, the stream reorder window, the output buffer.

    tools/bench/rss_bench.py BUILD_DIR [--reps 3] [--threads 4] [--kernels 500000,4000000]

Runs examples/multi_stream (tiny kernels, back to back) under each variant, interleaved, and
prints the median peak RSS (ru_maxrss of the child) of each, and the difference with its range
over the repetitions. Each run's wall time is printed too, so a run that swapped stands out."""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time


def vmrss(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return None


def run(cmd, env):
    """Peak RSS (MiB), wall time (s), and when the peak was seen (fraction of the run, from
    samples every 20 ms), and the last lines of stderr."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    samples = []
    while p.poll() is None:
        r = vmrss(p.pid)
        if r is not None:
            samples.append((time.monotonic() - t0, r))
        time.sleep(0.02)
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    if p.returncode != 0:
        sys.exit(f"rss_bench: {' '.join(cmd)} failed:\n{err}")
    wall = time.monotonic() - t0
    peak_at = max(samples, key=lambda x: x[1])[0] / wall if samples else float("nan")
    peak = max((x[1] for x in samples), default=0.0)
    return peak, wall, peak_at, err


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--kernels", default="500000,4000000")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    ex = os.path.join(build, "examples", "multi_stream")
    tmp = tempfile.mkdtemp()
    variants = {
        "floor": {"CUDA_INJECTION64_PATH": os.path.join(build, "libcupti_floor.so")},
        "cuptrace": {
            "CUDA_INJECTION64_PATH": os.path.join(build, "libcuptrace.so"),
            "CUPTRACE_OUTPUT": os.path.join(tmp, "t.pftrace"),
            "CUPTRACE_SUMMARY": "0",
            "CUPTRACE_LOG": "info",
        },
    }
    print(f"rss_bench: multi_stream, {a.threads} threads, median of {a.reps} interleaved runs")
    print("peak RSS from /proc samples every 20 ms; 'at' is when in the run the peak was seen")
    print(f"{'kernels':>10} {'floor MiB':>10} {'cuptrace MiB':>13} {'added MiB':>10} "
          f"{'added range':>14} {'floor s':>8} {'cuptrace s':>10} {'floor at':>9} {'ct at':>6}")
    for k in [int(x) for x in a.kernels.split(",")]:
        per = k // a.threads
        res = {v: [] for v in variants}
        for _ in range(a.reps):
            for v, extra in variants.items():
                env = dict(os.environ, **extra)
                res[v].append(run([ex, str(a.threads), str(per)], env))
        fl = [r[0] for r in res["floor"]]
        ct = [r[0] for r in res["cuptrace"]]
        added = sorted(c - f for c, f in zip(ct, fl))
        print(f"{per * a.threads:>10} {statistics.median(fl):>10.1f} {statistics.median(ct):>13.1f} "
              f"{statistics.median(ct) - statistics.median(fl):>10.1f} "
              f"{added[0]:>6.1f}..{added[-1]:<6.1f} "
              f"{statistics.median(r[1] for r in res['floor']):>8.2f} "
              f"{statistics.median(r[1] for r in res['cuptrace']):>10.2f} "
              f"{statistics.median(r[2] for r in res['floor']):>9.2f} "
              f"{statistics.median(r[2] for r in res['cuptrace']):>6.2f}")
        for line in res["cuptrace"][-1][3].splitlines():
            if "writer queue" in line or "reorder window" in line:
                print(f"{'':>10} {line}")
        size = os.path.getsize(os.path.join(tmp, "t.pftrace"))
        print(f"{'':>10} trace: {size} bytes, {size / (per * a.threads):.2f} bytes/kernel")


if __name__ == "__main__":
    main()
