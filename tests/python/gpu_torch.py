"""The GPU side of tests/gpu_python_test.sh: small PyTorch loops traced through the cuptrace
package. Each mode prints one line `RESULT {json}` for the script to compare; any failed
assertion exits non-zero with a message.

  plain N                  the loop alone (run under `cuptrace record --steps K,M`)
  trace OUT N              `with cuptrace.trace(OUT)` around the whole loop (cuptrace imported
                           first, before CUDA starts)
  late OUT N K M           CUDA initialised and used first, then cuptrace imported; start()
                           after step K-1, stop() after step K+M-1: the steps record --steps K,M
                           takes
  conflict OUT             torch.profiler and cuptrace refuse each other (ProfilerConflict)
  graphs OUT               CUDA graph capture and replay inside a trace: same numbers as eager
  lightning OUT K M        LightningCallback, steps (K, M)
  transformers OUT K M     TransformersCallback, steps (K, M)
"""
import json
import sys


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


def report(result, **extra):
    assert result is not None and result.complete, "no finished trace: %r" % (result,)
    out = {"path": result.path, "kernels": result.counts.get("kernel", 0),
           "analyze_kernels": result.analyze()["counts"]["kernels"]}
    out.update(extra)
    print("RESULT " + json.dumps(out), flush=True)


def main(argv):
    mode = argv[1]
    if mode in ("late", "plain"):
        assert "cuptrace" not in sys.modules
        import torch
        model, opt, x = model_and_data(torch)  # CUDA is up from here
        torch.cuda.synchronize()
        if mode == "plain":
            for _ in range(int(argv[2])):
                one_step(model, opt, x)
            torch.cuda.synchronize()
            return
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
    if mode == "trace":
        out, n = argv[2], int(argv[3])
        with cuptrace.trace(out) as t:
            model, opt, x = model_and_data(torch)
            for _ in range(n):
                with cuptrace.range("step") if _has_range(cuptrace) else _null():
                    one_step(model, opt, x)
                cuptrace.step()
            torch.cuda.synchronize()
        return report(t.result)
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
                print("refused: %s" % e)
        return report(r)
    if mode == "graphs":
        out = argv[2]
        model, opt, x = model_and_data(torch)
        with torch.no_grad():
            eager = model(x).clone()
        with cuptrace.trace(out) as t:
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s), torch.no_grad():
                for _ in range(3):
                    model(x)  # warm-up, as PyTorch asks before capture
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g), torch.no_grad():
                y = model(x)
            for _ in range(5):
                g.replay()
            torch.cuda.synchronize()
        assert torch.allclose(y, eager, rtol=1e-4, atol=1e-5), \
            "a CUDA graph under cuptrace computed something else"
        return report(t.result)
    if mode in ("lightning", "transformers"):
        import cuptrace.callbacks  # noqa: F401  (made on first access, needs the library)
        out, k, m = argv[2], int(argv[3]), int(argv[4])
        cb = (cuptrace.callbacks.LightningCallback if mode == "lightning"
              else cuptrace.callbacks.TransformersCallback)(out, steps=(k, m))
        (run_lightning if mode == "lightning" else run_transformers)(torch, cb, k + m + 2)
        return report(cb.result)
    raise SystemExit("unknown mode " + mode)


def _has_range(cuptrace):
    from cuptrace import _lib
    return _lib.optional_fn("cuptrace_range_push") is not None


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


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

    data = torch.utils.data.TensorDataset(torch.randn(steps * 8, 64))
    trainer = pl.Trainer(max_steps=steps, accelerator="gpu", devices=1, callbacks=[cb],
                         logger=False, enable_checkpointing=False, enable_progress_bar=False)
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
            return {"x": torch.randn(64), "labels": torch.tensor(0.0)}

    args = transformers.TrainingArguments(output_dir=sys.argv[2] + ".hf", max_steps=steps,
                                          per_device_train_batch_size=8, report_to=[],
                                          save_strategy="no", logging_strategy="no")
    transformers.Trainer(model=Net(), args=args, train_dataset=Data(), callbacks=[cb]).train()


if __name__ == "__main__":
    main(sys.argv)
