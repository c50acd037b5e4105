"""A small PyTorch program with known call sites, for tests/gpu_stacks_test.sh: each CUDA call
below sits on a line marked "# SITE: name"; the test finds the kernel slices launched there by
the innermost frame of this file in each launch's "stack" argument. Stacks paused with
cuptrace_stacks(0) (the C API, reached in the library `cuptrace record` loaded): the four neg
kernels launched meanwhile carry none, the abs kernel after cuptrace_stacks(1) does."""
import ctypes
import os

import torch

x = torch.ones(1 << 16, device="cuda")  # SITE: alloc-fill


def helper(t):
    return t * 3.0  # SITE: helper


def scale(t):
    return helper(t)  # SITE: via-helper


add = lambda t: t + 1.0  # SITE: lambda

for _ in range(3):
    y = x * 2.0  # SITE: direct
    z = scale(y)
    w = add(z)
torch.cuda.synchronize()  # SITE: sync

lib = ctypes.CDLL(os.environ["CUDA_INJECTION64_PATH"])
if lib.cuptrace_stacks(0) != 0:
    raise SystemExit("cuptrace_stacks(0) failed")
for _ in range(4):
    n = torch.neg(x)
torch.cuda.synchronize()
if lib.cuptrace_stacks(1) != 0:
    raise SystemExit("cuptrace_stacks(1) failed")
m = torch.abs(n)  # SITE: resumed
print(float(w.sum()))  # SITE: sum-item
