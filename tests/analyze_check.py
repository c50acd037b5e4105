"""Independent figures for tests/analyze_test.sh: from a torch.profiler (Kineto) JSON, with the
json module only, the GPU work (kernels, copies, memsets: 'X' events of those categories) count
and its busy time in the steady state (the union of its intervals per GPU process, clipped to
the end of the first step to the end of the last, step periods as README defines them from
ProfilerStep#N or Optimizer.step# ranges; or from the end of start-up without steps; summed),
compared with `cuptrace analyze --json`. Where analyze found the steps in the GPU work itself,
its window is taken as given. Exit 0 when equal, 1 with the difference, 77 when the trace holds
old Kineto categories or steps this check leaves to the synthetic tests."""
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
    # GPU work with the start of its launch call (the runtime event of the same correlation id).
    launch = {}
    for e in evs:
        if (isinstance(e, dict) and e.get("ph") == "X" and "ts" in e and
                e.get("cat") in ("cuda_runtime", "cuda_driver") and
                isinstance(e.get("args"), dict) and "correlation" in e["args"]):
            launch[e["args"]["correlation"]] = Decimal(e["ts"]) * 1000
    work = []
    for e in evs:
        if (isinstance(e, dict) and e.get("ph") == "X" and e.get("cat") in WORK and
                "ts" in e):
            ts = Decimal(e["ts"]) * 1000
            end = ts + max(Decimal(e.get("dur", 0)) * 1000, Decimal(0))
            c = e.get("args", {}).get("correlation") if isinstance(e.get("args"), dict) else None
            work.append((ts, end, launch.get(c), e.get("pid")))
    # Steps (README, Steps): ProfilerStep#N ranges, else optimizer steps ("Optimizer.step#"),
    # the outermost per thread. A step's host part runs from where the previous one's range
    # ended (or its own began, if earlier) to its range's end; it completes at the later of its
    # range's end and the end of the GPU work launched in its host part, never before the
    # previous one; its period runs from the previous completion (its own start for the first).
    marks = ranges("ProfilerStep#") or ranges("Optimizer.step#")
    kind = got["steps"].get("kind")
    if not marks and kind not in (None, "gpu_period"):
        print("steps from", kind, ": left to the synthetic tests")
        return 77
    steps = []
    for k in sorted({(p, t) for _, _, p, t in marks}, key=str):
        mine, outer = [m for m in marks if (m[2], m[3]) == k], []
        for m in mine:
            if not outer or m[0] >= outer[-1][1]:
                outer.append(m)
        h, done = outer[0][0], None
        for i, (ts, end, p, _) in enumerate(outer):
            last = i + 1 == len(outer)
            hend = end if last else max(min(end, outer[i + 1][0]), h)
            c = max([end] + [we for _, we, lt, _ in work if lt is not None and h <= lt and
                             (lt <= hend if last else lt < hend)])
            c = c if done is None else max(c, done)
            steps.append((outer[0][0] if done is None else done, c, p))
            h, done = hend, c
    lo, hi = None, None
    if steps:
        if len({p for _, _, p in steps}) > 1:
            print("steps in several processes: left to the synthetic tests")
            return 77
        steps.sort()
        lo = steps[0][0] if len(steps) == 1 else steps[0][1]
        hi = steps[-1][1]
    elif kind == "gpu_period":
        # Iterations found in the GPU work: the window is analyze's (an input here); the
        # busy time inside it is still computed independently.
        # analyze's times count from the trace's first event.
        ss = got["steady_state"]
        t0 = min(Decimal(e["ts"]) * 1000 for e in evs
                 if isinstance(e, dict) and e.get("ph") == "X" and "ts" in e)
        t0 -= Decimal(got["span"]["start_ns"])
        lo, hi = t0 + Decimal(ss["start_ns"]), t0 + Decimal(ss["end_ns"])
    else:
        # No steps: the start-up ends after the last long one-off GPU idle (at least 5% of the
        # process's GPU span, starting in its first half, longer than twice every later gap).
        iv = sorted((a, b) for a, b, _, _ in work)
        merged = []
        for a, b in iv:
            if merged and a <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        if len({p for _, _, _, p in work}) == 1 and len(merged) > 1:
            span, later = merged[-1][1] - merged[0][0], Decimal(0)
            for i in range(len(merged) - 1, 0, -1):
                g0, g = merged[i - 1][1], merged[i][0] - merged[i - 1][1]
                if g * 20 >= span and g > 2 * later and g0 - merged[0][0] < span / 2:
                    lo, hi = merged[i][0], Decimal("Infinity")
                    break
                later = max(later, g)
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
