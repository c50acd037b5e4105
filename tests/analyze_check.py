"""Independent figures for tests/analyze_test.sh: from a torch.profiler (Kineto) JSON, with the
json module only, the GPU work (kernels, copies, memsets: 'X' events of those categories) count
and its busy time in the steady state (the union of its intervals per GPU process, clipped to
the end of the first ProfilerStep#N to the end of the last, or to the one step, or the whole
trace without steps; summed), compared with `cuptrace analyze --json`. Exit 0 when equal, 1 with the difference, 77 when the trace holds old
Kineto categories this check leaves to the reader's own tests."""
import gzip, json, sys
from decimal import Decimal

WORK = {"kernel", "gpu_memcpy", "gpu_memset"}
OLD = {"Kernel", "Memcpy", "Memset"}

def load(p):
    raw = open(p, "rb").read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    d = json.loads(raw, parse_float=Decimal, parse_int=Decimal)
    return d["traceEvents"] if isinstance(d, dict) else d

def no_gpu(path):
    """--no-gpu TRACE: 0 if the trace holds no GPU work (what `analyze` then refuses)."""
    evs = load(path)
    n = sum(1 for e in evs if isinstance(e, dict) and e.get("ph") == "X" and
            e.get("cat") in WORK | OLD)
    print(f"{n} GPU work events")
    return 0 if n == 0 else 1

def main():
    if sys.argv[1] == "--no-gpu":
        return no_gpu(sys.argv[2])
    evs = load(sys.argv[1])
    got = json.load(open(sys.argv[2]))
    if any(e.get("cat") in OLD for e in evs if isinstance(e, dict)):
        print("old Kineto categories: left to the reader's tests")
        return 77
    def ranges(prefix):
        out = []
        for e in evs:
            if (isinstance(e, dict) and e.get("ph") == "X" and "ts" in e and
                    str(e.get("name", "")).startswith(prefix) and
                    e.get("cat") not in ("gpu_user_annotation", "python_function")):
                ts = Decimal(e["ts"]) * 1000
                end = ts + max(Decimal(e.get("dur", 0)) * 1000, Decimal(0))
                out.append((ts, end, e.get("pid"), e.get("tid")))
        return sorted(out)
    # Steps: ProfilerStep#N, else optimizer steps, each from the end of the previous one on its
    # thread to the end of its own.
    steps = [(a, b, p) for a, b, p, _ in ranges("ProfilerStep#")]
    if not steps:
        opt = ranges("Optimizer.step#")
        for k in {(p, t) for _, _, p, t in opt}:
            mine = [o for o in opt if (o[2], o[3]) == k]
            steps += [(mine[i - 1][1], mine[i][1], k[0]) for i in range(1, len(mine))]
        steps.sort()
    lo, hi = None, None
    if steps:
        if len({p for _, _, p in steps}) > 1:
            print("steps in several processes: left to the synthetic tests")
            return 77
        steps.sort()
        lo = steps[0][0] if len(steps) == 1 else steps[0][1]
        hi = steps[-1][1]
    per = {}
    for e in evs:
        if not isinstance(e, dict) or e.get("ph") != "X" or e.get("cat") not in WORK:
            continue
        if "ts" not in e:
            continue
        ts = Decimal(e["ts"]) * 1000
        dur = max(Decimal(e.get("dur", 0)) * 1000, Decimal(0))
        a, b = ts, ts + dur
        if lo is not None:
            if a >= hi or b <= lo:
                per.setdefault(e.get("pid"), [])
                continue
            a, b = max(a, lo), min(b, hi)
        per.setdefault(e.get("pid"), []).append((a, b))
    n = sum(1 for e in evs if isinstance(e, dict) and e.get("ph") == "X" and
            e.get("cat") in WORK and "ts" in e)
    busy = Decimal(0)
    for v in per.values():
        v.sort()
        end = None
        for a, b in v:
            if end is None or a > end:
                busy += b - a
                end = b
            elif b > end:
                busy += b - end
                end = b
    c = got["counts"]
    gn = c["kernels"] + c["copies"] + c["memsets"]
    gb = sum(g["busy_ns"] for g in got["gpus"])
    ok = gn == n and abs(Decimal(gb) - busy) <= max(Decimal(1), busy / 10000)
    print(f"work {gn} vs {n}, busy {gb} vs {busy}")
    return 0 if ok else 1

sys.exit(main())
