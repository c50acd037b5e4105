"""A small PyTorch program with known call sites, for tests/gpu_stacks_test.sh: each CUDA call
below sits on a line marked "# SITE: name"; the test finds the kernel slices launched there by
the innermost frame of this file in each launch's "stack" argument."""
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
print(float(w.sum()))  # SITE: sum-item
