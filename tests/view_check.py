#!/usr/bin/env python3
"""Where ui.perfetto.dev should open a trace converted from a raw capture (src/format/TIMELINE.md),
computed from the capture's own records without cuptrace, and checked against the
TracingServiceEvent (TracePacket field 69) that the trace holds:

  view_check.py CAPTURE.cupti TRACE.pftrace END_NS

END_NS: where the trace ends, relative ns, as check_trace --view any prints it (cuptrace's
reader: which calls are drawn is the converter's filter, and the trace's timestamps are
sequence-relative; neither is worth decoding again here).

The trace starts at the capture's start_boottime_ns (its "trace info" instant). The work begins at the first
kernel or graph, or earlier at its lead-in: the copies and memsets before it, each followed by GPU
work within a quarter of what follows the kernel, none starting further before the kernel than what
follows it. Where the work begins after the first fifth of the span, the trace must hold one
"all data sources started" event, 1% of what follows before the work begins (within 1 us); else
none. Prints
"expect view at N ns" or "expect none" and the numbers; exits 1 on a mismatch."""
import os
import struct
import sys
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from trace_bytes import varint  # noqa: E402  (the tests' one varint reader)

# CUPTI activity kinds and where their start/end sit (convert/capture.h; CUDA 13.0's layouts)
DRIVER, RUNTIME, MEMCPY, MEMSET, KERNEL, CONC_KERNEL = 4, 5, 1, 2, 3, 10
GRAPH, DEVICE_GRAPH, OVERHEAD, SYNC = 51, 53, 17, 38
AT = {DRIVER: 8, RUNTIME: 8, GRAPH: 8, DEVICE_GRAPH: 8, SYNC: 8, MEMCPY: 16, MEMSET: 16,
      KERNEL: 16, CONC_KERNEL: 16, OVERHEAD: 24}
WORK = (KERNEL, CONC_KERNEL, GRAPH, DEVICE_GRAPH)


def capture(path):
    """(start_boottime_ns, first kernel start, last end, [(start, end) of copies and memsets]) of
    a capture, absolute ns."""
    b = open(path, "rb").read()
    if b[:8] != b"CUPTCAP\0":
        sys.exit(f"{path}: not a capture")
    start, work, end, copies = None, None, 0, []
    p = 16
    while p + 16 <= len(b):
        typ, _, ln = struct.unpack_from("<IIQ", b, p)
        body = b[p + 16:p + 16 + ln]
        p += 16 + ((ln + 7) & ~7)
        if typ == 1:  # META: key\0value\0
            k, v = body.split(b"\0")[:2]
            if k == b"start_boottime_ns":
                start = int(v)
        elif typ == 4:  # RECORDS: u32 count, u32 0, count x (u32 kind, u32 size, record)
            n = struct.unpack_from("<I", body)[0]
            q = 8
            for _ in range(n):
                kind, size = struct.unpack_from("<II", body, q)
                r = body[q + 8:q + 8 + size]
                q += 8 + ((size + 7) & ~7)
                if kind not in AT or len(r) < AT[kind] + 16:
                    continue
                s, e = struct.unpack_from("<QQ", r, AT[kind])
                if not s or e < s:
                    continue  # no timestamps: nothing drawn
                end = max(end, e)
                if kind in WORK and (work is None or s < work):
                    work = s
                elif kind in (MEMCPY, MEMSET):
                    copies.append((s, e))
    if start is None:
        sys.exit(f"{path}: no start_boottime_ns")
    return start, work, end, copies


def lead_in(work, end, copies):
    """Where the GPU work begins: walk back from the first kernel, in time, through the copies
    that end within a quarter of what follows it of the work after them."""
    after = end - work
    begin = work
    for s, e in sorted((c for c in copies if c[0] < work), key=lambda c: -c[1]):
        if e < begin - after // 4:
            break
        if s >= work - after:
            begin = min(begin, s)
    return begin


def fields(p):
    """(field, wire type, value or bytes) of one message."""
    i = 0
    while i < len(p):
        key, i = varint(p, i)
        field, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(p, i)
        elif wt == 1:
            v, i = p[i:i + 8], i + 8
        elif wt == 5:
            v, i = p[i:i + 4], i + 4
        elif wt == 2:
            n, i = varint(p, i)
            v, i = p[i:i + n], i + n
        else:
            raise ValueError("bad wire type")
        yield field, wt, v


def trace_packets(b):
    """Every TracePacket of a Trace message, those in compressed_packets (field 50) inflated."""
    for field, wt, pkt in fields(b):
        if field != 1 or wt != 2:
            continue
        chunk = [v for f, w, v in fields(pkt) if f == 50 and w == 2]
        if chunk:
            yield from trace_packets(zlib.decompress(chunk[0]))
        else:
            yield pkt


def view_starts(path):
    """Timestamps of the TracePackets that hold a TracingServiceEvent (field 69): absolute, as
    the writer gives them no sequence flags."""
    out = []
    for pkt in trace_packets(open(path, "rb").read()):
        f = list(fields(pkt))
        if any(k == 69 for k, _, _ in f):
            out.append(next((v for k, w, v in f if k == 8 and w == 0), None))
    return out


start, work, _, copies = capture(sys.argv[1])
views = view_starts(sys.argv[2])
end = start + int(sys.argv[3])
span = end - start
begin = None if work is None else lead_in(work, end, copies)
want = None
if begin is not None and begin - start > span // 5:
    want = begin - (end - begin) // 100
print("expect none" if want is None else f"expect view at {want - start} ns")
print(f"span {span} ns, first kernel at {'-' if work is None else work - start} ns, "
      f"work begins at {'-' if begin is None else begin - start} ns, "
      f"view starts {[v - start for v in views]} ns")
if want is None:
    sys.exit(1 if views else 0)
sys.exit(0 if len(views) == 1 and abs(views[0] - want) <= 1000 else 1)
