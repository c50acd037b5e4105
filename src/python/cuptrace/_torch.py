"""cuptrace beside torch.profiler: CUPTI serves one subscriber per process, so whichever comes
second would fail or, worse, silently record nothing. Both directions end in ProfilerConflict:

- start() while torch.profiler (Kineto, with CUDA activities) runs: refused before the library
  is asked (check_before_start);
- torch.profiler started while cuptrace traces: its start raises (guard_on wraps the two entry
  points that hand CUDA activities to Kineto, only while this package's session runs).

torch is never imported here: only looked at when the program has imported it already.
torch.cuda.graphs and torch.compile need nothing from us (CUPTI sees their launches as any).
"""
from __future__ import annotations

import errno
import functools
import sys
from typing import Any, Callable, List, Optional, Tuple

from .errors import ProfilerConflict

_patched: List[Tuple[Any, str, Any]] = []
_active = False


def _torch() -> Optional[Any]:
    return sys.modules.get("torch")


def kineto_active() -> bool:
    """Whether torch.profiler (Kineto) is profiling in this process now."""
    t = _torch()
    if t is None:
        return False
    try:
        kind = t._C._autograd._profiler_type()
        return bool(kind == t._C._profiler.ActiveProfilerType.KINETO)
    except Exception:  # an older torch: no way to tell Kineto from record's NVTX mode
        return False


def check_before_start() -> None:
    if kineto_active():
        raise ProfilerConflict(
            "cuptrace: torch.profiler is profiling this process and holds CUPTI, which serves "
            "one tool at a time: stop torch.profiler first (or use its trace alone: "
            "`cuptrace analyze` reads torch.profiler JSON)")


def explain_start_failure(rc: int) -> None:
    """After cuptrace_start failed: -EBUSY is the library's word for CUPTI held by another
    tool (CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)."""
    check_before_start()
    if rc == -errno.EBUSY:
        raise ProfilerConflict(
            "cuptrace: another tool holds CUPTI in this process (torch.profiler, Nsight "
            "Systems, another CUPTI client), and CUPTI serves one at a time: stop it first")


def _refuse(*_: Any, **__: Any) -> None:
    raise ProfilerConflict(
        "cuptrace is tracing this process and holds CUPTI, which serves one tool at a time: "
        "torch.profiler cannot profile CUDA now; cuptrace.stop() first, or profile with "
        "activities=[ProfilerActivity.CPU] only")


def _wrap(owner: Any, name: str, wants_cuda: Callable[[Any], bool]) -> None:
    orig = getattr(owner, name, None)
    if orig is None or getattr(orig, "_cuptrace_guard", False):
        return

    @functools.wraps(orig)
    def guarded(self: Any, *a: Any, **k: Any) -> Any:
        if _active and wants_cuda(self):
            _refuse()
        return orig(self, *a, **k)

    guarded._cuptrace_guard = True  # type: ignore[attr-defined]
    setattr(owner, name, guarded)
    _patched.append((owner, name, orig))


def _kineto_wants_cuda(prof: Any) -> bool:
    t = _torch()
    try:
        return t is not None and t.profiler.ProfilerActivity.CUDA in set(prof.activities)
    except Exception:
        return True  # unknown: assume it would take CUPTI


def _legacy_wants_cuda(prof: Any) -> bool:
    return bool(getattr(prof, "use_cuda", False) or getattr(prof, "use_device", None) == "cuda")


def guard_on() -> None:
    """While this package traces: torch.profiler's CUDA profiling raises ProfilerConflict."""
    global _active
    _active = True
    t = _torch()
    if t is None:
        return
    try:
        _wrap(t.profiler.profiler._KinetoProfile, "prepare_trace", _kineto_wants_cuda)
        _wrap(t.autograd.profiler.profile, "__enter__", _legacy_wants_cuda)
    except Exception:
        pass  # another torch: the library's own message on stderr remains


def guard_off() -> None:
    global _active
    _active = False
