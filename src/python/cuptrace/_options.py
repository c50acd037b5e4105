"""Keyword arguments -> CUPTRACE_* variables, under `cuptrace record`'s option names.

A keyword is record's long option with '-' as '_' (`--capture-repeat` -> capture_repeat), and
goes to the variable record would set (include/cuptrace.h lists them; src/common/options.c's
table checks the values, in the library). Options that act before the program starts or in
other processes are refused here (RecordOnlyOption), never dropped.
"""
from __future__ import annotations

import numbers
import os
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple, Union

from .errors import RecordOnlyOption

Value = Union[str, int, float, bool, Sequence[Any], None]


def _text(name: str, v: Any) -> str:
    if isinstance(v, str) and v:
        return v
    raise TypeError("cuptrace: %s takes a non-empty string, not %r" % (name, v))


def _number(name: str, v: Any) -> str:
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        if isinstance(v, str) and v:
            return v  # the library's table checks it
        raise TypeError("cuptrace: %s takes a number, not %r" % (name, v))
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def _duration(name: str, v: Any) -> str:
    """500ms, "2s", "1m" as record takes them; a bare number is seconds (Python's habit:
    time.sleep)."""
    if isinstance(v, str) and v:
        return v
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or v < 0:
        raise TypeError("cuptrace: %s takes a duration such as '500ms' or a number of seconds, "
                        "not %r" % (name, v))
    return _number(name, v) + "s"


def _flag(name: str, v: Any) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    raise TypeError("cuptrace: %s takes True or False, not %r" % (name, v))


def _not_flag(name: str, v: Any) -> str:
    return "0" if _flag(name, v) == "1" else "1"


def _steps(name: str, v: Any) -> str:
    """K (from step K on), (K, N) or "K,N": steps K to K+N-1, 1-based, as record --steps."""
    if isinstance(v, str) and v:
        return v
    if isinstance(v, int) and not isinstance(v, bool):
        return str(v)
    if isinstance(v, (tuple, list)) and len(v) == 2 and all(
            isinstance(x, int) and not isinstance(x, bool) for x in v):
        return "%d,%d" % (v[0], v[1])
    raise TypeError("cuptrace: steps takes K, (K, N) or 'K,N', not %r" % (v,))


def _repeat(name: str, v: Any) -> str:
    if v == "all" or (isinstance(v, int) and not isinstance(v, bool)):
        return str(v)
    if isinstance(v, str) and v:
        return v
    raise TypeError("cuptrace: capture_repeat takes a count or 'all', not %r" % (v,))


def _metrics(name: str, v: Any) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, (list, tuple)) and v and all(isinstance(x, str) and x for x in v):
        return ",".join(v)
    return _text(name, v)


def _capture(name: str, v: Any) -> str:
    if _flag(name, v) == "1":
        return "capture"
    raise TypeError("cuptrace: capture=False means nothing; leave it out")


# keyword -> (variable, converter). The window options (steps ... cupti_early) are the capture
# window settings of README "Tracing part of a run".
OPTIONS: Dict[str, Tuple[str, Callable[[str, Any], str]]] = {
    "format": ("CUPTRACE_FORMAT", _text),
    "capture": ("CUPTRACE_FORMAT", _capture),
    "compress": ("CUPTRACE_COMPRESS", _text),
    "compress_level": ("CUPTRACE_COMPRESS_LEVEL", _number),
    "driver": ("CUPTRACE_DRIVER", _text),
    "runtime": ("CUPTRACE_RUNTIME", _text),
    "sync_records": ("CUPTRACE_SYNC_RECORDS", _text),
    "cuda_graphs": ("CUPTRACE_CUDA_GRAPHS", _text),
    "stacks": ("CUPTRACE_STACKS", _text),
    "stacks_every": ("CUPTRACE_STACKS_EVERY", _number),
    "buffer_size": ("CUPTRACE_BUFFER_SIZE", _number),
    "flush_ms": ("CUPTRACE_FLUSH_MS", _number),
    "no_summary": ("CUPTRACE_SUMMARY", _not_flag),
    "gpu_metrics": ("CUPTRACE_GPU_METRICS", _metrics),
    "gpu_metrics_rate": ("CUPTRACE_GPU_METRICS_RATE", _number),
    "private": ("CUPTRACE_PRIVATE", _flag),
    "delay": ("CUPTRACE_DELAY", _duration),
    "duration": ("CUPTRACE_DURATION", _duration),
    "capture_range": ("CUPTRACE_CAPTURE_RANGE", _text),
    "steps": ("CUPTRACE_STEPS", _steps),
    "step_range": ("CUPTRACE_STEP_RANGE", _text),
    "capture_repeat": ("CUPTRACE_CAPTURE_REPEAT", _repeat),
    "on_demand": ("CUPTRACE_ON_DEMAND", _flag),
    "cupti_early": ("CUPTRACE_CUPTI_EARLY", _flag),
    "ring": ("CUPTRACE_RING", _duration),
    "ring_slow": ("CUPTRACE_RING_SLOW", _number),
    "ring_max": ("CUPTRACE_RING_MAX", _number),
    "otlp": ("CUPTRACE_OTLP_URL", _text),
    "service": ("CUPTRACE_OTLP_SERVICE", _text),
    "otlp_trace_per": ("CUPTRACE_OTLP_TRACE_PER", _text),
    "otlp_batch": ("CUPTRACE_OTLP_BATCH", _number),
    "otlp_interval": ("CUPTRACE_OTLP_INTERVAL_MS", _number),
    "otlp_window": ("CUPTRACE_OTLP_WINDOW_MS", _number),
    "otlp_timeout": ("CUPTRACE_OTLP_TIMEOUT_MS", _number),
}

# The variables that make a session one of capture windows (its file is finished when the
# session ends, not when a window closes).
WINDOW_VARS = frozenset((
    "CUPTRACE_DELAY", "CUPTRACE_DURATION", "CUPTRACE_CAPTURE_RANGE", "CUPTRACE_STEPS",
    "CUPTRACE_STEP_RANGE", "CUPTRACE_CAPTURE_REPEAT", "CUPTRACE_ON_DEMAND", "CUPTRACE_RING"))

# record's options that a running process cannot honour, and why.
RECORD_ONLY: Dict[str, str] = {
    "pytorch": "its hook must be in place before the program imports torch, in every process "
               "(record puts it on PYTHONPATH); in-process, use "
               "torch.autograd.profiler.emit_nvtx() for op ranges",
    "pytorch_shapes": "as pytorch: set up before the program starts",
    "no_step_marks": "the optimizer.step marks are record's Python hook, set up at start-up",
    "no_check": "record's check for a CUDA device before it starts the program",
    "list_gpu_metrics": "a command of its own: cuptrace record --list-gpu-metrics",
    "children": "child processes are traced through CUDA_INJECTION64_PATH, which only record "
                "sets before they start",
}


def libcuda_loaded() -> bool:
    """Whether the CUDA driver library is mapped into this process (CUDA may have started)."""
    try:
        with open("/proc/self/maps") as f:
            return any("libcuda.so" in line for line in f)
    except OSError:
        return False


def to_env(opts: Mapping[str, Any]) -> Dict[str, str]:
    """The variables for these keywords; raises RecordOnlyOption or TypeError (unknown
    keyword, wrong type) before anything is set."""
    env: Dict[str, str] = {}
    for k, v in opts.items():
        if k in RECORD_ONLY:
            raise RecordOnlyOption("cuptrace: %s= needs `cuptrace record --%s`: %s"
                                   % (k, k.replace("_", "-"), RECORD_ONLY[k]))
        if k not in OPTIONS:
            raise TypeError("cuptrace: unknown option %r (record's options, with '_' for '-': "
                            "%s)" % (k, ", ".join(sorted(OPTIONS))))
        if v is None:
            continue
        var, conv = OPTIONS[k]
        if var in env and env[var] != conv(k, v):
            raise TypeError("cuptrace: format= and capture= disagree")
        env[var] = conv(k, v)
    if env.get("CUPTRACE_CUDA_GRAPHS") in ("graph", "graphs") and libcuda_loaded():
        raise RecordOnlyOption(
            "cuptrace: cuda_graphs='graph' needs tracing to start before CUDA does, and "
            "libcuda.so is loaded in this process already; use `cuptrace record --cuda-graphs "
            "graph`, or start() before the first CUDA call")
    return env


class EnvPatch:
    """Sets variables for a session and puts the previous values back afterwards (the library
    reads some of them while the session runs, so they stay set until it ends)."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = dict(env)
        self.saved: Dict[str, Optional[str]] = {}

    def apply(self) -> None:
        for k, v in self.env.items():
            self.saved[k] = os.environ.get(k)
            os.environ[k] = v

    def restore(self) -> None:
        for k, old in self.saved.items():
            if old is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = old
        self.saved.clear()
