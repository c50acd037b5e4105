"""Training-loop callbacks that trace steps K to K+N-1 (1-based, as `record --steps K,N`).

`cuptrace.callbacks.LightningCallback` (Lightning's Callback) and
`cuptrace.callbacks.TransformersCallback` (transformers' TrainerCallback) are made on first
access, so importing cuptrace never imports Lightning or transformers; accessing one where its
library is missing raises ImportError naming it. Both drive a StepWindow: a plain session
started when step K begins and stopped (its file finished) when step K+N-1 ends, so the result
is there in the same process, with today's C API (no capture windows needed).
"""
from __future__ import annotations

import sys
from typing import Any, Optional, Tuple

from . import _session
from .result import TraceResult


def _sync_gpu() -> None:
    """Waits for the GPU where torch has CUDA up, so the last step's kernels have their times
    when the file is finished (cuptrace_stop does not synchronise)."""
    t = sys.modules.get("torch")
    try:
        if t is not None and t.cuda.is_initialized():
            t.cuda.synchronize()
    except Exception:
        pass


class StepWindow:
    """Steps K..K+N-1 of a loop into `path`: call begin() at each step's start and end() at its
    end; finish() at the end of training (stops a window the loop did not reach the end of).
    `result` is the TraceResult once the window closed."""

    def __init__(self, path: Optional[str] = None, *, steps: Tuple[int, int],
                 **options: Any) -> None:
        k, n = steps
        if k < 1 or n < 1:
            raise ValueError("cuptrace: steps=(K, N) needs K >= 1 and N >= 1")
        self.path, self.first, self.count, self.options = path, k, n, options
        self.step_no = 0  # steps begun
        self.result: Optional[TraceResult] = None

    @property
    def tracing(self) -> bool:
        return self.first <= self.step_no < self.first + self.count and self.result is None

    def begin(self) -> None:
        self.step_no += 1
        if self.step_no == self.first:
            _session.start(self.path, **self.options)

    def end(self) -> None:
        if not self.tracing:
            return
        _session.step()
        if self.step_no == self.first + self.count - 1:
            self._stop()

    def finish(self) -> None:
        if self.tracing and _session.is_tracing():
            self._stop()

    def _stop(self) -> None:
        _sync_gpu()
        self.result = _session.stop()


def _lightning_base() -> Any:
    try:
        from lightning.pytorch import Callback  # type: ignore[import-not-found]
    except ImportError:
        try:
            from pytorch_lightning import Callback  # type: ignore[import-not-found]
        except ImportError:
            raise ImportError("cuptrace.callbacks.LightningCallback needs Lightning "
                              "(pip install lightning)") from None
    return Callback


def _make_lightning() -> type:
    base = _lightning_base()

    class LightningCallback(base):  # type: ignore[misc, valid-type]
        """`Trainer(callbacks=[cuptrace.callbacks.LightningCallback("run.pftrace",
        steps=(5, 3))])`: training batches 5 to 7; `.result` afterwards."""

        def __init__(self, path: Optional[str] = None, *, steps: Tuple[int, int],
                     **options: Any) -> None:
            super().__init__()
            self.window = StepWindow(path, steps=steps, **options)

        @property
        def result(self) -> Optional[TraceResult]:
            return self.window.result

        def on_train_batch_start(self, trainer: Any, pl_module: Any, *a: Any, **k: Any) -> None:
            self.window.begin()

        def on_train_batch_end(self, trainer: Any, pl_module: Any, *a: Any, **k: Any) -> None:
            self.window.end()

        def on_train_end(self, trainer: Any, pl_module: Any) -> None:
            self.window.finish()

        def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
            self.window.finish()

    return LightningCallback


def _make_transformers() -> type:
    try:
        from transformers import TrainerCallback  # type: ignore[import-not-found]
    except ImportError:
        raise ImportError("cuptrace.callbacks.TransformersCallback needs transformers "
                          "(pip install transformers)") from None

    class TransformersCallback(TrainerCallback):  # type: ignore[misc, valid-type]
        """`Trainer(..., callbacks=[cuptrace.callbacks.TransformersCallback("run.pftrace",
        steps=(5, 3))])`: training steps 5 to 7 (optimizer steps); `.result` afterwards."""

        def __init__(self, path: Optional[str] = None, *, steps: Tuple[int, int],
                     **options: Any) -> None:
            self.window = StepWindow(path, steps=steps, **options)

        @property
        def result(self) -> Optional[TraceResult]:
            return self.window.result

        def on_step_begin(self, args: Any, state: Any, control: Any, **k: Any) -> None:
            self.window.begin()

        def on_step_end(self, args: Any, state: Any, control: Any, **k: Any) -> None:
            self.window.end()

        def on_train_end(self, args: Any, state: Any, control: Any, **k: Any) -> None:
            self.window.finish()

    return TransformersCallback


_MADE = {}


def __getattr__(name: str) -> Any:
    makers = {"LightningCallback": _make_lightning, "TransformersCallback": _make_transformers}
    if name not in makers:
        raise AttributeError(name)
    if name not in _MADE:
        _MADE[name] = makers[name]()
    return _MADE[name]
