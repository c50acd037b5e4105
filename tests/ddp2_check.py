"""What cuptrace says of a real 2-rank DDP job over NCCL on two GPUs (tests/ddp2_ranks_test.sh),
checked against the raw captures themselves, decoded here without cuptrace:

  ddp2_check.py CUPTRACE RANK0.cupti RANK1.cupti TMPDIR

The captures (tests/data/ddp2_rank*.cupti) are of tests/gpu/ddp_train.py, 6 steps, under torchrun
on two H200s of one machine: rank 0 on CUDA device 0, rank 1 on device 1, each process seeing
both GPUs. nvidia-smi named them (the truth the metadata must match):
"""
import collections
import json
import os
import re
import struct
import subprocess
import sys

GPUS = {  # CUDA index (= nvidia-smi index here) -> (UUID, PCI bus id as nvidia-smi prints it)
    0: ("GPU-efd72071-e325-0fb2-d40a-a1f98fca5e91", "00000000:00:06.0"),
    1: ("GPU-5865b8d5-d36a-58e4-3ed4-4c141def8088", "00000000:00:07.0"),
}
SYMMETRIC = ("allreduce", "allgather", "reducescatter", "alltoall")

ct, caps, tmp = sys.argv[1], sys.argv[2:4], sys.argv[4]
fail = 0
checks = 0


def check(ok, msg):
    global fail, checks
    checks += 1
    if not ok:
        print("FAIL:", msg)
        fail = 1


def run(*args):
    p = subprocess.run([ct, *args], capture_output=True, text=True)
    if p.returncode:
        print(f"FAIL: cuptrace {' '.join(args)}: exit {p.returncode}\n{p.stderr}")
        sys.exit(1)
    return p


# ---- the raw captures (convert/capture.h's layout; record offsets of CUDA 13.0's CUPTI) ----

KERNEL, MEMCPY, MEMSET, DEVICE, CONTEXT, MARKER = 10, 1, 2, 8, 9, 12


def decode(path):
    """META entries, and the kernels, copies, memsets, devices and contexts of a capture."""
    b = open(path, "rb").read()
    assert b[:8] == b"CUPTCAP\0", path
    meta, strings = {}, {}
    out = collections.defaultdict(list)
    p = 16
    while p + 16 <= len(b):
        typ, _, ln = struct.unpack_from("<IIQ", b, p)
        body = b[p + 16:p + 16 + ln]
        p += 16 + ((ln + 7) & ~7)
        if typ == 1:  # META: key\0value\0
            k, v = body.split(b"\0")[:2]
            meta[k.decode()] = v.decode()
        elif typ == 2:  # STRING: u64 pointer, text\0
            strings[struct.unpack_from("<Q", body)[0]] = body[8:].split(b"\0")[0].decode()
        elif typ == 4:  # RECORDS: u32 count, u32 0, count x (u32 kind, u32 size, record)
            n = struct.unpack_from("<I", body)[0]
            q = 8
            for _ in range(n):
                kind, size = struct.unpack_from("<II", body, q)
                r = body[q + 8:q + 8 + size]
                q += 8 + ((size + 7) & ~7)
                if kind == KERNEL:  # CUpti_ActivityKernel10
                    start, end = struct.unpack_from("<QQ", r, 16)
                    dev = struct.unpack_from("<I", r, 40)[0]
                    name = strings.get(struct.unpack_from("<Q", r, 104)[0], "?")
                    out["kernel"].append((start, end, dev, name))
                elif kind in (MEMCPY, MEMSET):  # Memcpy6, Memset4: start, end, deviceId
                    start, end = struct.unpack_from("<QQ", r, 16)
                    dev = struct.unpack_from("<I", r, 32)[0]
                    out["memcpy" if kind == MEMCPY else "memset"].append((start, end, dev))
                elif kind == DEVICE:  # CUpti_ActivityDevice5: id, uuid bytes
                    dev = struct.unpack_from("<I", r, 112)[0]
                    u = r[120:136].hex()
                    out["device"].append((dev, f"GPU-{u[:8]}-{u[8:12]}-{u[12:16]}-{u[16:20]}-{u[20:]}"))
                elif kind == CONTEXT:  # CUpti_ActivityContext3: contextId, deviceId
                    out["context"].append(struct.unpack_from("<I", r, 8)[0])
                elif kind == MARKER:  # CUpti_ActivityMarker2: flags, timestamp, id; name at 40
                    flags = struct.unpack_from("<I", r, 4)[0]
                    if flags & 2:  # CUPTI_ACTIVITY_FLAG_MARKER_START: a range opens
                        name = strings.get(struct.unpack_from("<Q", r, 40)[0], "?")
                        out["range"].append(name)
    return meta, out


def ident(name):
    """The kernel's identifier, mangled ("_Z39ncclDevKernel_AllReduce_...24ncclDev...", as CUPTI
    names it) or demangled ("ncclDevKernel_AllReduce_...(ncclDevKernelArgsStorage<4096ul>)", as
    the trace does)."""
    m = re.match(r"_Z(\d+)", name)
    return name[m.end():m.end() + int(m.group(1))] if m else name.split("(")[0]


def collective(name):
    """ncclDevKernel_AllReduce_Sum_f32_RING_LL -> AllReduce; None if not NCCL's."""
    i = ident(name)
    return i[len("ncclDevKernel_"):].split("_")[0] if i.startswith("ncclDevKernel_") else None


def union(iv):
    tot, cs, ce = 0, None, None
    for s, e in sorted(iv):
        if ce is None or s > ce:
            tot += 0 if ce is None else ce - cs
            cs, ce = s, e
        else:
            ce = max(ce, e)
    return tot + (0 if ce is None else ce - cs)


def events(path):
    """Chrome JSON events of any trace, through cuptrace convert."""
    out = os.path.join(tmp, os.path.basename(path) + ".json")
    run("convert", path, "-o", out)
    with open(out) as f:
        ev = json.load(f)
    return ev["traceEvents"] if isinstance(ev, dict) else ev


raw = [decode(c) for c in caps]
pids = [int(m["pid"]) for m, _ in raw]

# ---- 1. each rank's metadata and stats: the GPU it used, its counts ----
for r, (m, rec) in enumerate(raw):
    check(int(m["rank"]) == r and m["world_size"] == "2", f"capture {r}: rank {m.get('rank')}")
    used = sorted({k[2] for k in rec["kernel"]} | {x[2] for x in rec["memcpy"]} |
                  {x[2] for x in rec["memset"]} | set(rec["context"]))
    seen = sorted(d for d, _ in rec["device"])
    # the heart of the issue: both GPUs visible, one used, and a different one per rank
    check(seen == [0, 1] and used == [r], f"rank {r}: devices seen {seen}, used {used}")
    for d, u in rec["device"]:
        check(u == GPUS[d][0], f"rank {r}: device {d} has UUID {u}, nvidia-smi says {GPUS[d][0]}")
    st = json.loads(run("stats", "--json", caps[r]).stdout)
    md, hdr = st["metadata"], st["header"]
    check(md.get("gpus_used") == str(r), f"rank {r}: gpus_used {md.get('gpus_used')!r}")
    g = hdr.get("gpus_used") or [{}]
    # nvidia-smi writes the PCI domain with 8 digits, CUDA with 4
    check(len(hdr.get("gpus_used") or []) == 1 and g[0].get("index") == r and
          g[0].get("uuid") == GPUS[r][0] and
          g[0].get("pci_bus_id", "").split(":", 1)[1] == GPUS[r][1].split(":", 1)[1],
          f"rank {r}: stats header gpus_used {hdr.get('gpus_used')}")
    text = run("stats", caps[r]).stdout
    line = [x for x in text.splitlines() if x.startswith("GPUs used:")]
    check(line and line[0].split(None, 2)[2] ==
          f"GPU {r}: NVIDIA H200 ({GPUS[r][0]}, PCI {g[0].get('pci_bus_id')})",
          f"rank {r}: stats line {line}")
    for key, kind in (("kernels", "kernel"), ("memcpys", "memcpy"), ("memsets", "memset")):
        check(int(md.get(key, -1)) == len(rec[kind]),
              f"rank {r}: stats {key} {md.get(key)}, capture holds {len(rec[kind])}")
    gpu_work = rec["kernel"] + rec["memcpy"] + rec["memset"]
    check(st["events"]["gpu_slices"] == len(gpu_work),
          f"rank {r}: {st['events']['gpu_slices']} GPU slices, {len(gpu_work)} records")
    devs = st["devices"]
    check(len(devs) == 1 and devs[0]["name"].startswith(f"GPU {r}:") and
          devs[0]["busy_ns"] == union([(s, e) for s, e, *_ in gpu_work]),
          f"rank {r}: devices {devs}")
    # per kernel name, count and total as the records say
    got = {n["name"]: n["count"] for n in st["names"] if n["category"] == "kernel"}
    nccl_raw = collections.Counter(collective(k[3]) for k in rec["kernel"] if collective(k[3]))
    nccl_stats = collections.Counter()
    for n, c in got.items():
        if collective(n):
            nccl_stats[collective(n)] += c
    check(nccl_raw == nccl_stats and sum(got.values()) == len(rec["kernel"]),
          f"rank {r}: NCCL kernels in stats {dict(nccl_stats)}, capture {dict(nccl_raw)}")
    print(f"rank {r}: pid {pids[r]}, sees GPUs {seen}, used {used}: {line[0] if line else '?'}; "
          f"{len(rec['kernel'])} kernels, {len(rec['memcpy'])} copies, {len(rec['memset'])} "
          f"memsets; NCCL {dict(nccl_raw)}")

# ---- 2. NCCL kernel arguments: what the name says, on every NCCL kernel ----
for r in range(2):
    ev = events(caps[r])
    nk = [e for e in ev if e.get("ph") == "X" and e.get("cat") == "kernel" and collective(e["name"])]
    bad = [e["name"] for e in nk if (e.get("args") or {}).get("nccl_collective") != collective(e["name"])]
    check(nk and not bad, f"rank {r}: NCCL kernels without their collective as argument: {bad[:3]}")
    ar = [e["args"] for e in nk if e["args"]["nccl_collective"] == "AllReduce"]
    check(len(ar) == 12 and all(a.get("nccl_reduction") == "Sum" and a.get("nccl_dtype") == "f32" and
                                a.get("nccl_algorithm") == "RING" and a.get("nccl_protocol") == "LL"
                                for a in ar), f"rank {r}: all-reduce arguments {ar[:1]}")

# ---- 3. merge --ranks (inputs out of order) ----
merged = os.path.join(tmp, "ddp2.pftrace")
err = run("merge", "--ranks", caps[1], caps[0], "-o", merged).stderr.splitlines()
print("\n".join(err))
for r in range(2):
    want = (f"cuptrace merge: rank {r} @ vm ({caps[r]}): {'reference' if r == 0 else 'boottime'}, "
            f"shifted by ")
    line = [x for x in err if x.startswith(want)]
    check(len(line) == 1 and line[0].endswith(
        f"; GPU {r}: NVIDIA H200 ({GPUS[r][0]}, PCI {GPUS[r][1][4:]})"), f"merge: rank {r}'s line {line}")
check(err and err[0].startswith("cuptrace merge: rank 0 ") and err[1].startswith("cuptrace merge: rank 1 "),
      "merge: ranks not reported in order")

# The truth from the raw captures: both ranks ran on one machine, and CUPTI's clock is its
# BOOTTIME, so the raw ends compare as they are. The k-th kernel of a name on each rank.
ends = [collections.defaultdict(list) for _ in range(2)]
for r, (_, rec) in enumerate(raw):
    for start, end, dev, name in sorted(rec["kernel"]):
        if collective(name):
            ends[r][ident(name)].append(end)
spread = {True: [], False: []}
for name in ends[0]:
    for a, b in zip(ends[0][name], ends[1][name]):
        spread[collective(name).lower() in SYMMETRIC].append(abs(a - b))
for v in spread.values():
    v.sort()
sym, oth = spread[True], spread[False]
mm = json.loads(run("stats", "--json", merged).stdout)["metadata"]


def stored(k):
    return int(mm.get(k, -1))


print(f"truth: {len(sym)} symmetric collectives, end spread median {sym[(len(sym) - 1) // 2]} ns, "
      f"max {sym[-1]} ns; {len(oth)} others, median {oth[(len(oth) - 1) // 2]} ns, max {oth[-1]} ns")
check(stored("merge_collectives_matched") == len(sym) == 13 and
      stored("merge_collective_end_spread_median_ns") == sym[(len(sym) - 1) // 2] and
      stored("merge_collective_end_spread_max_ns") == sym[-1],
      f"merge: symmetric spread stored {[(k, v) for k, v in mm.items() if k.startswith('merge_coll')]}")
check(stored("merge_other_collectives_matched") == len(oth) == 4 and
      stored("merge_other_collective_end_spread_max_ns") == oth[-1],
      f"merge: other spread stored {[(k, v) for k, v in mm.items() if k.startswith('merge_other')]}")
# "within a few microseconds": the ranks share a machine, the ends are those of the hardware
check(sym[(len(sym) - 1) // 2] <= 2000 and sym[-1] <= 10000, f"symmetric ends spread by {sym}")
check(any(f"; {len(sym)} symmetric collectives (all-reduce, all-gather, reduce-scatter, all-to-all) "
          "on two ranks or more; their ends after alignment spread by "
          f"{sym[(len(sym) - 1) // 2] / 1e3:.1f} us (median)" in x for x in err) and
      any(x.startswith(f"cuptrace merge: apart, {len(oth)} other collectives") and
          x.endswith(f"{oth[-1] / 1e3:.1f} us (max)") for x in err), "merge: the spread lines")

# In the merged trace: the ranks in order, each GPU group labelled with its rank and GPU, each
# rank's NCCL kernels where the raw clock puts them relative to the other rank's.
ev = events(merged)
procs = {e["pid"]: e["args"] for e in ev if e.get("ph") == "M" and e.get("name") == "process_name"}
order = {e["pid"]: e["args"]["sort_index"] for e in ev
         if e.get("ph") == "M" and e.get("name") == "process_sort_index"}
ranks = sorted((order.get(p, 0), a["name"]) for p, a in procs.items() if p < 1000000000)
check([n for _, n in ranks] == ["rank 0 @ vm: python", "rank 1 @ vm: python"], f"merged: processes {ranks}")
groups = {p: a for p, a in procs.items() if p >= 1000000000}
for r in range(2):
    uuid = GPUS[r][0]
    name = f"rank {r} \u00b7 GPU {r}: NVIDIA H200 ({uuid[:12]})"
    g = [p for p, a in groups.items() if a["name"] == name]
    check(len(g) == 1 and uuid in groups[g[0]].get("description", "") and
          GPUS[r][1][4:] in groups[g[0]].get("description", ""), f"merged: no group {name!r}: {groups}")
    # its process: the group's pid is 1000000000 + 10000000 n + the process's pid
    if g:
        check(procs.get(g[0] % 10000000, {}).get("name", "").startswith(f"rank {r} @"),
              f"merged: group {name!r} under {procs.get(g[0] % 10000000)}")
mk = collections.defaultdict(list)
for e in ev:
    if e.get("ph") == "X" and e.get("cat") == "kernel" and collective(e["name"]) and e["pid"] >= 1000000000:
        r = 0 if groups[e["pid"]]["name"].startswith("rank 0 ") else 1
        mk[(r, ident(e["name"]))].append(round((e["ts"] + e["dur"]) * 1000))
worst = 0
for name in ends[0]:
    for k, (a, b) in enumerate(zip(ends[0][name], ends[1][name])):
        got = mk[(1, name)][k] - mk[(0, name)][k]
        worst = max(worst, abs(got - (b - a)))
check(worst <= 2, f"merged: rank 1's collective ends off the raw clock by up to {worst} ns")

# ---- 4. analyze over the two ranks ----
an = json.loads(run("analyze", "--json", *caps).stdout)
rows = sorted(an.get("ranks") or [], key=lambda x: x["file"])
check([x["pid"] for x in rows] == pids, f"analyze: ranks {rows}")
for r, x in enumerate(rows):
    rec = raw[r][1]
    work = [(s, e) for s, e, *_ in rec["kernel"] + rec["memcpy"] + rec["memset"]]
    comm = [(s, e) for s, e, d, n in rec["kernel"] if collective(n)]
    # Where steps were found, a rank's figures are its GPUs' over their steady state (the GPU
    # table's, which the records bound); else the whole trace's, the records' exactly.
    gw = [g for g in an["gpus"] if g["rank"] == x["rank"]]
    if an["steady_state"]["from_steps"]:
        ok = (x["busy_ns"] == sum(g["busy_ns"] for g in gw) and 0 < x["busy_ns"] <= union(work)
              and x["comm_ns"] == sum(g["comm_ns"] for g in gw) and x["comm_ns"] <= union(comm))
    else:
        ok = x["busy_ns"] == union(work) and x["comm_ns"] == union(comm)
    check(ok,
          f"analyze: rank {r} busy {x['busy_ns']} comm {x['comm_ns']}, records say "
          f"{union(work)} and {union(comm)}")
# Each rank named by the rank and host its capture's metadata says (issue 43), everywhere.
for r, x in enumerate(rows):
    check(x["rank"] == r and x["rank_label"] == f"rank {r} @ vm" and x["host"] == "vm",
          f"analyze: rank {r} labelled {x.get('rank')} {x.get('rank_label')!r}")
check(sorted({g["rank_label"] for g in an["gpus"]}) == ["rank 0 @ vm", "rank 1 @ vm"],
      f"analyze: GPUs' ranks {[g.get('rank_label') for g in an['gpus']]}")
strag = [f for f in an.get("findings", []) if f["id"] == "straggler"]
least = min(rows, key=lambda x: x["comm_ns"]) if rows else None
check(not strag or (least and strag[0]["worst"][0]["pid"] == least["pid"] and
                    strag[0]["top_rank_label"] == least["rank_label"]),
      f"analyze: straggler {strag[:1]}, least time in collectives {least}")
# The steps, NVTX ranges "step" without numbers, are found in the GPU work: a rank's iterations
# are its steps (the first may be left out as start-up: on rank 0 its GPU time is mostly the
# first all-reduce's warm-up, which no other step repeats), not halves of them (11 on rank 0,
# cut at the all-reduce that comes twice per step, before the period finder preferred
# iterations alike).
nsteps = [sum(1 for n in rec["range"] if n == "step") for _, rec in raw]
found = [sum(1 for s in an["steps"]["rows"] if s["pid"] == p) for p in pids]
check(an["steps"]["kind"] == "gpu_period" and nsteps[0] > 0 and
      all(k - 1 <= f <= k for f, k in zip(found, nsteps)),
      f"analyze: {an['steps']['kind']} steps per rank {found}, NVTX step ranges {nsteps}")
print(f"analyze: iterations per rank {found}, NVTX step ranges {nsteps}")
text = run("analyze", *caps).stdout
sect = text.split("== Ranks ==")[-1].splitlines()
check(all(any(l.startswith(f"rank {r} @ vm  {p}  ") for l in sect) for r, p in enumerate(pids)),
      "analyze: a rank missing from '== Ranks =='")
print("analyze: " + "; ".join(f"{x['rank_label']} (pid {x['pid']}) GPU busy {x['busy_ns'] / 1e6:.3f} ms, "
                               f"collectives {x['comm_ns'] / 1e6:.3f} ms" for x in rows) +
      (f"; straggler {strag[0]['top_rank_label']}" if strag else "; no straggler finding"))

# ---- 5. the same job as if rank 1 ran on another machine, its wall clock 1.5 s ahead ----
# Its trace as JSON, with another host, boot id and REALTIME start: merge --ranks must find the
# true placement (the BOOTTIME one above) again from the collectives' ends. The fit goes by the
# symmetric collectives only, so it matches 13 of them, not the 17 NCCL kernels.
SKEW = 1500000000
src = os.path.join(tmp, os.path.basename(caps[1]) + ".json")
with open(src) as f:
    doc = json.load(f)
for e in doc["traceEvents"] if isinstance(doc, dict) else doc:
    if e.get("cat") == "cuptrace" and e.get("name") in ("cuptrace: trace info", "cuptrace: summary"):
        a = e["args"]
        a["hostname"], a["boot_id"] = "vm2", "00000000-0000-0000-0000-0000000000b2"
        a["start_realtime_ns"] = str(int(a["start_realtime_ns"]) + SKEW)
far = os.path.join(tmp, "rank1_far.json")
with open(far, "w") as f:
    json.dump(doc, f)
merged2 = os.path.join(tmp, "ddp2_far.pftrace")
err = run("merge", "--ranks", caps[0], far, "-o", merged2).stderr.splitlines()
print("\n".join(err))
m2 = json.loads(run("stats", "--json", merged2).stdout)["metadata"]
bt = [int(m["start_boottime_ns"]) for m, _ in raw]
# where rank 1 belongs relative to rank 0: their BOOTTIME starts' difference
want = int(mm["rank 1 @ vm: merge_offset_ns"]) - int(mm["rank 0 @ vm: merge_offset_ns"])
got = int(m2.get("rank 1 @ vm2: merge_offset_ns", 0)) - int(m2.get("rank 0 @ vm: merge_offset_ns", 0))
check(want == bt[1] - bt[0], f"one machine: rank 1 placed at {want}, BOOTTIME says {bt[1] - bt[0]}")
check(m2.get("rank 1 @ vm2: merge_clock") == "nccl" and
      int(m2.get("rank 1 @ vm2: merge_matched_collectives", -1)) == 13 and abs(got - want) <= 5000,
      f"two machines: rank 1 placed {got - want} ns off the truth, clock "
      f"{m2.get('rank 1 @ vm2: merge_clock')}, matched {m2.get('rank 1 @ vm2: merge_matched_collectives')}")
print(f"two machines: REALTIME 1.5 s off, the collectives placed rank 1 {got - want} ns from the truth")

# ---- 6. share: the merge names each rank's GPU by its UUID; a shared copy must not ----
shared = os.path.join(tmp, "ddp2_shared.pftrace")
rep = run("share", merged, "-o", shared).stderr
ev = events(shared)
text = json.dumps(ev, ensure_ascii=False).lower()
leaks = [form for u, _ in GPUS.values() for form in (u, u[:12]) if form.lower() in text]
names = {e["args"]["name"] for e in ev if e.get("ph") == "M" and e.get("name") == "process_name"}
check(not leaks and "GPU UUIDs: replaced in" in rep and
      "rank 1 \u00b7 GPU 1: NVIDIA H200 ([gpu])" in names,
      f"share of the merged job: UUIDs left {leaks}, groups {sorted(names)}")

print(f"{checks} checks, {'failed' if fail else 'all passed'}")
sys.exit(fail)
