#!/usr/bin/env python3
"""Where a CUDA graph replay's time goes under a tracer: host time inside cudaGraphLaunch
against the replay's wall time, with the GPU's and the host's clocks sampled beside it.

    tools/bench/graph_host.py BUILD [--rounds 10] [--nodes 50] [--replays 40000] [--blocks 20]
                              [--configs none,floor,cuptrace,floor_graphs,cuptrace_graphs]

Runs BUILD/examples/graph_replay with GRAPH_REPLAY_DETAIL=1 (each block's start and the host
time per replay spent in cudaGraphLaunch) once per configuration per round, in rotated order,
while nvidia-smi samples the SM clock, power and throttle reasons every 50 ms. Prints, per
configuration, the blocks' wall time and host time per replay (median, range) and how many
blocks were host-bound (host time within 3% of the wall time: the GPU waited for the host),
then the SM clocks and throttle reasons seen during the traced blocks. README "CUDA graphs".
"""
import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_bench  # noqa: E402  (the tracer configurations, shared)


def run_one(build, cfg, nodes, replays, blocks, tmp):
    cmd = [os.path.join(build, "examples", "graph_replay"), str(nodes), str(replays),
           str(blocks)]
    env = dict(os.environ, GRAPH_REPLAY_DETAIL="1")
    cmd, _ = torch_bench.under_tracer(cfg, build, cmd, env, tmp)
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    if p.returncode or not lines:
        print("%s failed (exit %d): %s" % (cfg, p.returncode, p.stderr[-300:]), file=sys.stderr)
        return None
    return json.loads(lines[-1])


def read_smi(path):
    """(unix time, SM MHz, power W, throttle reasons) per sample; nvidia-smi's time is local."""
    out = []
    for line in open(path, errors="replace"):
        f = [x.strip() for x in line.split(",")]
        try:
            t = datetime.datetime.strptime(f[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
            out.append((t, int(f[1]), float(f[2]), f[3]))
        except (ValueError, IndexError):
            continue
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--nodes", type=int, default=50)
    ap.add_argument("--replays", type=int, default=40000)
    ap.add_argument("--blocks", type=int, default=20)
    ap.add_argument("--configs", default="none,floor,cuptrace,floor_graphs,cuptrace_graphs")
    a = ap.parse_args()
    if not shutil.which("nvidia-smi"):
        print("graph_host: no nvidia-smi (no GPU): nothing to measure")
        return 0
    configs = a.configs.split(",")
    tmp = tempfile.mkdtemp(prefix="graph_host.")
    smi_path = os.path.join(tmp, "smi.csv")
    q = "timestamp,clocks.sm,power.draw,clocks_event_reasons.active"
    if subprocess.run(["nvidia-smi", "--query-gpu=" + q, "--format=csv,noheader"],
                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode:
        q = "timestamp,clocks.sm,power.draw,clocks_throttle_reasons.active"
    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=" + q, "--format=csv,noheader,nounits",
                            "-lms", "50"], stdout=open(smi_path, "w"), stderr=subprocess.DEVNULL)
    res = {c: [] for c in configs}
    try:
        for r in range(a.rounds):
            k = r % len(configs)
            for cfg in configs[k:] + configs[:k]:
                out = run_one(a.build, cfg, a.nodes, a.replays, a.blocks, tmp)
                if out:
                    res[cfg].append(out)
    finally:
        smi.terminate()
        smi.wait()
    samples = read_smi(smi_path)
    print("graph_host: %d nodes, %d replays in %d blocks, %d rounds" % (
        a.nodes, a.replays, a.blocks, a.rounds))
    print("%-16s %6s %24s %24s %12s" % ("configuration", "blocks", "wall per replay us",
                                         "host in launch us", "host-bound"))
    traced_clocks, reasons = [], set()
    for cfg in configs:
        blocks = [(w, h, at, w * (a.replays // a.blocks)) for o in res[cfg]
                  for w, h, at in zip(o["blocks_s"], o.get("in_launch_s", []),
                                      o.get("block_at_unix_s", []))]
        if not blocks:
            continue
        ws = [b[0] * 1e6 for b in blocks]
        hs = [b[1] * 1e6 for b in blocks]
        bound = sum(1 for b in blocks if b[1] >= 0.97 * b[0])
        print("%-16s %6d %8.1f [%6.1f, %6.1f] %8.1f [%6.1f, %6.1f] %7d/%d" % (
            cfg, len(blocks), statistics.median(ws), min(ws), max(ws), statistics.median(hs),
            min(hs), max(hs), bound, len(blocks)))
        if cfg != "none":
            for _, _, at, dur in blocks:
                for t, mhz, _, why in samples:
                    if at <= t <= at + dur:
                        traced_clocks.append(mhz)
                        reasons.add(why)
    if traced_clocks:
        print("SM clock during traced blocks: %d samples, %d to %d MHz; throttle reasons seen: %s"
              % (len(traced_clocks), min(traced_clocks), max(traced_clocks),
                 ", ".join(sorted(reasons))))
    else:
        print("no clock samples fell in the traced blocks")
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
