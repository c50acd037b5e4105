#!/usr/bin/env python3
"""Reads the host stack samples of a Perfetto trace on its own, with none of cuptrace's code:
each PerfSample packet (TracePacket field 66) with its time (as trace_processor computes it,
tests/pf_times.py) and its callstack resolved through the interned frames, function names and
source paths (iids are the writer's own, the same on every sequence).

  samples(path) -> sorted [(trace time ns, pid, tid, [(function, file, line), ...])], frames
  outermost first.
  pf_samples.py TRACE  prints per thread the innermost frames' shares."""
import collections
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pf_times import read, packets, message  # noqa: E402


def samples(path):
    raw_samples = []
    read(path, raw_samples)
    data = open(path, "rb").read()
    if data[:2] == b"\x1f\x8b":
        import gzip
        data = gzip.decompress(data)
    funcs, paths, frames, stacks = {}, {}, {}, {}
    for p in packets(data):
        for d in p.get(12, []):
            d = message(d)
            for e in d.get(5, []):
                e = message(e)
                funcs[e[1][0]] = e[2][0].decode()
            for e in d.get(18, []):
                e = message(e)
                paths[e[1][0]] = e[2][0].decode()
            for e in d.get(6, []):
                e = message(e)
                frames[e[1][0]] = (e.get(2, [0])[0], e.get(5, [0])[0], e.get(6, [0])[0])
            for e in d.get(7, []):
                e = message(e)
                stacks[e[1][0]] = e.get(2, [])
    out = []
    for t, _seq, s in raw_samples:
        fr = [frames[f] for f in stacks.get(s.get(4, [0])[0], []) if f in frames]
        out.append((t, s.get(2, [0])[0], s.get(3, [0])[0],
                    [(funcs.get(a), paths.get(b), c) for a, b, c in fr]))
    return sorted(out, key=lambda x: x[0])


def main():
    by = collections.defaultdict(collections.Counter)
    for _t, _pid, tid, fr in samples(sys.argv[1]):
        by[tid][fr[-1] if fr else None] += 1
    for tid, c in by.items():
        n = sum(c.values())
        print(f"thread {tid}: {n} samples")
        for f, k in c.most_common(10):
            print(f"  {100 * k / n:5.1f}%  {f}")


if __name__ == "__main__":
    main()
