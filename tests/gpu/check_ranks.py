"""Checks the traces of one torchrun job (tests/gpu_ranks_test.sh):

  check_ranks.py CUPTRACE DIR WORLD STEPS BACKEND [MERGED]

DIR holds job-0.pftrace .. job-(WORLD-1).pftrace and nothing else of the job (the launcher
writes none). Each rank's trace: its rank, local rank, world size, launcher, host, boot id,
each GPU's UUID and PCI bus id, the closing clock readings, the NCCL version (nccl backend);
the GPU its process used ("gpus_used": CUDA device LOCAL_RANK % GPUs, as ddp_train.py picks
it), with that GPU's UUID and PCI bus id, and all its GPU work on that GPU; as many kernel
slices as CUPTI delivered kernel records (the trace's "kernels" count), nothing dropped; STEPS
"step" ranges. With nccl (a GPU per rank): the ranks' used GPUs are distinct (by UUID), every
rank's NCCL all-reduce kernels carry the collective as arguments, and in MERGED (`merge
--ranks` of them) each rank's GPU group is labelled with its rank and its GPU's UUID, the k-th
all-reduce of every rank overlaps the others' (a collective runs on all ranks at once), and the
symmetric collectives' end spread stored by the merge is small and agrees with the one
measured here. Prints what it saw; exit 1 on a failure.
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


ngpu = int(os.environ.get("RANKS_NGPU", "0"))  # from gpu_ranks_test.sh: torch's device count
files = sorted(f for f in os.listdir(d) if f.endswith(".pftrace"))
want = [f"job-{r}.pftrace" for r in range(world)]
if files != want:
    bad(f"{d} holds {files}, want {want} (one trace per rank, none from the launcher)")
uuids = set()
used_uuid = {}  # rank -> UUID of the GPU it used
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
    # Every rank sees every GPU (gpuN_uuid for all of them): the one it used is "gpus_used".
    used = [int(x) for x in str(m.get("gpus_used", "")).split(",") if x != ""]
    want_dev = r % ngpu if ngpu else None
    if want_dev is not None and used != [want_dev]:
        bad(f"rank {r}: gpus_used {m.get('gpus_used')!r}, want '{want_dev}'")
    for u in used:
        for k in (f"gpu{u}_uuid", f"gpu{u}_pci_bus_id"):
            if not m.get(k):
                bad(f"rank {r}: no {k} for the GPU it used")
    if used:
        used_uuid[r] = m.get(f"gpu{used[0]}_uuid")
        uuids.add(used_uuid[r])
    hdr = st["header"].get("gpus_used") or []
    if [g["index"] for g in hdr] != used or any(g["uuid"] != m.get(f"gpu{g['index']}_uuid") for g in hdr):
        bad(f"rank {r}: stats header gpus_used {hdr}, metadata {m.get('gpus_used')}")
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
    # The GPU groups of its work: "GPU N: ..." (the JSON's pid of a group is >= 1000000000).
    groups = {e["pid"]: e["args"]["name"] for e in ev
              if e.get("ph") == "M" and e.get("name") == "process_name" and e["pid"] >= 1000000000}
    work_gpus = sorted({groups.get(e["pid"], "?").split(":")[0] for e in kernels})
    if used and work_gpus != [f"GPU {u}" for u in used]:
        bad(f"rank {r}: kernels on {work_gpus}, gpus_used {used}")
    print(f"rank {r}: {len(kernels)} kernels (CUPTI {m.get('kernels')}) on {work_gpus}, {len(nccl)} "
          f"NCCL ({len(ar)} all-reduce), nccl {m.get('nccl_version')}; used GPU {used}: "
          f"{st['header'].get('gpus_used_text')}; host {m.get('hostname')}")
    if backend == "nccl":
        if len(ar) < steps:
            bad(f"rank {r}: {len(ar)} all-reduce kernels with nccl_collective, want >= {steps}")
        names = collections.Counter(e["name"].split("(")[0] for e in nccl)
        print(f"rank {r}: NCCL kernels {dict(names)}; args of one: {ar[0].get('args') if ar else None}")
if backend == "nccl" and world > 1 and len(uuids) != world:
    bad(f"ranks' GPUs: {used_uuid} (want a GPU of its own per rank)")

if merged:
    ev = load(merged)
    procs = {e["pid"]: e["args"]["name"] for e in ev
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    ranks = sorted(n for n in procs.values() if n.startswith("rank ") and " @ " in n)
    print(f"merged: processes {ranks}")
    if len(ranks) != world:
        bad(f"merged: {len(ranks)} rank processes, want {world}")
    # Each rank's GPU group: "rank R · GPU N: model (GPU-xxxxxxxx)", the UUID of the GPU it used.
    gnames = sorted(n for p, n in procs.items() if p >= 1000000000)
    print(f"merged: GPU groups {gnames}")
    for r, u in used_uuid.items():
        short = "-".join(u.split("-")[:2])
        if not any(n.startswith(f"rank {r} \u00b7 GPU ") and n.endswith(f"({short})") for n in gnames):
            bad(f"merged: no GPU group of rank {r} labelled with {short}")
    if backend == "nccl":
        mm = stats(merged)["metadata"]
        per = collections.defaultdict(list)
        allcoll = collections.defaultdict(lambda: collections.defaultdict(list))
        for e in ev:
            a = e.get("args") or {}
            if e.get("ph") != "X" or not a.get("nccl_collective"):
                continue
            # a GPU group's JSON pid is 1000000000 + 10000000 n + its process's pid
            pid = e["pid"] % 10000000 if e["pid"] >= 1000000000 else e["pid"]
            allcoll[e["name"]][pid].append((e["ts"], e["ts"] + e["dur"]))
            if a["nccl_collective"] == "AllReduce":
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
        # The merge's spread is over the symmetric collectives: count them here by name and
        # occurrence on every rank, and compare its maximum with the one measured here.
        sym = ("allreduce", "allgather", "reducescatter", "alltoall")
        sym_spread, other = [], 0
        for name, byrank in allcoll.items():
            if len(byrank) < 2:
                continue
            k = min(len(v) for v in byrank.values())
            ends = [sorted(v) for v in byrank.values()]
            is_sym = name[len("ncclDevKernel_"):].split("_")[0].split("(")[0].lower() in sym
            for i in range(k):
                if is_sym:
                    sym_spread.append(max(v[i][1] for v in ends) - min(v[i][1] for v in ends))
                else:
                    other += 1
        sym_spread.sort()
        got_n = int(mm.get("merge_collectives_matched", -1))
        got_max = int(mm.get("merge_collective_end_spread_max_ns", -1))
        print(f"merged: merge says {got_n} symmetric collectives, end spread max {got_max} ns, "
              f"{mm.get('merge_other_collectives_matched')} others (max "
              f"{mm.get('merge_other_collective_end_spread_max_ns')} ns); measured here "
              f"{len(sym_spread)} and {other}, max {sym_spread[-1] * 1000 if sym_spread else 0:.0f} ns")
        if got_n != len(sym_spread) or int(mm.get("merge_other_collectives_matched", -1)) != other:
            bad("merged: the merge's count of symmetric / other collectives differs from the trace's")
        if not sym_spread or abs(got_max - sym_spread[-1] * 1000) > 2:  # JSON times: 1 ns steps
            bad("merged: the merge's symmetric end spread differs from the trace's")
        if got_max > 1000000:  # one machine, BOOTTIME: ends within microseconds, not ms
            bad(f"merged: symmetric collectives end {got_max} ns apart")
sys.exit(fail)
