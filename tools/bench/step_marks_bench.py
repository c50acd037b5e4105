"""What record's default optimizer.step() marks cost a training step (issue 43: at most 0.5%).

Run it under `cuptrace record` (the marks are its Python hook's; this process switches them off
and on through it, so both arms are traced alike and run in one process, on one GPU state):

  cuptrace record -o /tmp/marks.pftrace -- python3 tools/bench/step_marks_bench.py \
      [--pairs 60] [--steps 40] [--width 512] [--layers 4] [--batch 64] [--opt adam]

A small MLP training step (forward, backward, optimizer.step(), zero_grad; small on purpose, so
the host-side cost of the hooks is as large a share of a step as it gets). Blocks of --steps
steps are timed with the marks on and with them off (their hook handles removed), in pairs whose
order alternates (on-off, off-on, ...) so drift hits both arms alike; each block is followed by
torch.cuda.synchronize() and timed on the host clock. Per pair: (on - off) / off. Prints the
median time per step of each arm, the median overhead over pairs and its 95% bootstrap
confidence interval (resampling pairs).

A step's noise on a GPU machine is a few percent, so that A/B alone cannot show 0.5%. The marks'
cost is host-side only (two hook calls and an NVTX push/pop through the library), so it is also
measured directly, where the noise is small: optimizer.step() of an SGD over one CPU scalar
(nothing but the hooks and the optimizer's own Python), --direct-steps calls per block, marks on
and off in alternating pairs as above. Per pair: (on - off) / calls, the marks' cost in
microseconds per step. The target is judged on that cost's 95% interval top over the training
step's median time (marks off): met when it is at most 0.5%.
"""
import argparse
import random
import statistics
import sys
import time


def on_off_pairs(timed, pairs):
    """(timed(True), timed(False)) per pair, on first in even pairs and off first in odd ones,
    so drift hits both arms alike."""
    out = []
    for p in range(pairs):
        first = p % 2 == 0
        t1 = timed(first)
        t2 = timed(not first)
        out.append((t1, t2) if first else (t2, t1))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=60)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--opt", choices=("sgd", "adam"), default="adam")
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--boot", type=int, default=5000)
    ap.add_argument("--direct-pairs", type=int, default=40)
    ap.add_argument("--direct-steps", type=int, default=20000)
    a = ap.parse_args()

    import torch

    site = sys.modules.get("_cuptrace_site")
    if site is None or not hasattr(site, "_marks_on"):
        sys.exit("step_marks_bench: run it under cuptrace record (its Python hook switches the "
                 "marks):\n  cuptrace record -o /tmp/marks.pftrace -- python3 " +
                 " ".join(sys.argv))
    if not torch.cuda.is_available():
        sys.exit("step_marks_bench: no CUDA device")

    dev = torch.device("cuda")
    mods = []
    for _ in range(a.layers):
        mods += [torch.nn.Linear(a.width, a.width), torch.nn.ReLU()]
    model = torch.nn.Sequential(*mods).to(dev)
    opt = (torch.optim.Adam(model.parameters(), lr=1e-4) if a.opt == "adam" else
           torch.optim.SGD(model.parameters(), lr=1e-3))
    x = torch.randn(a.batch, a.width, device=dev)

    def block(n):
        for _ in range(n):
            model(x).square().mean().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

    def timed(on):
        if on:
            if not site._marks_on(torch):
                sys.exit("step_marks_bench: the marks could not be turned on")
        else:
            site._marks_off()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        block(a.steps)
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) / a.steps

    block(a.warmup)
    timed(True)
    timed(False)
    on_t, off_t, rel = [], [], []
    for on, off in on_off_pairs(timed, a.pairs):
        on_t.append(on)
        off_t.append(off)
        rel.append((on - off) / off)

    # The direct measure: the hooks' cost per optimizer.step(), on the host only.
    p0 = torch.zeros((), requires_grad=True)
    p0.grad = torch.zeros(())
    copt = torch.optim.SGD([p0], lr=0.0)

    def ctimed(on):
        if on:
            site._marks_on(torch)
        else:
            site._marks_off()
        t0 = time.perf_counter()
        for _ in range(a.direct_steps):
            copt.step()
        return (time.perf_counter() - t0) / a.direct_steps

    ctimed(True)
    ctimed(False)
    cost = [on - off for on, off in on_off_pairs(ctimed, a.direct_pairs)]
    site._marks_on(torch)  # as record left it

    rng = random.Random(43)

    def ci(xs):
        boots = sorted(statistics.median(rng.choice(xs) for _ in xs) for _ in range(a.boot))
        return statistics.median(xs), boots[int(0.025 * a.boot)], boots[int(0.975 * a.boot) - 1]

    med, lo, hi = ci(rel)
    cmed, clo, chi = ci(cost)
    step = statistics.median(off_t)
    print("step_marks_bench: %s, %d layers of %d, batch %d; %d pairs of %d-step blocks"
          % (a.opt, a.layers, a.width, a.batch, a.pairs, a.steps))
    print("  step, marks on:  %.1f us (median)" % (statistics.median(on_t) * 1e6))
    print("  step, marks off: %.1f us (median)" % (statistics.median(off_t) * 1e6))
    print("  overhead: %+.3f%% (median over pairs), 95%% CI [%+.3f%%, %+.3f%%]"
          % (100 * med, 100 * lo, 100 * hi))
    print("  marks' own cost (direct, %d pairs of %d calls): %.2f us per step, 95%% CI "
          "[%.2f, %.2f] us" % (a.direct_pairs, a.direct_steps, cmed * 1e6, clo * 1e6, chi * 1e6))
    print("  as a share of this training step: %.3f%% (CI top %.3f%%)"
          % (100 * cmed / step, 100 * chi / step))
    print("  target (<= 0.5%%): %s" % ("met" if chi / step <= 0.005 else
                                      "not shown" if cmed / step <= 0.005 else "missed"))


if __name__ == "__main__":
    main()
