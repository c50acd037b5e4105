"""A real PyTorch training loop (small CNN: forward, backward, SGD step) for tracing.

  python3 torch_train.py [--steps N]                 run it (trace with: cuptrace record -- ...)
  python3 torch_train.py --profile out.json [...]    the same work under torch.profiler (run it
                                                     in its own process: one CUPTI client each);
                                                     prints the kernel count and total time

NVTX: each step is an NVTX range "step N" (torch.cuda.nvtx), and --emit-nvtx wraps the loop in
torch.autograd.profiler.emit_nvtx() so every op gets a range.
"""
import argparse
import json
import sys

import torch
import torch.nn as nn


def build():
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 8 * 8, 256), nn.ReLU(), nn.Linear(256, 10),
    ).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(64, 3, 32, 32, device="cuda")
    y = torch.randint(0, 10, (64,), device="cuda")
    return model, opt, x, y


def run(steps, emit_nvtx):
    model, opt, x, y = build()
    loss_fn = nn.CrossEntropyLoss()
    ctx = torch.autograd.profiler.emit_nvtx() if emit_nvtx else None
    if ctx:
        ctx.__enter__()
    for i in range(steps):
        torch.cuda.nvtx.range_push(f"step {i}")
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    if ctx:
        ctx.__exit__(None, None, None)
    return float(loss)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--profile", help="run under torch.profiler and write its JSON here")
    p.add_argument("--emit-nvtx", action="store_true")
    a = p.parse_args()
    if not a.profile:
        print(f"loss {run(a.steps, a.emit_nvtx):.4f}")
        return 0
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        run(a.steps, a.emit_nvtx)
    prof.export_chrome_trace(a.profile)
    with open(a.profile) as f:
        ev = json.load(f)["traceEvents"]
    k = [e for e in ev if e.get("ph") == "X" and e.get("cat") == "kernel"]
    print(json.dumps({"kernels": len(k), "kernel_us": sum(e["dur"] for e in k),
                      "memcpy": sum(1 for e in ev if e.get("cat") == "gpu_memcpy"),
                      "memset": sum(1 for e in ev if e.get("cat") == "gpu_memset")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
