#!/usr/bin/env python3
"""A training loop fed by a PyTorch DataLoader with worker processes that are slower than the
GPU (each item sleeps in the worker), for tests/gpu_sample_test.sh (issue 46): the main thread
waits on the DataLoader's queue for most of each step while the GPU sits idle. With `record
--sample`, `analyze` must say that the main thread was at the loop's `for` line (the innermost
frame of this file: the DataLoader's own frames are in site-packages, the queue's in the
standard library). Prints, last:
  RESULT {"frame": "train (sample_dataloader.py:LINE)", "main_tid": ..., "wait_s": ..., "step_s": ...}
  sample_dataloader.py [STEPS]"""
import json
import os
import sys
import threading
import time

try:
    import torch
    from torch.utils.data import DataLoader, Dataset
except ImportError:
    print("SKIP: PyTorch is not installed")
    sys.exit(3)

HERE = os.path.abspath(__file__)
# the marker split in two here, so that this line does not find itself
LINE = next(no for no, text in enumerate(open(HERE), 1) if "# MARK" ": wait" in text)


class Slow(Dataset):
    def __len__(self):
        return 1 << 20

    def __getitem__(self, i):
        time.sleep(0.010)  # a slow decode, in the worker process
        return torch.full((256,), float(i % 7))


def train(steps):
    if not torch.cuda.is_available():
        print("SKIP: no CUDA device")
        sys.exit(3)
    w = torch.randn(256, 256, device="cuda")
    loader = DataLoader(Slow(), batch_size=8, num_workers=2)
    wait = 0.0
    t0 = time.perf_counter()
    it = iter(loader)
    for k in range(steps):
        a = time.perf_counter()
        batch = next(it)  # MARK: wait
        wait += time.perf_counter() - a
        x = batch.cuda(non_blocking=True)
        for _ in range(4):
            x = torch.tanh(x @ w)
        torch.cuda.synchronize()
    return wait, time.perf_counter() - t0


if __name__ == "__main__":
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    wait, total = train(steps)
    print("RESULT " + json.dumps({"frame": "train (%s:%d)" % (os.path.basename(HERE), LINE),
                                  "main_tid": threading.get_native_id(),
                                  "wait_s": wait, "step_s": total}))
