#!/usr/bin/env python3
"""Writes every byte a trace file holds, decompressed, to stdout: a gzip file is inflated, and in
a Perfetto trace each TracePacket's compressed_packets (field 50, zlib) is inflated in place,
recursively. For tests that look for strings in the whole of a file, not only in the fields
that they know about.

  trace_bytes.py TRACE"""
import gzip
import sys
import zlib


def varint(b, i):
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return v, i


def packets(b):
    """Yields (raw bytes) of a Trace message, with compressed packets inflated."""
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        field, wt = key >> 3, key & 7
        if wt != 2:
            raise ValueError("not a Perfetto trace")
        n, i = varint(b, i)
        pkt = b[i:i + n]
        i += n
        yield from packet(pkt) if field == 1 else [pkt]


def packet(p):
    """A TracePacket's bytes; its compressed_packets replaced by what they hold."""
    out, i = [], 0
    while i < len(p):
        start = i
        key, i = varint(p, i)
        field, wt = key >> 3, key & 7
        if wt == 0:
            _, i = varint(p, i)
        elif wt == 1:
            i += 8
        elif wt == 5:
            i += 4
        elif wt == 2:
            n, i = varint(p, i)
            if field == 50:
                out.extend(packets(zlib.decompress(p[i:i + n])))
                i += n
                continue
            i += n
        else:
            raise ValueError("bad wire type")
        out.append(p[start:i])
    return out


def main():
    data = open(sys.argv[1], "rb").read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    if data.lstrip()[:1] in (b"[", b"{"):
        sys.stdout.buffer.write(data)
        return
    sys.stdout.buffer.write(b"".join(packets(data)))


if __name__ == "__main__":
    main()
