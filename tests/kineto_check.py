#!/usr/bin/env python3
"""An independent reading of a torch.profiler (Kineto) / Chrome JSON trace with the json module:
kernel count, GPU busy time (union of kernels, copies and memsets per device, summed), flow
arrows as Perfetto's flow tracker draws them (v1 s/t/f keyed by id, cat and name, an 'f' not
closing its flow; v2 bind_id/flow_in/flow_out), the rank and host. Prints one JSON object.
Used by tests/external_traces_test.sh to check `cuptrace stats --json`."""
import bisect, gzip, json, sys
from decimal import Decimal

WORK = {"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset", "mtia_ccp_events"}


def load(path):
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rt", encoding="utf-8") as f:
        return json.load(f, parse_float=Decimal)


def ns(v):  # microseconds as written -> integer ns (truncated, as the reader scales)
    return int(Decimal(v) * 1000) if not isinstance(v, str) else int(Decimal(v) * 1000)


def tid_of(v):
    return int(v) if isinstance(v, str) and v.isdigit() and (v == "0" or v[0] != "0") else v


def union(iv):
    tot, cur_s, cur_e = 0, None, None
    for s, e in sorted(iv):
        if cur_e is not None and s <= cur_e:
            cur_e = max(cur_e, e)
            continue
        if cur_e is not None:
            tot += cur_e - cur_s
        cur_s, cur_e = s, e
    return tot + (cur_e - cur_s if cur_e is not None else 0)


def main(path):
    d = load(path)
    evs = d["traceEvents"] if isinstance(d, dict) else d
    evs = [e for e in evs if isinstance(e, dict)]
    kernels, work = 0, {}
    slices = {}  # (pid, tid) -> [(start, -dur, idx, end)]
    opened = {}
    for i, e in enumerate(evs):
        ph, cat = e.get("ph"), e.get("cat")
        if ph not in ("X", "B", "E") or "ts" not in e:
            continue
        key = (tid_of(e.get("pid")), tid_of(e.get("tid")))
        if ph == "B":
            opened.setdefault(key, []).append([ns(e["ts"]), i])
            continue
        if ph == "E":
            if opened.get(key):
                s, j = opened[key].pop()
                slices.setdefault(key, []).append((s, -(ns(e["ts"]) - s), j, ns(e["ts"])))
            continue
        s, dur = ns(e["ts"]), max(ns(e.get("dur", 0)), 0)
        slices.setdefault(key, []).append((s, -dur, i, s + dur))
        if cat in ("kernel", "Kernel"):
            kernels += 1
        if isinstance(cat, str) and cat.lower() in WORK:
            dev = e.get("args", {}).get("device", e.get("pid"))
            work.setdefault(str(dev), []).append((s, s + dur))
    for v in opened.values():
        for s, j in v:
            slices.setdefault(key, []).append((s, 0, j, s))
    for v in slices.values():
        v.sort()
    starts = {k: [x[0] for x in v] for k, v in slices.items()}

    def enclosing(key, ts):
        v = slices.get(key, [])
        k = bisect.bisect_right(starts.get(key, []), ts)
        best = None
        for x in reversed(v[max(0, k - 4096):k]):
            if x[0] <= ts <= x[3]:
                if best is None or x[0] > best[0] or (x[0] == best[0] and -x[1] < -best[1]):
                    best = x
        return best[2] if best else None

    def next_slice(key, ts):
        v = slices.get(key, [])
        k = bisect.bisect_left(starts.get(key, []), ts)
        return v[k][2] if k < len(v) else None

    flows = {}  # key -> [(ts, order, ph, slice)]
    for i, e in enumerate(evs):
        ph = e.get("ph")
        key = (tid_of(e.get("pid")), tid_of(e.get("tid")))
        if ph in ("s", "t", "f") and "id" in e and "ts" in e:
            ts = ns(e["ts"])
            bp = ph != "f" or e.get("bp") == "e"
            sl = enclosing(key, ts) if bp else next_slice(key, ts)
            fk = ("v1", str(e["id"]), e.get("cat"), e.get("name"))
            flows.setdefault(fk, []).append((ts, i, ph, sl))
        elif ph in ("X", "B") and "bind_id" in e and "ts" in e:
            fi, fo = bool(e.get("flow_in")), bool(e.get("flow_out"))
            p = "t" if fi and fo else "s" if fo else "f" if fi else None
            if p:
                flows.setdefault(("v2", str(e["bind_id"])), []).append((ns(e["ts"]), i, p, i))
    arrows = 0
    for v in flows.values():
        src = None
        for ts, _, ph, sl in sorted(v):
            if ph == "s":
                src = sl if src is None else src
                continue
            if src is not None and sl is not None and sl != src:
                arrows += 1
                if ph == "t":
                    src = sl
    di = d.get("distributedInfo", {}) if isinstance(d, dict) else {}
    print(json.dumps({
        "kernels": kernels,
        "busy_ns": sum(union(v) for v in work.values()),
        "devices": len(work),
        "flows": arrows,
        "rank": di.get("rank"),
        "host": d.get("host_name") if isinstance(d, dict) else None,
    }))


if __name__ == "__main__":
    main(sys.argv[1])
