"""A 2-rank DistributedDataParallel job over NCCL (two GPUs) with one slow rank, for
tests/gpu_planted_test.sh; started by torchrun --nproc-per-node 2.

  torchrun --nproc-per-node 2 planted_ddp.py [--nvtx] [--steps N]

Rank 1 is the straggler twice: its host stalls 60 ms before step HOST_STEP (a slow data loader),
and it runs about 60 ms of extra GEMMs in step GPU_STEP. Rank 0 waits for it in the gradient
all-reduce both times. analyze must name rank 1, and those two steps, and nothing else. As in
planted.py, each rank runs at most two steps ahead of its GPU, so that a host stall shows.
"""
import argparse
import os
import time

import torch
import torch.distributed as dist

HOST_STEP, GPU_STEP = 15, 30


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--nvtx", action="store_true")
    p.add_argument("--steps", type=int, default=45)
    a = p.parse_args()
    local = int(os.environ.get("LOCAL_RANK", "0"))
    dev = torch.device("cuda", local % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", device_id=dev)
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(2048, 4096), torch.nn.ReLU(),
                                torch.nn.Linear(4096, 4096), torch.nn.ReLU(),
                                torch.nn.Linear(4096, 10)).to(dev)
    model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[dev.index])
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(4096, 2048, device=dev)
    big = torch.randn(4096, 4096, device=dev)
    done = []
    for step in range(a.steps):
        if len(done) >= 2:
            done.pop(0).synchronize()
        if a.nvtx:
            torch.cuda.nvtx.range_push(f"step {step}")
        if rank == 1 and step == HOST_STEP:
            time.sleep(0.06)
        if rank == 1 and step == GPU_STEP:
            for _ in range(24):
                big = (big @ big).tanh_()
        loss = model(x).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if a.nvtx:
            torch.cuda.nvtx.range_pop()
        ev = torch.cuda.Event()
        ev.record()
        done.append(ev)
    torch.cuda.synchronize()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
