"""Independent count for tests/nothing_lost_test.sh: the packets a reader can take from a
Perfetto trace cut at byte N, counted from the file's own framing (zlib chunks inflated here),
without cuptrace's reader. Prints the number of packets in the whole top-level packets and
chunks that end at or before N.

usage: damage_check.py TRACE.pftrace CUT_AT
"""
import os
import sys
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from trace_bytes import varint  # noqa: E402  (the tests' one varint reader)


def packets_in(b):
    """(packet count, offsets) of the framed Trace.packet entries of b."""
    i = 0
    while i < len(b):
        tag, i = varint(b, i)
        ln, i = varint(b, i)
        assert tag == 0x0A, f"unexpected top-level tag {tag:#x}"
        yield i, ln
        i += ln


def chunk_payload(p):
    """The compressed_packets (field 50) payload of packet p, or None."""
    i = 0
    while i < len(p):
        tag, i = varint(p, i)
        wt = tag & 7
        if wt == 0:
            _, i = varint(p, i)
        elif wt == 1:
            i += 8
        elif wt == 5:
            i += 4
        elif wt == 2:
            ln, i = varint(p, i)
            if tag >> 3 == 50:
                return p[i:i + ln]
            i += ln
        else:
            return None
    return None


data = open(sys.argv[1], "rb").read()
cut = int(sys.argv[2])
count = 0
for off, ln in packets_in(data):
    if off + ln > cut:
        break
    z = chunk_payload(data[off:off + ln])
    if z is None:
        count += 1
    else:
        count += sum(1 for _ in packets_in(zlib.decompress(z)))
print(count)
