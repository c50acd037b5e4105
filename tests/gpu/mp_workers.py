"""mp_workers.py spawn|fork N: N multiprocessing workers, CUDA (PyTorch) only in the workers.
With "fork" the workers end through os._exit, which skips atexit; with "spawn" they are fresh
interpreters. tests/gpu_drills_test.sh expects one complete trace per worker, with the same
kernels in each."""
import multiprocessing as mp
import sys


def work(i):
    import torch

    x = torch.zeros(1024, device="cuda")
    for _ in range(5):
        x.add_(1)
    torch.cuda.synchronize()
    assert float(x[0]) == 5.0


def main():
    how, n = sys.argv[1], int(sys.argv[2])
    ctx = mp.get_context(how)
    procs = [ctx.Process(target=work, args=(i,)) for i in range(n)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    bad = [p.exitcode for p in procs if p.exitcode != 0]
    print(f"mp_workers {how}: {n} workers, {len(bad)} failed")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
