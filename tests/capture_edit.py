#!/usr/bin/env python3
"""Rewrites a raw capture (.cupti, layout in src/convert/capture.h) with other metadata and
thread names, for tests that need a capture holding known host names, paths or arguments.

  capture_edit.py IN OUT [--meta KEY=VALUE]... [--thread-prefix TEXT]

--meta sets KEY (replacing its item, or adding one after the last META item); --thread-prefix
puts TEXT before every host thread's name."""
import argparse
import struct
import sys

META, THREAD = 1, 3


def items(data):
    off = 16
    while off + 16 <= len(data):
        typ, flags, n = struct.unpack_from("<IIQ", data, off)
        payload = data[off + 16:off + 16 + n]
        if len(payload) < n:
            break
        yield typ, flags, payload
        off += 16 + n + (-n % 8)


def item(typ, payload):
    return struct.pack("<IIQ", typ, 0, len(payload)) + payload + b"\0" * (-len(payload) % 8)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("inp")
    ap.add_argument("out")
    ap.add_argument("--meta", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--thread-prefix", default="")
    a = ap.parse_args()
    data = open(a.inp, "rb").read()
    if data[:8] != b"CUPTCAP\0":
        sys.exit(f"{a.inp}: not a capture")
    want = dict(kv.split("=", 1) for kv in a.meta)
    out, done, metas_over = [data[:16]], set(), False
    for typ, _, payload in items(data):
        if typ == META:
            key, value = payload.split(b"\0")[:2]
            k = key.decode()
            if k in want:
                payload = key + b"\0" + want[k].encode() + b"\0"
                done.add(k)
        elif not metas_over:
            metas_over = True
            for k, v in want.items():
                if k not in done:
                    out.append(item(META, k.encode() + b"\0" + v.encode() + b"\0"))
        if typ == THREAD and a.thread_prefix:
            tid, name = payload[:8], payload[8:].split(b"\0")[0]
            payload = tid + a.thread_prefix.encode() + name + b"\0"
        out.append(item(typ, payload))
    open(a.out, "wb").write(b"".join(out))


if __name__ == "__main__":
    main()
