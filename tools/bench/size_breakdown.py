#!/usr/bin/env python3
"""Where the bytes of a .pftrace go: strip one kind of field at a time and recompress.

    tools/bench/size_breakdown.py TRACE.pftrace [--level 5] [--chunk 131072]

Reads a trace written by cuptrace (zlib compressed_packets chunks, .gz or plain), takes out its
packets, and writes them again the way cuptrace's default output does (zlib streams at --level,
made by libdeflate where the machine has it and by zlib otherwise, as src/output/output.c does,
in compressed_packets chunks of at most --chunk bytes of packets), once as they are and once per
variant below. Each line prints the size and the bytes per kernel (kernels are the BEGIN events
with a "grid" argument). The difference between a variant and "as written" is what that part of
the trace costs once compressed. Only the variants marked "valid" are traces one could ship; the
others exist to measure. Standard library only, so it runs wherever python3 does.
"""
import argparse
import ctypes
import gzip
import sys
import zlib

# Field numbers (proto/perfetto_trace.proto; ../shared/reference/perfetto-format.md).
TRACE_PACKET = 1
P_TIMESTAMP, P_SEQ, P_EVENT, P_INTERNED, P_FLAGS = 8, 10, 11, 12, 13
P_COMPRESSED = 50
E_ANNOTATIONS, E_TYPE, E_FLOWS, E_TERM_FLOWS, E_CORR = 4, 9, 47, 48, 52
A_NAME_IID = 1
I_ANNOTATION_NAMES = 3
SEQ_CLEARED = 1
TYPE_BEGIN, TYPE_END = 1, 2


def read_varint(b, i):
    v = shift = 0
    while True:
        if i >= len(b):
            raise ValueError("truncated varint")
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return v, i


def put_varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def parse(b):
    """A message's fields as (number, wire type, value, raw bytes of the whole field)."""
    i, out = 0, []
    while i < len(b):
        start = i
        tag, i = read_varint(b, i)
        num, wt = tag >> 3, tag & 7
        if wt == 0:
            v, i = read_varint(b, i)
        elif wt == 1:
            v, i = b[i:i + 8], i + 8
        elif wt == 5:
            v, i = b[i:i + 4], i + 4
        elif wt == 2:
            n, i = read_varint(b, i)
            v, i = b[i:i + n], i + n
        else:
            raise ValueError("wire type %d" % wt)
        if i > len(b):
            raise ValueError("truncated field")
        out.append((num, wt, v, b[start:i]))
    return out


def field(num, wt, v):
    tag = put_varint(num << 3 | wt)
    if wt == 0:
        return tag + put_varint(v)
    if wt == 2:
        return tag + put_varint(len(v)) + v
    return tag + v


def load_packets(path):
    data = open(path, "rb").read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    packets = []
    for num, _, v, _ in parse(data):
        if num != TRACE_PACKET:
            continue
        inner = [f for f in parse(v) if f[0] == P_COMPRESSED]
        if inner:
            for f in inner:
                packets += [x[2] for x in parse(zlib.decompress(f[2])) if x[0] == TRACE_PACKET]
        else:
            packets.append(v)
    return packets


def count_kernels(packets):
    """BEGIN events with a debug annotation named "grid", names interned per sequence."""
    names, kernels = {}, 0
    for p in packets:
        fs = parse(p)
        seq = next((v for n, _, v, _ in fs if n == P_SEQ), 0)
        flags = next((v for n, _, v, _ in fs if n == P_FLAGS), 0)
        if flags & SEQ_CLEARED:
            names[seq] = {}
        table = names.setdefault(seq, {})
        for n, _, v, _ in fs:
            if n == P_INTERNED:
                for m, _, e, _ in parse(v):
                    if m == I_ANNOTATION_NAMES:
                        ef = {k: x for k, _, x, _ in parse(e)}
                        table[ef.get(1)] = ef.get(2)
        for n, _, v, _ in fs:
            if n != P_EVENT:
                continue
            ev = parse(v)
            if next((x for k, _, x, _ in ev if k == E_TYPE), 0) != TYPE_BEGIN:
                continue
            for k, _, x, _ in ev:
                if k == E_ANNOTATIONS:
                    iid = next((y for a, _, y, _ in parse(x) if a == A_NAME_IID), None)
                    if table.get(iid) == b"grid":
                        kernels += 1
                        break
    return kernels


def rewrite(packets, drop_event=(), const_time=False, drop_end=False):
    """The packets with the given TrackEvent fields taken out (and the other changes)."""
    out = []
    for p in packets:
        fs = parse(p)
        ev = next((v for n, _, v, _ in fs if n == P_EVENT), None)
        if ev is not None and drop_end:
            if next((x for k, _, x, _ in parse(ev) if k == E_TYPE), 0) == TYPE_END:
                continue
        b = bytearray()
        for n, wt, v, raw in fs:
            if n == P_EVENT and drop_event:
                v = b"".join(r for k, _, _, r in parse(v) if k not in drop_event)
                b += field(n, wt, v)
            elif n == P_TIMESTAMP and const_time:
                b += field(n, wt, 1000)
            else:
                b += raw
        out.append(bytes(b))
    return out


# As src/output/output.c: chunks under SMALL_CHUNK bytes that are not full (under 7/8 of the
# chunk size) take libdeflate's SMALL_LEVEL.
SMALL_CHUNK, SMALL_LEVEL = 64 * 1024, 10


class Compressor:
    """zlib streams as cuptrace makes them: libdeflate.so.0 if it loads, else zlib."""

    def __init__(self, level, chunk=128 * 1024):
        self.level, self.ld, self.comp, self.chunk = level, None, {}, chunk
        try:
            ld = ctypes.CDLL("libdeflate.so.0")
            ld.libdeflate_alloc_compressor.restype = ctypes.c_void_p
            ld.libdeflate_alloc_compressor.argtypes = [ctypes.c_int]
            ld.libdeflate_zlib_compress_bound.restype = ctypes.c_size_t
            ld.libdeflate_zlib_compress_bound.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
            ld.libdeflate_zlib_compress.restype = ctypes.c_size_t
            ld.libdeflate_zlib_compress.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                                                    ctypes.c_size_t, ctypes.c_void_p,
                                                    ctypes.c_size_t]
            self.ld = ld
        except (OSError, AttributeError):
            pass
        self.name = "libdeflate" if self.ld else "zlib"

    def __call__(self, data, last_of_many=False):
        if not self.ld:
            return zlib.compress(data, self.level)
        # The last chunk of a trace that has others takes the trace's level (output.c).
        small = (len(data) < SMALL_CHUNK and len(data) < self.chunk - self.chunk // 8 and
                 not last_of_many)
        lv = SMALL_LEVEL if small and self.level >= 5 else self.level
        if lv not in self.comp:
            self.comp[lv] = self.ld.libdeflate_alloc_compressor(lv)
        c = self.comp[lv]
        cap = self.ld.libdeflate_zlib_compress_bound(c, len(data))
        out = ctypes.create_string_buffer(cap)
        n = self.ld.libdeflate_zlib_compress(c, data, len(data), out, cap)
        return out.raw[:n]


def compressed_size(packets, compress, chunk):
    """Bytes of the trace written as cuptrace writes it: Trace.packet{compressed_packets}."""
    total, cur, n = 0, bytearray(), 0

    def flush(last=False):
        nonlocal total, cur, n
        if cur:
            z = compress(bytes(cur), last and n > 0)
            n += 1
            body = field(P_COMPRESSED, 2, z)
            total += len(field(TRACE_PACKET, 2, body))
            cur = bytearray()

    for p in packets:
        framed = field(TRACE_PACKET, 2, p)
        if cur and len(cur) + len(framed) > chunk:
            flush()
        cur += framed
    flush(True)
    return total


VARIANTS = [
    ("as written", "valid", {}),
    ("without correlation_id", "valid", {"drop_event": (E_CORR,)}),
    ("without flow ids", "valid", {"drop_event": (E_FLOWS, E_TERM_FLOWS)}),
    ("without correlation_id and flow ids", "valid", {"drop_event": (E_CORR, E_FLOWS, E_TERM_FLOWS)}),
    ("without slice arguments", "valid", {"drop_event": (E_ANNOTATIONS,)}),
    ("every timestamp the same", "measure", {"const_time": True}),
    ("without END packets", "measure", {"drop_end": True}),
    ("only structure (all of the above)", "measure",
     {"drop_event": (E_CORR, E_FLOWS, E_TERM_FLOWS, E_ANNOTATIONS), "const_time": True}),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--level", type=int, default=5, help="zlib level (cuptrace's: 5)")
    ap.add_argument("--chunk", type=int, default=128 * 1024, help="bytes of packets per chunk")
    a = ap.parse_args()
    try:
        packets = load_packets(a.trace)
    except (OSError, ValueError, zlib.error, EOFError) as e:
        sys.exit("size_breakdown: %s: %s" % (a.trace, e))
    kernels = count_kernels(packets)
    if not kernels:
        sys.exit("size_breakdown: %s: no kernels (BEGIN events with a grid argument)" % a.trace)
    raw = sum(len(field(TRACE_PACKET, 2, p)) for p in packets)
    print("%s: %d packets, %d kernels, %d bytes before compression (%.1f per kernel)"
          % (a.trace, len(packets), kernels, raw, raw / kernels))
    compress = Compressor(a.level, a.chunk)
    print("recompressed with %s level %d in chunks of %d bytes:" % (compress.name, a.level, a.chunk))
    base = None
    for name, kind, kw in VARIANTS:
        n = compressed_size(rewrite(packets, **kw) if kw else packets, compress, a.chunk)
        base = n if base is None else base
        print("  %-36s %-8s %11d bytes %7.2f per kernel %+7.2f"
              % (name, kind, n, n / kernels, (n - base) / kernels))


if __name__ == "__main__":
    main()
