"""One benchmark process: a PyTorch workload timed in-process, optionally under torch.profiler.

  python3 torch_workload.py --workload add|transformer [--steps N] [--warmup N]
                            [--profile cuda|cpu_cuda --trace-out FILE.json]
                            [--ab-stacks PAIRS [--ab-block STEPS]]

Prints one JSON line: the time per step of the timed loop (after warm-up, GPU synchronized at
both ends), and under torch.profiler the kernels it saw and its trace's size, raw and gzipped.
Run by torch_bench.py; under cuptrace the tracer is outside (cuptrace record -- python3 ...).

--ab-stacks (under `cuptrace record --stacks ...`): what stacks cost, measured inside one
process, where the shared machine's process-to-process spread (±10-20%) cannot reach: PAIRS
pairs of blocks of --ab-block steps, stacks on in one block of a pair and paused in the other
(cuptrace_stacks(0), which switches CUPTI's callbacks for those calls off: a paused block costs
what plain `record` costs), the order alternating pair by pair (on-off, off-on, ...) so a drift
in the machine's speed favours neither. res["ab"]: per pair [on, off] seconds per step.

Workloads:
  add          a = a + b on 4096 floats: one elementwise kernel per step, launch-bound
  transformer  a small transformer encoder's training step (forward, backward, AdamW), AMP
               (fp16 autocast with a GradScaler): a few hundred kernels per step
  graph        a CUDA graph of 50 kernels replayed once per step (= graph50)
  graph10/50   a CUDA graph of 10 or 50 elementwise kernels replayed once per step
  compile_ro   a 4-layer MLP inference step under torch.compile(mode="reduce-overhead")
  ddp          (under torchrun, two GPUs) a DistributedDataParallel training step over NCCL:
               a 4-layer MLP, SGD, one gradient all-reduce, torch.cuda.synchronize() at its end
               (the job of issue 45); rank 0 prints the JSON line, the others nothing

--ab-kinds SPEC;SPEC;... (under the CUPTI floor, CUDA_INJECTION64_PATH=libcupti_floor.so):
what each part of CUPTI's recording costs inside one process: per pair and per SPEC, a block
with the floor's default set and one with SPEC switched off (cuptrace_floor_ab: "k5" a kind,
"rt~Launch" the runtime API records of calls named so; tools/bench/kinds_ab.py), which first
alternating pair by pair. res["abk"][SPEC]: per pair [default, SPEC off] seconds per step.
Under torchrun every rank runs the same schedule, so the ranks switch together.
"""
import argparse
import gzip
import json
import os
import statistics
import sys
import time

import torch
import torch.nn as nn


def make_add():
    a = torch.zeros(4096, device="cuda")
    b = torch.ones(4096, device="cuda")
    state = {"a": a}

    def step():
        state["a"] = state["a"] + b

    return step


def make_transformer():
    torch.manual_seed(0)
    d, heads, layers, batch, seq, vocab = 256, 4, 2, 16, 128, 1000
    emb = nn.Embedding(vocab, d)
    enc = nn.TransformerEncoder(
        nn.TransformerEncoderLayer(d, heads, dim_feedforward=4 * d, batch_first=True),
        layers)
    head = nn.Linear(d, vocab)
    model = nn.Sequential(emb, enc, head).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    scaler = torch.amp.GradScaler("cuda")
    x = torch.randint(0, vocab, (batch, seq), device="cuda")
    y = torch.randint(0, vocab, (batch, seq), device="cuda")
    loss_fn = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16):
            out = model(x)
            loss = loss_fn(out.reshape(-1, vocab), y.reshape(-1))
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    return step


def make_graph(nodes=50):
    """A CUDA graph of `nodes` elementwise kernels, replayed once per step: kernels without a
    launch call each (the shape of an inference decode loop)."""
    x = torch.ones(1024, device="cuda")

    def chain():
        y = x
        for _ in range(nodes):
            y = y * 1.0001
        return y

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        chain()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        chain()
    return g.replay


def make_compile_ro():
    """A small MLP's inference step compiled with torch.compile(mode="reduce-overhead"):
    Inductor's Triton kernels replayed as a CUDA graph (how compiled inference runs)."""
    torch.manual_seed(0)
    d = 512
    model = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(d, d), nn.GELU())])
    model = model.cuda().eval()
    x = torch.randn(32, d, device="cuda")
    f = torch.compile(model, mode="reduce-overhead")

    def step():
        with torch.no_grad():
            f(x)

    return step


def make_ddp():
    """One rank of a 2-GPU DistributedDataParallel job (torchrun sets the rank)."""
    import torch.distributed as dist
    local = int(os.environ.get("LOCAL_RANK", "0"))
    dev = torch.device("cuda", local)
    torch.cuda.set_device(dev)
    if not dist.is_initialized():
        dist.init_process_group("nccl", device_id=dev)
    torch.manual_seed(0)
    d = 1024
    model = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(d, d), nn.ReLU())]).to(dev)
    model = nn.parallel.DistributedDataParallel(model, device_ids=[local])
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(256, d, device=dev)

    def step():
        opt.zero_grad(set_to_none=True)
        model(x).square().mean().backward()
        opt.step()
        torch.cuda.synchronize()

    return step


def rank0():
    return os.environ.get("RANK", "0") == "0"


WORKLOADS = {"add": (make_add, 20000, 200), "ddp": (make_ddp, 300, 30), "transformer": (make_transformer, 30, 5),
             "graph": (make_graph, 2000, 50),
             "graph10": (lambda: make_graph(10), 2000, 50),
             "graph50": (lambda: make_graph(50), 2000, 50),
             "compile_ro": (make_compile_ro, 2000, 50)}


def cpu_probe(n=200000):
    """Seconds for a fixed pure-Python loop on this thread: how fast the CPU runs just now
    (shared machines change speed for seconds at a time; a block's step time against its
    probe tells the machine's state from the tracer's cost)."""
    t0 = time.perf_counter()
    x = 0
    for i in range(n):
        x += i & 7
    return time.perf_counter() - t0


def block_time(step, per):
    """Seconds per step of `per` steps, the GPU synchronized at the end."""
    t0 = time.perf_counter()
    for _ in range(per):
        step()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / per


def alternating(i, a, b):
    """a() then b() in even pairs, b() then a() in odd ones, so a drift in the machine's speed
    favours neither: returns (a's result, b's result)."""
    if i % 2 == 0:
        x = a()
        return x, b()
    y = b()
    return a(), y


def timed(step, steps, warmup, blocks=5, res=None):
    """Time per step: the median over `blocks` equal blocks of the loop, each synchronized at
    both ends, so a passing stall of the shared machine spoils one block, not the run. The
    blocks' times go to res["blocks_s"] (how much a process varies within itself)."""
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    per = max(1, steps // blocks)
    times, probes = [], []
    for _ in range(blocks):
        probes.append(cpu_probe())
        times.append(block_time(step, per))
    if res is not None:
        res["blocks_s"] = list(times)
        res["probe_s"] = probes
    times.sort()
    return times[len(times) // 2]


def timed_ab(step, pairs, per, warmup, res):
    """--ab-stacks: the time per step with call stacks on and paused, in adjacent blocks."""
    import ctypes
    lib = ctypes.CDLL(os.environ["CUDA_INJECTION64_PATH"])  # the library record loaded
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()

    def block(on):
        if lib.cuptrace_stacks(1 if on else 0) != 0:
            raise SystemExit("cuptrace_stacks failed: is this run under record --stacks or --sample?")
        return block_time(step, per)

    ab = [list(alternating(i, lambda: block(True), lambda: block(False)))
          for i in range(pairs)]
    lib.cuptrace_stacks(1)
    res["ab"] = ab
    return sorted(x[1] for x in ab)[len(ab) // 2]


def timed_ab_kinds(step, specs, pairs, per, warmup, res):
    """--ab-kinds: per pair and spec, a block with the floor's default set and one with spec
    switched off, adjacent in time (the order alternating pair by pair)."""
    import ctypes
    lib = ctypes.CDLL(os.environ["CUDA_INJECTION64_PATH"])  # the library the driver loaded
    # the floor's switch, or cuptrace's own (src/inject/collect_bench.c) under `record`
    ab = getattr(lib, "cuptrace_floor_ab", None) or lib.cuptrace_bench_ab
    ab.argtypes = [ctypes.c_char_p]
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()

    def block(spec):
        if ab(spec.encode()) < 0:
            raise SystemExit("the in-process switch refused %r" % spec)
        return block_time(step, per)

    abk = {s: [] for s in specs}
    for i in range(pairs):
        for j in range(len(specs)):
            s = specs[(i + j) % len(specs)]
            # "A>B": the pair's blocks are A and B instead of "" and the spec
            first, second = s.split(">", 1) if ">" in s else ("", s)
            abk[s].append(list(alternating(i, lambda: block(first), lambda: block(second))))
    ab(b"")
    res["abk"] = abk
    return statistics.median(x[0] for v in abk.values() for x in v)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--workload", choices=sorted(WORKLOADS), required=True)
    p.add_argument("--steps", type=int)
    p.add_argument("--warmup", type=int)
    p.add_argument("--profile", choices=["cuda", "cpu_cuda", "cpu_cuda_stack"])
    p.add_argument("--trace-out")
    p.add_argument("--pin-main", type=int, metavar="CPU",
                   help="after building the model, run this (the stepping) thread on CPU alone; "
                   "threads started earlier (the tracer's, CUDA's) keep the process's CPUs")
    p.add_argument("--ab-stacks", type=int, metavar="PAIRS",
                   help="under record --stacks: PAIRS pairs of blocks, stacks on and paused")
    p.add_argument("--ab-block", type=int, default=3, metavar="STEPS",
                   help="steps per block of --ab-stacks and --ab-kinds (default 3)")
    p.add_argument("--ab-kinds", metavar="SPEC;SPEC;...",
                   help="under the CUPTI floor: blocks with each SPEC switched off, against "
                   "the default set")
    p.add_argument("--ab-pairs", type=int, default=20, help="pairs of --ab-kinds (default 20)")
    a = p.parse_args()
    make, steps, warmup = WORKLOADS[a.workload]
    steps = a.steps or steps
    warmup = a.warmup if a.warmup is not None else warmup
    res = {"workload": a.workload, "steps": steps}

    def run():
        step = make()
        if a.pin_main is not None:
            os.sched_setaffinity(0, {a.pin_main})  # 0: this thread only, on Linux
        if a.ab_kinds:
            res["step_s"] = timed_ab_kinds(step, a.ab_kinds.split(";"), a.ab_pairs,
                                           a.ab_block, warmup, res)
        elif a.ab_stacks:
            res["step_s"] = timed_ab(step, a.ab_stacks, a.ab_block, warmup, res)
        else:
            res["step_s"] = timed(step, steps, warmup, res=res)

    if not a.profile:
        run()
        if rank0():
            print(json.dumps(res))
        if a.workload == "ddp":
            torch.distributed.destroy_process_group()
        return 0
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CUDA]
    if a.profile.startswith("cpu_cuda"):
        acts.insert(0, ProfilerActivity.CPU)
    # The model is built inside the profiler too, so it sees all the work cuptrace sees.
    with profile(activities=acts, with_stack=a.profile.endswith("_stack")) as prof:
        run()
    t0 = time.perf_counter()
    prof.export_chrome_trace(a.trace_out)
    res["export_s"] = time.perf_counter() - t0
    with open(a.trace_out, "rb") as f:
        raw = f.read()
    res["bytes_raw"] = len(raw)
    res["bytes_gz"] = len(gzip.compress(raw, 6))
    ev = json.loads(raw)["traceEvents"]
    res["kernels"] = sum(1 for e in ev if e.get("ph") == "X" and e.get("cat") == "kernel")
    os.unlink(a.trace_out)
    if rank0():
        print(json.dumps(res))
    if a.workload == "ddp":
        torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
