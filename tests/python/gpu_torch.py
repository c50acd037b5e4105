"""The GPU side of tests/gpu_python_test.sh: small PyTorch loops traced through the cuptrace
package. Each mode prints one line `RESULT {json}` for the script to compare (counts come from
the package's result and are checked there against numbers computed elsewhere: torch.profiler's
own count, `cuptrace record --steps`, check_trace); a failed assertion exits non-zero with a
message.

  profile OUT N            torch.profiler alone around N steps (after the warm-up): its own
                           count of kernels, the independent number the others are held to
  plain N                  the loop alone, N steps (run under `cuptrace record --steps K,M`)
  trace OUT N              `with cuptrace.trace(OUT)` around N steps (after the warm-up), each
                           in `cuptrace.range("step")`
  early OUT N              the same, but started before CUDA: the model is made inside
  window OUT N A B         start(OUT, capture_range="range:hot"): steps A..B inside
                           `cuptrace.range("hot")`, the only ones the file may hold
  late OUT N K M           CUDA initialised and used first, then cuptrace imported; start()
                           before step K, stop() after step K+M-1: the steps record --steps K,M
                           takes
  conflict OUT             torch.profiler and cuptrace refuse each other (ProfilerConflict)
  graphs OUT               CUDA graph capture and replay: the same numbers traced and not
  compile OUT              torch.compile: the same numbers traced and not; Triton's kernels
                           in the trace
  under_record N           run by `cuptrace record`: cuptrace_end refuses record's session
                           (-EPERM), cuptrace.range reaches record's trace
  notebook OUT             what a notebook does: CUDA used first, then cuptrace imported,
                           start/stop, the result's table
  lightning OUT K M        LightningCallback, steps (K, M) (OUT "-": the loop alone, for record)
  transformers OUT K M     TransformersCallback, steps (K, M) (likewise)
"""
import ctypes
import errno
import json
import os
import sys
import threading

WARMUP = 3


def model_and_data(torch):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 16)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(64, 256, device="cuda")
    return model, opt, x


def one_step(model, opt, x):
    opt.zero_grad(set_to_none=True)
    model(x).square().mean().backward()
    opt.step()


def warm(torch, model, opt, x):
    for _ in range(WARMUP):
        one_step(model, opt, x)
    torch.cuda.synchronize()


def report(result, **extra):
    assert result is not None and result.complete, "no finished trace: %r" % (result,)
    assert os.path.isfile(result.path), "%s is not there" % result.path
    out = {"path": result.path, "kernels": result.counts.get("kernel", 0),
           "analyze_kernels": result.analyze()["counts"]["kernels"],
           "tid": threading.get_native_id()}
    out.update(extra)
    print("RESULT " + json.dumps(out), flush=True)


def main(argv):
    mode = argv[1]
    if mode in ("late", "plain", "notebook"):
        # CUDA first, as a notebook that ran cells before: cuptrace is not imported yet.
        assert "cuptrace" not in sys.modules
        import torch
        model, opt, x = model_and_data(torch)  # CUDA is up from here
        torch.cuda.synchronize()
        if mode == "plain":
            for _ in range(int(argv[2])):
                one_step(model, opt, x)
            torch.cuda.synchronize()
            return
        if mode == "notebook":
            import cuptrace
            out = argv[2]
            cuptrace.start(out)
            for _ in range(10):
                y = torch.relu(x @ x.T)
            torch.cuda.synchronize()
            r = cuptrace.stop()
            html = r._repr_html_()
            assert "<table>" in html and "kernel" in html, html[:2000]
            assert r.counts.get("kernel", 0) >= 10, r.counts
            del y
            return report(r)
        out, n, k, m = argv[2], int(argv[3]), int(argv[4]), int(argv[5])
        import cuptrace
        for i in range(1, n + 1):
            if i == k:
                cuptrace.start(out)
            one_step(model, opt, x)
            if i == k + m - 1:
                torch.cuda.synchronize()
                r = cuptrace.stop()
        return report(r)

    import cuptrace  # before torch and CUDA
    import torch
    if mode == "profile":
        out, n = argv[2], int(argv[3])
        model, opt, x = model_and_data(torch)
        warm(torch, model, opt, x)
        acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=acts) as prof:
            for _ in range(n):
                one_step(model, opt, x)
            torch.cuda.synchronize()
        prof.export_chrome_trace(out)
        with open(out) as f:
            events = json.load(f)["traceEvents"]
        k = sum(1 for e in events
                if str(e.get("cat", "")).lower() == "kernel" and e.get("ph") == "X")
        print("RESULT " + json.dumps({"kernels": k}), flush=True)
        return
    if mode == "trace":
        out, n = argv[2], int(argv[3])
        model, opt, x = model_and_data(torch)
        warm(torch, model, opt, x)
        with cuptrace.trace(out) as t:
            for _ in range(n):
                with cuptrace.range("step"):
                    one_step(model, opt, x)
            torch.cuda.synchronize()
        return report(t.result)
    if mode == "early":
        out, n = argv[2], int(argv[3])
        assert not torch.cuda.is_initialized()
        with cuptrace.trace(out) as t:
            model, opt, x = model_and_data(torch)
            for _ in range(n):
                with cuptrace.range("step"):
                    one_step(model, opt, x)
            torch.cuda.synchronize()
        return report(t.result)
    if mode == "window":
        out, n, a, b = argv[2], int(argv[3]), int(argv[4]), int(argv[5])
        model, opt, x = model_and_data(torch)
        warm(torch, model, opt, x)
        cuptrace.start(out, capture_range="range:hot")
        hot = None
        for i in range(1, n + 1):
            if i == a:
                hot = cuptrace.range("hot")
                hot.__enter__()
            with cuptrace.range("step"):
                one_step(model, opt, x)
            if i == b:
                torch.cuda.synchronize()  # the window's GPU work done before it closes
                hot.__exit__(None, None, None)
        torch.cuda.synchronize()
        return report(cuptrace.stop())
    if mode == "conflict":
        # cuptrace first (Kineto may keep CUPTI after its own session ends), then torch.profiler.
        out = argv[2]
        model, opt, x = model_and_data(torch)
        acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        cuptrace.start(out)
        try:
            with torch.profiler.profile(activities=acts):
                raise AssertionError("torch.profiler under cuptrace was not refused")
        except cuptrace.ProfilerConflict as e:
            assert "CUPTI" in str(e) and "cuptrace.stop()" in str(e), str(e)
            print("refused: %s" % e)
        one_step(model, opt, x)
        torch.cuda.synchronize()
        r = cuptrace.stop()
        with torch.profiler.profile(activities=acts):
            one_step(model, opt, x)
            try:
                cuptrace.start(out + ".2")
                raise AssertionError("start() under torch.profiler was not refused")
            except cuptrace.ProfilerConflict as e:
                assert "torch.profiler" in str(e) and "stop" in str(e), str(e)
                print("refused: %s" % e)
        assert not cuptrace.is_tracing()
        return report(r)
    if mode == "graphs":
        out = argv[2]
        model, opt, x = model_and_data(torch)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s), torch.no_grad():
            for _ in range(3):
                model(x)  # warm-up, as PyTorch asks before capture
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g), torch.no_grad():
            y = model(x)
        g.replay()
        torch.cuda.synchronize()
        untraced = y.clone()
        with torch.no_grad():
            eager = model(x)
        with cuptrace.trace(out) as t:
            # A graph captured and replayed while traced, and the one captured before.
            g2 = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g2), torch.no_grad():
                y2 = model(x)
            for _ in range(5):
                g.replay()
                g2.replay()
            torch.cuda.synchronize()
        assert torch.equal(y, untraced), "a CUDA graph replayed under cuptrace computed otherwise"
        assert torch.equal(y2, untraced), "a CUDA graph captured under cuptrace computes otherwise"
        assert torch.allclose(y, eager, rtol=1e-4, atol=1e-5), "graph and eager disagree"
        return report(t.result)
    if mode == "compile":
        out = argv[2]
        try:
            import triton  # noqa: F401
        except ImportError:
            print("SKIP: Triton is not installed: torch.compile cannot make GPU kernels")
            return
        model, opt, x = model_and_data(torch)

        def f(a):
            return torch.nn.functional.gelu(a * 1.5 + 0.25).sin()

        plain = f(x)
        compiled = torch.compile(f)
        before = compiled(x)
        torch.cuda.synchronize()
        with cuptrace.trace(out) as t:
            during = compiled(x)
            fresh = torch.compile(lambda a: torch.nn.functional.gelu(a * 1.5 + 0.25).sin())(x)
            torch.cuda.synchronize()
        after = compiled(x)
        assert torch.equal(before, during) and torch.equal(before, after), \
            "torch.compile's function computed otherwise under cuptrace"
        assert torch.equal(before, fresh), "a function compiled under cuptrace computes otherwise"
        assert torch.allclose(before, plain, rtol=1e-4, atol=1e-5), "compiled and eager disagree"
        return report(t.result)
    if mode == "under_record":
        n = int(argv[2])
        lib = ctypes.CDLL(os.environ["CUDA_INJECTION64_PATH"])
        lib.cuptrace_end.restype = ctypes.c_int
        model, opt, x = model_and_data(torch)
        for _ in range(n):
            with cuptrace.range("rec_step"):
                one_step(model, opt, x)
        torch.cuda.synchronize()
        rc = lib.cuptrace_end()
        assert rc == -errno.EPERM, "cuptrace_end under record returned %d, not -EPERM" % rc
        print("RESULT " + json.dumps({"end_rc": rc, "tid": threading.get_native_id()}),
              flush=True)
        return
    if mode in ("lightning", "transformers"):
        out, k, m = argv[2], int(argv[3]), int(argv[4])
        cb = None
        if out != "-":
            import cuptrace.callbacks  # noqa: F401  (made on first access)
            cb = (cuptrace.callbacks.LightningCallback if mode == "lightning"
                  else cuptrace.callbacks.TransformersCallback)(out, steps=(k, m))
        (run_lightning if mode == "lightning" else run_transformers)(torch, cb, k + m + 2)
        if cb is not None:
            return report(cb.result)
        return
    raise SystemExit("unknown mode " + mode)


def run_lightning(torch, cb, steps):
    try:
        import lightning.pytorch as pl
    except ImportError:
        import pytorch_lightning as pl

    class Net(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Linear(64, 1)

        def training_step(self, batch, i):
            return self.net(batch[0]).square().mean()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(steps * 8, 64))
    trainer = pl.Trainer(max_steps=steps, accelerator="gpu", devices=1,
                         callbacks=[cb] if cb else [], logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, num_sanity_val_steps=0)
    trainer.fit(Net(), torch.utils.data.DataLoader(data, batch_size=8))


def run_transformers(torch, cb, steps):
    import transformers

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Linear(64, 1)

        def forward(self, x, labels=None):
            return {"loss": (self.net(x).squeeze(-1) - labels).square().mean()}

    class Data(torch.utils.data.Dataset):
        def __len__(self):
            return steps * 8

        def __getitem__(self, i):
            g = torch.Generator().manual_seed(i)
            return {"x": torch.randn(64, generator=g), "labels": torch.tensor(0.0)}

    torch.manual_seed(0)
    out = os.environ.get("CUPTRACE_TEST_HF_DIR", "hf-out")
    args = transformers.TrainingArguments(output_dir=out, max_steps=steps,
                                          per_device_train_batch_size=8, report_to=[],
                                          save_strategy="no", logging_strategy="no",
                                          dataloader_num_workers=0, disable_tqdm=True)
    transformers.Trainer(model=Net(), args=args, train_dataset=Data(),
                         callbacks=[cb] if cb else []).train()


if __name__ == "__main__":
    main(sys.argv)
