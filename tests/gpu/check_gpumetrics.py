#!/usr/bin/env python3
"""Checks the GPU metric counters of a Chrome JSON trace of tests/gpumetrics_work.cu against
answers known from the workload (tests/gpu_metrics_test.sh):
  - tensor-core activity during the bf16 matmul far above the elementwise kernel's;
  - DRAM bandwidth during each device-to-device copy within 15% of the copy's own traffic:
    it reads and writes every byte once, so DRAM read + write = 2 * bytes / duration;
  - SM activity near zero in the idle gap between the matmul and the elementwise kernel.
Usage: check_gpumetrics.py TRACE.json. Prints what it measured; exit 1 on a failed check.
       check_gpumetrics.py --reset TRACE.json: the trace of `gpumetrics_work 64 reset` (the
       sampled context destroyed after the workload, then 2 more spin kernels): 5 spin kernels,
       and the last SM active point before the first kernel after the reset."""
import json
import sys


def load(path):
    with open(path) as f:
        d = json.load(f)
    return d["traceEvents"] if isinstance(d, dict) else d


def check_reset(ev):
    spins = sorted(e["ts"] for e in ev
                   if e.get("cat") == "kernel" and e["name"].startswith("spin_kernel"))
    sm = [e["ts"] for e in ev if e.get("ph") == "C" and e.get("name") == "SM active %"]
    ok = len(spins) == 5 and bool(sm) and max(sm) < spins[3]
    print("reset: %d spin kernels, %d SM active points, last at %.1f us, first kernel after the "
          "reset at %.1f us: %s" % (len(spins), len(sm), max(sm) if sm else -1,
                                    spins[3] if len(spins) > 3 else -1, "ok" if ok else "FAIL"))
    return 0 if ok else 1


def main():
    if sys.argv[1] == "--reset":
        return check_reset(load(sys.argv[2]))
    ev = load(sys.argv[1])
    slices = [e for e in ev if e.get("ph") == "X"]
    counters = {}
    for e in ev:
        if e.get("ph") == "C" and e.get("args"):
            v = list(e["args"].values())[0]
            if isinstance(v, (int, float)):
                counters.setdefault((e["pid"], e["name"]), []).append((float(e["ts"]), float(v)))
    for pts in counters.values():
        pts.sort()

    def track(name):
        for (pid, n), pts in counters.items():
            if n == name:
                return pts
        return None

    def avg(pts, a, b):
        """Time-weighted average of a step counter over [a, b) (us), where values cover it."""
        s = cov = 0.0
        for i in range(len(pts) - 1):
            t0, v = pts[i]
            t1 = pts[i + 1][0]
            lo, hi = max(a, t0), min(b, t1)
            if hi > lo:
                s += v * (hi - lo)
                cov += hi - lo
        return (s / cov if cov else float("nan")), cov

    fails = 0

    def check(ok, what):
        nonlocal fails
        print(("ok   " if ok else "FAIL ") + what)
        fails += 0 if ok else 1

    names = sorted({n for (_, n) in counters})
    print("GPU metric tracks:", ", ".join(names))
    sm, tensor = track("SM active %"), track("Tensor active %")
    rd, wr = track("DRAM read GB/s"), track("DRAM write GB/s")
    check(sm is not None and tensor is not None and rd is not None and wr is not None,
          "SM active, Tensor active, DRAM read and write tracks present")
    if fails:
        return 1
    mm = [e for e in slices if e.get("cat") == "kernel" and "mm_bf16" in e["name"]]
    sx = [e for e in slices if e.get("cat") == "kernel" and "saxpy" in e["name"]]
    cp = [e for e in slices if e.get("cat") == "memcpy" and "DtoD" in e["name"]]
    check(len(mm) > 0 and len(sx) > 0 and len(cp) > 0,
          "matmul %d, saxpy %d, DtoD copies %d" % (len(mm), len(sx), len(cp)))
    if fails:
        return 1
    t_mm, _ = avg(tensor, mm[0]["ts"], mm[-1]["ts"] + mm[-1]["dur"])
    t_sx, _ = avg(tensor, sx[0]["ts"], sx[-1]["ts"] + sx[-1]["dur"])
    check(t_mm > 10 * max(t_sx, 0.5) and t_mm > 5,
          "tensor active: matmul %.1f %% vs saxpy %.2f %%" % (t_mm, t_sx))
    for c in cp:
        a, b = c["ts"], c["ts"] + c["dur"]
        r, cov = avg(rd, a, b)
        w, _ = avg(wr, a, b)
        nbytes = float(c["args"]["bytes"])
        expect = 2 * nbytes / (c["dur"] * 1e3)  # bytes per ns = GB/s
        got = r + w
        check(cov >= 0.9 * c["dur"] and abs(got - expect) <= 0.15 * expect,
              "copy of %.0f MiB in %.3f ms: DRAM read %.0f + write %.0f = %.0f GB/s, "
              "expected 2*bytes/time = %.0f GB/s (samples cover %.0f%%)"
              % (nbytes / 2**20, c["dur"] / 1e3, r, w, got, expect, 100 * cov / c["dur"]))
    gap_a = mm[-1]["ts"] + mm[-1]["dur"]
    gap_b = sx[0]["ts"]
    # The middle of the gap: clear of the edges of both kernels' samples.
    a, b = gap_a + 0.2 * (gap_b - gap_a), gap_b - 0.2 * (gap_b - gap_a)
    s_gap, cov = avg(sm, a, b)
    check(gap_b - gap_a > 100e3 and cov > 0.5 * (b - a) and s_gap < 2.0,
          "idle gap of %.0f ms: SM active %.2f %%" % ((gap_b - gap_a) / 1e3, s_gap))
    s_mm, _ = avg(sm, mm[0]["ts"], mm[-1]["ts"] + mm[-1]["dur"])
    check(s_mm > 80, "SM active during the matmul: %.1f %%" % s_mm)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
