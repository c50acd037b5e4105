"""Checks the traces of one torchrun job (tests/gpu_ranks_test.sh):

  check_ranks.py CUPTRACE DIR WORLD STEPS BACKEND [MERGED]

DIR holds job-0.pftrace .. job-(WORLD-1).pftrace and nothing else of the job (the launcher
writes none). Each rank's trace: its rank, local rank, world size, launcher, host, boot id,
each GPU's UUID and PCI bus id, the closing clock readings, the NCCL version (nccl backend);
as many kernel slices as CUPTI delivered kernel records (the trace's "kernels" count), nothing
dropped; STEPS "step" ranges. With nccl: every rank's NCCL all-reduce kernels carry the
collective as arguments, and in MERGED (`merge --ranks` of them) the k-th all-reduce of every
rank overlaps the others' (a collective runs on all ranks at once). Prints what it saw; exit 1
on a failure.
"""
import collections
import json
import os
import subprocess
import sys

ct, d, world, steps, backend = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
merged = sys.argv[6] if len(sys.argv) > 6 else None
fail = 0


def bad(msg):
    global fail
    print("FAIL:", msg)
    fail = 1


def load(path):
    """Chrome JSON events of any trace, through cuptrace convert."""
    out = path + ".check.json"
    subprocess.run([ct, "convert", path, "-o", out], check=True, stderr=subprocess.DEVNULL)
    with open(out) as f:
        ev = json.load(f)
    os.unlink(out)
    return ev["traceEvents"] if isinstance(ev, dict) else ev


def stats(path):
    return json.loads(subprocess.run([ct, "stats", "--json", path], check=True,
                                     capture_output=True, text=True).stdout)


files = sorted(f for f in os.listdir(d) if f.endswith(".pftrace"))
want = [f"job-{r}.pftrace" for r in range(world)]
if files != want:
    bad(f"{d} holds {files}, want {want} (one trace per rank, none from the launcher)")
uuids = set()
for r in range(world):
    p = os.path.join(d, f"job-{r}.pftrace")
    if not os.path.exists(p):
        continue
    st = stats(p)
    m = st["metadata"]
    for k, v in (("rank", r), ("world_size", world), ("local_rank", r)):
        if str(m.get(k)) != str(v):
            bad(f"rank {r}: metadata {k} = {m.get(k)}, want {v}")
    if m.get("launcher") != "torchrun":
        bad(f"rank {r}: launcher {m.get('launcher')}")
    for k in ("hostname", "boot_id", "gpu0_uuid", "gpu0_pci_bus_id", "end_realtime_ns",
              "end_boottime_ns", "start_realtime_ns"):
        if not m.get(k):
            bad(f"rank {r}: no {k} in the metadata")
    if backend == "nccl" and not m.get("nccl_version"):
        bad(f"rank {r}: no nccl_version")
    gpus = sorted(k for k in m if k.startswith("gpu") and k.endswith("_uuid"))
    uuids.add(tuple(m[k] for k in gpus))
    ev = load(p)
    kernels = [e for e in ev if e.get("ph") == "X" and e.get("cat") == "kernel"]
    steps_seen = sum(1 for e in ev if e.get("ph") == "X" and e.get("name") == "step")
    if len(kernels) != int(m.get("kernels", -1)):
        bad(f"rank {r}: {len(kernels)} kernel slices, CUPTI delivered {m.get('kernels')}")
    if int(m.get("dropped_records_cupti", 0)) or int(m.get("dropped_records_cuptrace", 0)):
        bad(f"rank {r}: dropped records")
    if steps_seen != steps:
        bad(f"rank {r}: {steps_seen} step ranges, want {steps}")
    nccl = [e for e in kernels if e["name"].startswith("nccl")]
    ar = [e for e in nccl if (e.get("args") or {}).get("nccl_collective") == "AllReduce"]
    print(f"rank {r}: {len(kernels)} kernels (CUPTI {m.get('kernels')}), {len(nccl)} NCCL "
          f"({len(ar)} all-reduce), nccl {m.get('nccl_version')}, {m.get('gpu0_uuid')} at "
          f"{m.get('gpu0_pci_bus_id')}, host {m.get('hostname')}")
    if backend == "nccl":
        if len(ar) < steps:
            bad(f"rank {r}: {len(ar)} all-reduce kernels with nccl_collective, want >= {steps}")
        names = collections.Counter(e["name"].split("(")[0] for e in nccl)
        print(f"rank {r}: NCCL kernels {dict(names)}; args of one: {ar[0].get('args') if ar else None}")
if backend == "nccl" and len(uuids) < 2 and world > 1:
    bad(f"ranks' GPUs: {uuids} (want a GPU per rank)")

if merged:
    ev = load(merged)
    procs = {e["pid"]: e["args"]["name"] for e in ev
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    ranks = sorted(n for n in procs.values() if n.startswith("rank "))
    print(f"merged: processes {ranks}")
    if len(ranks) != world:
        bad(f"merged: {len(ranks)} rank processes, want {world}")
    if backend == "nccl":
        per = collections.defaultdict(list)
        for e in ev:
            if e.get("ph") == "X" and (e.get("args") or {}).get("nccl_collective") == "AllReduce":
                # a GPU group's JSON pid is 1000000000 + 10000000 n + its process's pid
                pid = e["pid"] % 10000000 if e["pid"] >= 1000000000 else e["pid"]
                per[pid].append((e["ts"], e["ts"] + e["dur"]))
        lists = [sorted(v) for v in per.values()]
        n = min(len(v) for v in lists) if lists else 0
        overlap = sum(1 for k in range(n) if max(v[k][0] for v in lists) < min(v[k][1] for v in lists))
        spread = sorted(max(v[k][1] for v in lists) - min(v[k][1] for v in lists) for k in range(n))
        print(f"merged: {n} all-reduces on {len(lists)} ranks, {overlap} overlap on every rank; "
              f"end spread median {spread[len(spread) // 2] if spread else 0:.1f} us, "
              f"max {spread[-1] if spread else 0:.1f} us")
        if len(lists) != world or n < steps or overlap != n:
            bad("merged: the all-reduces of one step do not all overlap across ranks")
sys.exit(fail)
