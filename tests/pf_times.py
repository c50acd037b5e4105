#!/usr/bin/env python3
"""Reads a Perfetto trace (.pftrace, gzipped or not, compressed_packets inflated) on its own,
with none of cuptrace's code, and says per process group how many slices it holds, and how many
TrackEvents Perfetto's trace processor would drop for a negative time.

The time is worked out as trace_processor does it (shared/reference/perfetto-format.md, section
8, and its track_event_tokenizer.cc): a packet's timestamp is on its timestamp_clock_id, else its
sequence's default clock, else the trace's default clock (the first snapshot's
primary_trace_clock, or BOOTTIME where that snapshot has it), else no clock at all (the value as
it is); it is converted to the trace clock through the snapshots, the uint64 read as int64; a
sequence clock (64..127) counts from its latest snapshot on that sequence, and an incremental
one adds each packet's delta to the previous value. A TrackEvent whose time is then negative is
dropped (track_event_invalid_timestamp): counted under "negative", not as a slice.

A slice is a TYPE_SLICE_BEGIN. Its group is the label of its track's root: the root track's name
(or its process's name) up to the first ": ", which is how `cuptrace merge` names each input's
process and its top-level tracks ("LABEL: name"); a thread track without a parent belongs to the
process of its pid.

  pf_times.py TRACE...      prints one JSON object per trace:
    {"slices": {LABEL: N}, "total_slices": N, "counter_values": N, "negative": N,
     "boottime": BOOTTIME of the first snapshot or null, "first_slice": {LABEL: trace time of
     its earliest slice}}"""
import gzip
import json
import os
import sys
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from trace_bytes import varint  # noqa: E402  (the tests' one varint reader)

BOOTTIME = 6
MASK = (1 << 64) - 1


def fields(b):
    """(field number, wire type, value) of one message: ints for varint and fixed, bytes for LEN."""
    i, n = 0, len(b)
    while i < n:
        key, i = varint(b, i)
        f, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(b, i)
        elif wt == 1:
            v, i = int.from_bytes(b[i:i + 8], "little"), i + 8
        elif wt == 5:
            v, i = int.from_bytes(b[i:i + 4], "little"), i + 4
        elif wt == 2:
            ln, i = varint(b, i)
            v, i = b[i:i + ln], i + ln
        else:
            raise ValueError(f"wire type {wt}: not a Perfetto trace")
        yield f, wt, v


def packets(b):
    """Each TracePacket as {field: [values]}, compressed_packets (50) expanded in place."""
    for f, _, v in fields(b):
        if f != 1:
            continue
        p = {}
        for g, _, x in fields(v):
            p.setdefault(g, []).append(x)
        if 50 in p:
            yield from packets(zlib.decompress(p[50][0]))
        else:
            yield p


def message(b):
    m = {}
    for f, _, v in fields(b):
        m.setdefault(f, []).append(v)
    return m


def signed(v):
    v &= MASK
    return v - (1 << 64) if v >> 63 else v


def read(path, samples=None):
    """samples: a list that gets (trace time, sequence, PerfSample as {field: [values]}) of each
    PerfSample packet (TracePacket field 66)."""
    data = open(path, "rb").read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    snap = None          # the first snapshot of builtin clocks: {clock: value}
    primary = None
    seq_default = {}     # sequence -> (clock id, track uuid)
    seq_clocks = {}      # (sequence, clock) -> [(value ns, {builtin: value}), ...], last, incr, mult
    tracks = {}          # uuid -> {"parent", "name", "pid", "thread"}
    out = {"slices": {}, "total_slices": 0, "counter_values": 0, "negative": 0, "boottime": None}
    events = []          # (sequence, track uuid, type, trace time)

    def trace_clock():
        if primary:
            return primary
        return BOOTTIME

    def from_builtin(clock, v):
        tc = trace_clock()
        if clock == tc or snap is None:
            return signed(v)
        if clock not in snap:
            return None
        return signed(v - snap[clock] + snap.get(tc, 0))

    for p in packets(data):
        seq = p.get(10, [0])[0]
        flags = p.get(13, [0])[0]
        if flags & 1:
            seq_default.pop(seq, None)
        if 59 in p:
            d = message(p[59][0])
            ted = message(d[11][0]) if 11 in d else {}
            seq_default[seq] = (d.get(58, [0])[0], ted.get(11, [None])[0])
        if 6 in p:
            cs = message(p[6][0])
            clocks = {}
            for c in cs.get(1, []):
                c = message(c)
                clocks[c.get(1, [0])[0]] = (c.get(2, [0])[0], bool(c.get(3, [0])[0]),
                                            c.get(4, [1])[0] or 1)
            own = {k: v for k, v in clocks.items() if 64 <= k < 128}
            if not own and snap is None:
                snap = {k: v[0] for k, v in clocks.items()}
                primary = cs.get(2, [0])[0] or (BOOTTIME if BOOTTIME in snap else None)
                out["boottime"] = signed(snap[BOOTTIME]) if BOOTTIME in snap else None
            refs = {k: v[0] for k, v in clocks.items() if k < 64}
            for k, (v, incr, mult) in own.items():
                st = seq_clocks.setdefault((seq, k), {"snaps": [], "last": 0})
                st["snaps"].append((signed(v * mult), refs))
                st["last"], st["incr"], st["mult"] = signed(v * mult), incr, mult
            continue
        if 60 in p:
            td = message(p[60][0])
            t = {"parent": td.get(5, [None])[0], "name": td.get(2, [b""])[0].decode(errors="replace")}
            if 3 in td:
                pd = message(td[3][0])
                t["pid"] = signed(pd.get(1, [0])[0])
                if 6 in pd and not t["name"]:
                    t["name"] = pd[6][0].decode(errors="replace")
            if 4 in td:
                t["thread"] = signed(message(td[4][0]).get(1, [0])[0])
            tracks[td.get(1, [0])[0]] = t
        if 8 not in p:
            continue
        raw = p[8][0]
        clock = p.get(58, [0])[0] or seq_default.get(seq, (0, None))[0]
        if not clock and snap is not None:
            clock = trace_clock()
        if 64 <= clock < 128:
            st = seq_clocks.get((seq, clock))
            if st is None:
                continue  # no path: trace_processor drops it as a clock error
            ns = signed(st["last"] + raw * st["mult"]) if st["incr"] else signed(raw * st["mult"])
            st["last"] = ns
            base = st["snaps"][0]
            for s in st["snaps"]:
                if s[0] <= ns:
                    base = s
            ref = BOOTTIME if BOOTTIME in base[1] else min(base[1], default=None)
            if ref is None:
                continue
            t = from_builtin(ref, base[1][ref] + (ns - base[0]))
        elif clock:
            t = from_builtin(clock, raw)
        else:
            t = signed(raw)
        if 66 in p and samples is not None and t is not None:
            samples.append((t, seq, message(p[66][0])))
        if 11 not in p or t is None:
            continue
        ev = message(p[11][0])
        uuid = ev.get(11, [None])[0]
        if uuid is None:
            uuid = seq_default.get(seq, (0, None))[1]
        events.append((uuid, ev.get(9, [0])[0], t))

    pid_root = {t["pid"]: u for u, t in tracks.items() if "pid" in t}

    def label(uuid):
        seen = set()
        while uuid in tracks and uuid not in seen:
            seen.add(uuid)
            t = tracks[uuid]
            if t["parent"]:
                uuid = t["parent"]
            elif "thread" in t and t["thread"] in pid_root and pid_root[t["thread"]] != uuid:
                uuid = pid_root[t["thread"]]
            else:
                return t["name"].split(": ", 1)[0]
        return "?"

    first = out["first_slice"] = {}
    for uuid, typ, t in events:
        if t < 0:
            out["negative"] += 1
        elif typ == 1:
            g = label(uuid)
            out["slices"][g] = out["slices"].get(g, 0) + 1
            out["total_slices"] += 1
            first[g] = min(first.get(g, t), t)
        elif typ == 4:
            out["counter_values"] += 1
    return out


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    for path in sys.argv[1:]:
        print(json.dumps(read(path), sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
