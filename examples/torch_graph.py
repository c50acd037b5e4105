"""A PyTorch CUDA graph replayed many times: a million kernels with no launch call each.

  python3 torch_graph.py [--nodes N] [--replays R]     (trace with: cuptrace record -- ...)

The graph is N elementwise kernels in a chain, captured once with torch.cuda.graph and replayed
R times, so the trace holds N x R graph kernels (plus the few of the warm-up), each linked by a
flow to the cudaGraphLaunch that ran it. tools/scripts/gpu_session.sh checks exactly that, and README's
size benchmark quotes its bytes per kernel.
"""
import argparse

import torch


def chain(x, nodes):
    y = x
    for _ in range(nodes):
        y = y * 1.0001
    return y


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--replays", type=int, default=2000)
    a = ap.parse_args()
    x = torch.ones(1024, device="cuda")
    # Warm up on a side stream, as torch.cuda.graph requires before capture.
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        chain(x, a.nodes)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = chain(x, a.nodes)
    for _ in range(a.replays):
        g.replay()
    torch.cuda.synchronize()
    want = 1.0001 ** a.nodes
    if abs(float(y[0]) - want) > 1e-3 * want:
        raise SystemExit("torch_graph: wrong result %f, want %f" % (float(y[0]), want))
    print("torch_graph: %d nodes x %d replays = %d graph kernels"
          % (a.nodes, a.replays, a.nodes * a.replays))


if __name__ == "__main__":
    main()
