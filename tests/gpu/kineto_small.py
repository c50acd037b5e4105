"""kineto_small.py OUT.json: a small real torch.profiler trace (CPU and CUDA activities) of
three training steps of a tiny MLP, each in record_function("step"), for the readers' tests
(tests/data/torch_small.kineto.json.gz). Run without cuptrace: one CUPTI client per process."""
import sys

import torch
from torch.profiler import ProfilerActivity, profile, record_function


def main():
    out = sys.argv[1]
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(32, 64, device="cuda")
    y = torch.randn(32, 8, device="cuda")
    for _ in range(2):  # warm-up outside the profile
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            with record_function("step"):
                opt.zero_grad()
                torch.nn.functional.mse_loss(model(x), y).backward()
                opt.step()
        torch.cuda.synchronize()
    prof.export_chrome_trace(out)
    print(f"kineto_small: wrote {out}")


if __name__ == "__main__":
    main()
