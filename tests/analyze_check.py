"""Independent figures for tests/analyze_test.sh: from a torch.profiler (Kineto) JSON, with the
json module only, the GPU work (kernels, copies, memsets: 'X' events of those categories) count
and its busy time (the union of its intervals per GPU process, summed), compared with
`cuptrace analyze --json`. Exit 0 when equal, 1 with the difference, 77 when the trace holds old
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

def main():
    evs = load(sys.argv[1])
    got = json.load(open(sys.argv[2]))
    if any(e.get("cat") in OLD for e in evs if isinstance(e, dict)):
        print("old Kineto categories: left to the reader's tests")
        return 77
    per = {}
    for e in evs:
        if not isinstance(e, dict) or e.get("ph") != "X" or e.get("cat") not in WORK:
            continue
        if "ts" not in e:
            continue
        ts = Decimal(e["ts"]) * 1000
        dur = max(Decimal(e.get("dur", 0)) * 1000, Decimal(0))
        per.setdefault(e.get("pid"), []).append((ts, ts + dur))
    n = sum(len(v) for v in per.values())
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
