"""A small data-parallel training loop for tests/gpu_ranks_test.sh, started by torchrun.

With two GPUs or more: DistributedDataParallel over NCCL, one gradient all-reduce per step
(a 2-layer MLP whose 8 MB of gradients fit one bucket). With one GPU (two ranks cannot share a
GPU in NCCL; DDP_BACKEND=nccl forces NCCL for a one-rank job): every rank computes on GPU 0 and all-reduces its loss over gloo on the CPU, so
that recording under a launcher is still tested. Each step is an NVTX range "step". Prints one
line per rank on stderr: "rank R backend B steps N".
"""
import os
import sys

import torch
import torch.distributed as dist

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
ngpu = torch.cuda.device_count()
# DDP_BACKEND=nccl forces NCCL (a one-rank job on one GPU still runs NCCL's kernels)
backend = os.environ.get("DDP_BACKEND") or ("nccl" if ngpu >= 2 else "gloo")
local = int(os.environ.get("LOCAL_RANK", "0"))
dev = torch.device("cuda", local % ngpu)
torch.cuda.set_device(dev)
dist.init_process_group(backend, device_id=dev if backend == "nccl" else None)
rank = dist.get_rank()
torch.manual_seed(rank)
model = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
                            torch.nn.Linear(1024, 1024)).to(dev)
if backend == "nccl":
    model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[dev.index])
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(steps):
    torch.cuda.nvtx.range_push("step")
    x = torch.randn(256, 1024, device=dev)
    loss = model(x).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if backend == "gloo":
        t = loss.detach().cpu()
        dist.all_reduce(t)
    torch.cuda.nvtx.range_pop()
torch.cuda.synchronize()
dist.barrier()
dist.destroy_process_group()
print(f"rank {rank} backend {backend} steps {steps}", file=sys.stderr)
