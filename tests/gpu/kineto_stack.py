"""kineto_stack.py OUT.json: a small real torch.profiler trace with Python stacks (with_stack),
shapes and memory events, of three training steps of an 8-layer MLP with Adam, a pinned
host-to-device copy and work on a second stream, each step in record_function("step"), for the
readers' tests (tests/data/torch_stack.kineto.json.gz). Its record_function ranges partially
overlap the Python frames that open and close them, as torch.profiler records them. Run without
cuptrace: one CUPTI client per process."""
import sys

import torch
from torch.profiler import ProfilerActivity, profile, record_function


def main():
    out = sys.argv[1]
    torch.manual_seed(0)
    layers = [torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU()) for _ in range(8)]
    model = torch.nn.Sequential(*layers).cuda()
    opt = torch.optim.Adam(model.parameters())
    side = torch.cuda.Stream()
    x, y = torch.randn(64, 256), torch.randn(64, 256)
    for _ in range(2):  # warm-up outside the profile
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x.cuda()), y.cuda()).backward()
        opt.step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True,
                 profile_memory=True, with_stack=True) as prof:
        for _ in range(3):
            with record_function("step"):
                xb, yb = x.pin_memory().cuda(non_blocking=True), y.cuda()
                opt.zero_grad()
                loss = torch.nn.functional.mse_loss(model(xb), yb)
                loss.backward()
                opt.step()
                with torch.cuda.stream(side):
                    torch.zeros(1024, 1024, device="cuda").add_(1)
                loss.item()
        torch.cuda.synchronize()
    prof.export_chrome_trace(out)
    print(f"kineto_stack: wrote {out}")


if __name__ == "__main__":
    main()
