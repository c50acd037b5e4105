#!/usr/bin/env python3
"""Host stack samples through the converter, without a GPU (issue 46): adds to a capture recorded
on a GPU what the sampler queues (STACK records and a SAMPLES record, written here from the
layout in src/convert/stackrec.h, not by cuptrace's code), converts it, and reads the Perfetto
trace back on its own: every sample a PerfSample on its thread with its time, its callstack
interned with the planted frames (function, file, line), a sample naming no stack dropped.

  sample_capture.py make IN.cupti OUT.cupti [PLAN] writes the capture with samples (PLAN: a
                                                   JSON list of [ns after the start, tid,
                                                   stack 1 or 2] instead of the default)
  sample_capture.py check OUT.cupti TRACE.pftrace checks the trace"""
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from capture_edit import items, item  # noqa: E402
from pf_samples import samples  # noqa: E402

RECORDS, END, META = 4, 6, 1
REC_STACK, REC_SAMPLES = 0x43540001, 0x43540003
BASE = 1 << 40
PY = 1
# Two stacks, outermost first: (function, file, line).
STACKS = {
    BASE + 1: [("<module>", "/w/train.py", 40), ("train", "/w/train.py", 31),
               ("load_batch", "/w/train.py", 13)],
    BASE + 2: [("<module>", "/w/train.py", 40), ("train", "/w/train.py", 33),
               ("preprocess", "/w/data.py", 7)],
}
N_LOAD, N_PREP, STEP_NS = 70, 30, 1_000_000


def stack_record(sid, frames):
    body = struct.pack("<QII", sid, len(frames), 0)
    for fn, path, line in frames:
        body += struct.pack("<IIQ", PY, line, 0)
    for fn, path, line in frames:
        body += fn.encode() + b"\0" + path.encode() + b"\0" + b"\0" + b"\0"
    size = 8 + len(body)
    size += -size % 8
    rec = struct.pack("<II", REC_STACK, size) + body
    return rec + b"\0" * (size - len(rec))


def meta(data):
    m = {}
    for typ, _, p in items(data):
        if typ == META:
            k, v = p.split(b"\0")[:2]
            m[k.decode()] = v.decode()
    return m


def plan(data):
    """The samples: (boottime ns, tid, stack id); the last names a stack that does not exist."""
    m = meta(data)
    t0 = int(m["start_boottime_ns"]) + 5_000_000
    tid = int(m["pid"])
    out = []
    for i in range(N_LOAD + N_PREP):
        out.append((t0 + i * STEP_NS, tid, BASE + 1 if i % 10 < 7 else BASE + 2))
    out.append((t0 + 200 * STEP_NS, tid, BASE + 99))
    return out


def make(src, dst, plan_file=None):
    data = open(src, "rb").read()
    recs = [stack_record(sid, fr) for sid, fr in STACKS.items()]
    if plan_file:
        t0 = int(meta(data)["start_boottime_ns"])
        sm = [(t0 + int(t), int(tid), BASE + int(k)) for t, tid, k in json.load(open(plan_file))]
    else:
        sm = plan(data)
    body = b"".join(struct.pack("<QIIQ", ts, tid, 0, sid) for ts, tid, sid in sm)
    recs.append(struct.pack("<II", REC_SAMPLES, len(sm)) + body)
    payload = struct.pack("<II", len(recs), 0)
    for r in recs:
        payload += struct.pack("<II", struct.unpack_from("<I", r)[0], len(r)) + r
    out = data[:16]
    for typ, flags, p in items(data):
        if typ == END:
            out += item(RECORDS, payload)
        out += item(typ, p)
    open(dst, "wb").write(out)


def check(cap, trace):
    data = open(cap, "rb").read()
    m = meta(data)
    want = plan(data)[:-1]
    got = samples(trace)
    fails = []
    if len(got) != len(want):
        fails.append(f"{len(got)} PerfSamples, {len(want)} expected")
    boot0 = int(m["start_boottime_ns"])
    for (ts, tid, sid), (t, pid, gtid, fr) in zip(want, got):
        # The trace's clock is BOOTTIME: a sample's time is where it was taken.
        if t != ts or gtid != tid or pid != int(m["pid"]) or fr != [tuple(x) for x in STACKS[sid]]:
            fails.append(f"sample at {ts - boot0} ns, tid {tid}, stack {sid - BASE}: "
                         f"got time {t - boot0}, pid {pid}, tid {gtid}, frames {fr}")
            break
    load = sum(1 for g in got if g[3] and g[3][-1][0] == "load_batch")
    print(f"{len(got)} samples, {load} in load_batch")
    if fails:
        print("FAIL: " + "; ".join(fails))
        sys.exit(1)


if __name__ == "__main__":
    {"make": make, "check": check}[sys.argv[1]](*sys.argv[2:])
