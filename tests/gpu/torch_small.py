"""A tiny PyTorch program for tests/gpu_pytorch_test.sh: N steps of a Linear layer's forward and
backward plus one explicit torch.mm each, then an SGD step, so every step has known ops, modules
and one optimizer.step().
  torch_small.py N [--bad-device]   (--bad-device: one failing cudaSetDevice, through CuPy)"""
import sys

import torch

n = int(sys.argv[1])
if "--bad-device" in sys.argv:
    import cupy

    try:
        cupy.cuda.runtime.setDevice(9999)
    except Exception:
        pass
lin = torch.nn.Linear(64, 32).cuda()
opt = torch.optim.SGD(lin.parameters(), lr=0.01)
a = torch.randn(16, 64, device="cuda")
b = torch.randn(64, 64, device="cuda")
for _ in range(n):
    h = torch.mm(a, b)
    lin(h).sum().backward()
    opt.step()
    opt.zero_grad()
torch.cuda.synchronize()
print("done")
