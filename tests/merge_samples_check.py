#!/usr/bin/env python3
"""Checks that `cuptrace merge` kept every host stack sample of every input (issue 46), with
none of cuptrace's code: what each input should hold is worked out from the capture and the plan
its samples were made from (tests/sample_capture.py), and the merged trace (or each member of a
.tar) is decoded by tests/pf_samples.py and tests/pf_times.py.

For each input LABEL, every planted sample must be in the merged trace once: on a thread track
of LABEL's process (the pid the merge gave it, its own tid), with its planted frames, at its time
moved by exactly the shift of LABEL's slices (the earliest slice's time in the merged trace less
its time in the input converted alone), which must also be the shift the merge reported
("shifted by X ns", relative times, hence plus the change of the trace's BOOTTIME base); no
sample may fall before the merged trace's 0.

  merge_samples_check.py MERGED STDERR LABEL:CAPTURE:PLAN:ALONE ...
    MERGED   the merged .pftrace or .tar; STDERR what `cuptrace merge` printed
    CAPTURE  the input with samples (sample_capture.py make CAPTURE.in CAPTURE PLAN)
    PLAN     its plan: JSON [[ns after the capture's start, tid, stack 1 or 2], ...]
    ALONE    the input converted alone to .pftrace (where its slices are, unmerged)
  CAPTURE and PLAN "-": ALONE is a recorded trace, whose own samples are what the merge must
  keep (tests/gpu_sample_test.sh)."""
import collections
import decimal
import json
import os
import re
import sys
import tarfile
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pf_samples import samples  # noqa: E402
from pf_times import read, packets, message  # noqa: E402
from sample_capture import BASE, STACKS, meta  # noqa: E402


def tracks(path):
    """{pid: label} of the process tracks and the set of (pid, tid) of the thread tracks."""
    data = open(path, "rb").read()
    if data[:2] == b"\x1f\x8b":
        import gzip
        data = gzip.decompress(data)
    procs, threads = {}, set()
    for p in packets(data):
        if 60 not in p:
            continue
        td = message(p[60][0])
        name = td.get(2, [b""])[0].decode(errors="replace")
        if 3 in td:
            pd = message(td[3][0])
            name = name or pd.get(6, [b""])[0].decode(errors="replace")
            procs[pd.get(1, [0])[0]] = name.split(": ", 1)[0]
        if 4 in td:
            th = message(td[4][0])
            threads.add((th.get(1, [0])[0], th.get(2, [0])[0]))
    return procs, threads


def main():
    merged, stderr = sys.argv[1], sys.argv[2]
    unit = {"ns": 1, "us": 1000, "ms": 10**6, "s": 10**9}
    shifts = {k: int(decimal.Decimal(v) * unit[u]) for k, v, u in re.findall(
        r"^cuptrace merge: (\S+) \(.*?\): .*?shifted by ([-+]?[\d.]+) (ns|us|ms|s)\b",
        open(stderr).read(), re.M)}
    tmp = tempfile.mkdtemp()
    files = [merged]
    if merged.endswith(".tar"):
        with tarfile.open(merged) as t:
            t.extractall(tmp)
            files = [os.path.join(tmp, n) for n in t.getnames()]
    got = collections.defaultdict(list)  # label -> [(time, tid, frames)]
    first, base, fails = {}, None, []
    for f in files:
        procs, threads = tracks(f)
        info = read(f)
        base = info["boottime"] if base is None else base
        if info["boottime"] != base:
            fails.append(f"{f}: BOOTTIME base {info['boottime']}, another's {base}")
        for k, v in info["first_slice"].items():
            first[k] = min(first.get(k, v), v)
        for t, pid, tid, fr in samples(f):
            if (pid, tid) not in threads:
                fails.append(f"a sample at {t} of pid {pid} tid {tid}: no such thread track")
            if base and t < base:
                fails.append(f"a sample at {t - base} ns: before the merged trace's 0")
            got[procs.get(pid, f"pid {pid}?")].append((t, tid, [tuple(x) for x in fr]))
    report = []
    for arg in sys.argv[3:]:
        label, cap, plan, alone = arg.split(":")
        alone_info = read(alone)
        if len(alone_info["first_slice"]) != 1 or label not in first:
            fails.append(f"{label}: slices alone {alone_info['first_slice']}, merged {first}")
            continue
        delta = first[label] - min(alone_info["first_slice"].values())
        if label not in shifts:
            fails.append(f"{label}: no 'shifted by' in the merge's output")
        elif base and delta != base - alone_info["boottime"] + shifts[label]:
            fails.append(f"{label}: slices moved by {delta} ns, the merge said "
                         f"{shifts[label]} ns relative")
        if cap == "-":  # a recorded trace: its own samples, decoded here
            want = sorted((t + delta, tid, [tuple(x) for x in fr])
                          for t, _, tid, fr in samples(alone))
        else:
            boot = int(meta(open(cap, "rb").read())["start_boottime_ns"])
            want = sorted((boot + int(t) + delta, int(tid), STACKS[BASE + int(k)])
                          for t, tid, k in json.load(open(plan)))
        have = sorted(got.pop(label, []))
        if have != want:
            miss = [w for w in want if w not in have][:3]
            extra = [h for h in have if h not in want][:3]
            fails.append(f"{label}: {len(have)} samples, {len(want)} planted; missing {miss}, "
                         f"unexpected {extra}")
        per = collections.Counter((tid, fr[-1][0]) for _, tid, fr in have)
        report.append(f"{label}: {len(have)} samples moved by {delta} ns, "
                      + ", ".join(f"tid {t} {fn} {n}" for (t, fn), n in sorted(per.items())))
    for label, v in got.items():
        fails.append(f"{len(v)} samples of {label}, which is no input")
    print("; ".join(report))
    if fails:
        print("FAIL: " + "; ".join(fails[:8]))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
