"""Training and inference loops with one planted problem each, for tests/gpu_planted_test.sh.

  python3 planted.py CASE [--nvtx] [--steps N]

Every loop runs as real loops run: asynchronously, with no synchronize per step (only the
`item` case waits, which is its problem). --nvtx wraps each step in an NVTX range "step N"; with
neither --nvtx nor `record --pytorch` the trace has no marks at all, and analyze must find the
steps from the optimizer hook or from the GPU work itself.

The model is GPU-bound on purpose (a batch of 2048 through 4096-wide layers: a few ms of GPU
work per step on an H100, more than the host's 0.7 ms of batch preparation and its launches), so
a clean loop keeps the GPU busy and each planted problem stands out against it. The host runs at
most two steps ahead (it waits for the end of step i-2 before it starts step i, as a bounded
prefetch queue does): without a bound the host runs up to CUDA's launch queue ahead, and a
host stall of 80 ms is then absorbed by the queue and slows nothing. Cases (what analyze must answer):

  clean       nothing: no severe finding
  pageable    a 16 MiB host-to-device copy from pageable memory every step: pageable_copy
  item        loss.item() every step: item_copy (the host waits for the GPU each step)
  tiny        3000 one-element kernels from a Python loop every step: tiny_kernels
  alloc       a 64 MiB buffer allocated and given back every step: alloc_steady
  loader      a slow data loader: the host sleeps 10 ms before every step (more than the GPU
              step): GPU idle while the host is busy outside CUDA
  cpuprep     CPU preprocessing every step (normalizing a batch on the CPU, about 6 ms):
              likewise, host busy outside CUDA
  slowhost    one step (SLOW_STEP) starts 80 ms late (a host stall): that step alone is an
              outlier, its cause a host gap
  slowgpu     one step (SLOW_STEP) runs about 60 ms of extra GEMMs: that step alone is an
              outlier, its cause GPU work longer than the median
  graph       a CUDA-graph inference loop (the forward pass captured once, replayed each
              step with a new batch copied in from pinned memory): clean, steps found
"""
import argparse
import sys
import time

import torch

SLOW_STEP = 25


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(2048, 4096), torch.nn.ReLU(),
                               torch.nn.Linear(4096, 4096), torch.nn.ReLU(),
                               torch.nn.Linear(4096, 10)).cuda()


def train(case, steps, nvtx):
    m = mlp()
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    x_host = torch.randn(2048, 2048)  # pageable, 16 MiB
    x_pinned = x_host.pin_memory()
    done = []  # one event per step: the host waits for step i-2 before it starts step i
    big = torch.randn(4096, 4096, device="cuda") if case == "slowgpu" else None
    raw = torch.randn(8192, 2048) if case == "cpuprep" else None
    for step in range(steps):
        if len(done) >= 2:
            done.pop(0).synchronize()
        if nvtx:
            torch.cuda.nvtx.range_push(f"step {step}")
        time.sleep(0.0007)  # collating the batch: hidden behind the GPU's work in a clean loop
        if case == "loader":
            time.sleep(0.010)  # the next batch is not ready
        if case == "slowhost" and step == SLOW_STEP:
            time.sleep(0.08)
        if case == "cpuprep":
            # Normalize a batch on the CPU: tens of ms of host work outside CUDA.
            b = (raw - raw.mean(dim=0)) / (raw.std(dim=0) + 1e-5)
            x_pinned.copy_(b[:2048])
        x = (x_host if case == "pageable" else x_pinned).cuda(non_blocking=True)
        if case == "alloc":
            # A 64 MiB buffer is a segment of its own; emptied from the cache at the step's
            # end, it is a cudaMalloc and a cudaFree every step.
            buf = torch.empty(64 << 20, dtype=torch.uint8, device="cuda").zero_()
            x = x + buf[:1].float()
            del buf
            torch.cuda.empty_cache()
        loss = m(x).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if case == "item":
            print(loss.item(), end="\r", file=sys.stderr)
        if case == "tiny":
            t = torch.zeros(1, device="cuda")
            for _ in range(3000):
                t += 1
        if case == "slowgpu" and step == SLOW_STEP:
            for _ in range(24):  # about 60 ms of GEMMs on an H100
                big = (big @ big).tanh_()
        if nvtx:
            torch.cuda.nvtx.range_pop()
        ev = torch.cuda.Event()
        ev.record()
        done.append(ev)
    torch.cuda.synchronize()


def graph_loop(steps, nvtx):
    m = mlp().eval()
    batches = [torch.randn(2048, 2048).pin_memory() for _ in range(4)]
    static_x = torch.empty(2048, 2048, device="cuda")
    out = torch.empty(2048, 10, device="cuda")
    with torch.no_grad():
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):  # warm-up on a side stream, as CUDA graphs require
            for _ in range(3):
                m(static_x)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            static_y = m(static_x)
        for step in range(steps):
            if nvtx:
                torch.cuda.nvtx.range_push(f"step {step}")
            static_x.copy_(batches[step % 4], non_blocking=True)
            g.replay()
            out.copy_(static_y)
            if nvtx:
                torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("case", choices=["clean", "pageable", "item", "tiny", "alloc", "loader",
                                    "cpuprep", "slowhost", "slowgpu", "graph"])
    p.add_argument("--nvtx", action="store_true", help="an NVTX range 'step N' per step")
    p.add_argument("--steps", type=int, default=0, help="default: 120 clean/graph, else 50")
    a = p.parse_args()
    steps = a.steps or (120 if a.case in ("clean", "graph") else 50)
    if a.case == "graph":
        graph_loop(steps, a.nvtx)
    else:
        train(a.case, steps, a.nvtx)
    print(f"planted {a.case}: {steps} steps", file=sys.stderr)


if __name__ == "__main__":
    main()
