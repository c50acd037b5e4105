"""A small PyTorch training loop for tests/gpu_window_test.sh: --steps, trigger --steps and
torchrun jobs with --on-demand.

  python3 window_torch.py --steps N [--mark]   N training steps; --mark: each step is also an
                                               NVTX range "teststep" (push before zero_grad,
                                               pop after optimizer.step())
  python3 window_torch.py --spin SECONDS       steps until SECONDS passed (prints "ready" once
                                               the first step is done: CUDA is up)
"""
import argparse
import sys
import time

import torch
import torch.nn as nn


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--spin", type=float, default=0)
    ap.add_argument("--mark", action="store_true")
    a = ap.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(64, 256, device="cuda")
    y = torch.randint(0, 10, (64,), device="cuda")
    loss_fn = nn.CrossEntropyLoss()

    def step():
        if a.mark:
            torch.cuda.nvtx.range_push("teststep")
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        if a.mark:
            torch.cuda.nvtx.range_pop()

    if a.steps:
        for _ in range(a.steps):
            step()
    elif a.spin:
        t0 = time.time()
        step()
        print("ready", flush=True)
        while time.time() - t0 < a.spin:
            step()
            time.sleep(0.01)


if __name__ == "__main__":
    sys.exit(main())
