"""The session API: start/stop/trace, step, range, window, flush, stacks.

One session per process (the library's rule): this module keeps what this process started so a
second start() is refused here with a clear message before the library says -EALREADY.
Thread-safety: _LOCK guards the state; step() and range() take no lock (the C side is
thread-safe and they must stay cheap inside a training loop).
"""
from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import sys
import threading
from typing import Any, Callable, Iterator, Optional

from . import _lib, _options, _torch
from .errors import CuptraceError, MissingSymbol
from .result import TraceResult

_LOCK = threading.Lock()


class _State:
    def __init__(self) -> None:
        self.running = False
        self.path: Optional[str] = None
        self.windowed = False
        self.env: Optional[_options.EnvPatch] = None


_state = _State()


def under_record() -> bool:
    """True when `cuptrace record` injected the library into this process."""
    return _lib._under_record() is not None


def _record_windows() -> bool:
    return any(os.environ.get(v) not in (None, "", "0") for v in _options.WINDOW_VARS)


def start(path: Optional[str] = None, *, lib: Optional[str] = None, output: Optional[str] = None,
          **options: Any) -> None:
    """Starts tracing this process into `path` (default: CUPTRACE_OUTPUT, else
    cuptrace-<pid>.pftrace; the extension picks the format as in `record -o`). Works after CUDA
    was initialised (late attach); start before the first CUDA call to see CUDA's start-up too.

    `options` are `cuptrace record`'s options with '_' for '-', e.g. steps=(5, 3) (steps 5 to 7,
    counted by step()), capture_repeat="all", ring="10s", delay="2s", duration="1s",
    on_demand=True, format="chrome", stacks="python", no_summary=True, gpu_metrics=True; `lib`
    is record's --lib (the libcuptrace.so to load); `output` is record's -o (same as path).
    Options record alone can honour (pytorch, no_step_marks, children...) raise
    RecordOnlyOption; a second start() raises CuptraceError.

    Under `cuptrace record`, the session is record's: start() takes no path or options; with
    record's capture windows (--on-demand, --steps, ...) it opens a window now."""
    if path is not None and output is not None and path != output:
        raise TypeError("cuptrace: path and output name two files")
    path = path if path is not None else output
    env = _options.to_env(options)  # refusals before anything changes
    with _LOCK:
        if _state.running:
            raise CuptraceError("cuptrace: tracing is already running in this process (into %s);"
                                " stop() it first" % (_state.path or "its file"))
        if under_record():
            if path is not None or env or lib is not None:
                raise CuptraceError(
                    "cuptrace: under `cuptrace record` the trace's file and options are "
                    "record's (-o, --steps, --on-demand, ...): call start() without them, or "
                    "run the program without record")
            if not _record_windows():
                raise CuptraceError(
                    "cuptrace: `cuptrace record` traces this whole run already (into its -o "
                    "file); for start()/stop() to open and close windows, record with "
                    "--on-demand")
        _torch.check_before_start()
        h = _lib.load(lib)
        _check_values(env, options)
        patch = _options.EnvPatch(env)
        patch.apply()
        windowed = _record_windows()
        try:
            # Absolute: the library renames the finished file onto this name at stop(), when
            # the program may have changed directory.
            c_path = path if path is None or "%" in path else os.path.abspath(path)
            rc = _lib._fn(h, "cuptrace_start")(os.fsencode(c_path) if c_path else None)
        except BaseException:
            patch.restore()
            raise
        if rc == -errno.EALREADY and under_record():
            rc = 0  # record's window is open already (a trigger, or its own rules)
        if rc != 0:
            patch.restore()
            if rc == -errno.EALREADY:
                raise CuptraceError(
                    "cuptrace: the library is tracing already (a session started outside this "
                    "package, e.g. by the C API): %s" % _lib.strerror(rc))
            _torch.explain_start_failure(rc)
            raise CuptraceError("cuptrace: cuptrace_start failed: %s (the library said why on "
                                "stderr)" % _lib.strerror(rc))
        _state.running, _state.env, _state.windowed = True, patch, windowed
        _state.path = _resolve(path)
        _torch.guard_on()


def _check_values(env: "dict[str, str]", options: "dict[str, Any]") -> None:
    """Each value through the library's own settings table, where it offers that
    (cuptrace_setting_check: the parser `record` uses): a bad one is a ValueError here, not a
    warning on stderr and the default (what the library does with a bad variable). A variable
    the library does not know (-ENOENT: an older library) is left to it."""
    check = _lib.optional_fn("cuptrace_setting_check")
    if check is None:
        return
    check.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
    why = ctypes.create_string_buffer(512)
    for var, value in env.items():
        rc = check(var.encode(), value.encode(), why, len(why))
        if rc == -errno.ENOENT or rc == 0:
            continue
        kws = [k for k in options if _options.OPTIONS.get(k, ("",))[0] == var]
        said = why.value.decode(errors="replace") or _lib.strerror(rc)
        raise ValueError("cuptrace: %s%s" % ("".join("%s=%r: " % (k, options[k]) for k in kws),
                                             said))


def _resolve(path: Optional[str]) -> Optional[str]:
    """The file the library writes, where the name has no pattern (%p, %r, %n...)."""
    p = path if path is not None else os.environ.get("CUPTRACE_OUTPUT")
    if p is None:
        p = "cuptrace-%p.pftrace"
    p = p.replace("%p", str(os.getpid())).replace("%%", "%")
    if "%" in p:
        return None  # a name only the library can expand (rank, host, window number)
    return os.path.abspath(p)


def stop() -> TraceResult:
    """Stops tracing: the file is finished and renamed into place before this returns, and the
    result (TraceResult) names it, with counts, summary() and analyze().

    A session this package started ends here through the library's cuptrace_end(): an open
    capture window is closed, and every file is finished, renamed into place and summarised
    (on stderr) before this returns. An older library without cuptrace_end() finishes a
    session of capture windows only at exit (the result then says `complete=False`). Under
    `cuptrace record` the session is record's: stop() closes the window start() opened, and the
    file is record's -o, finished when the program exits."""
    with _LOCK:
        if not _state.running:
            raise CuptraceError("cuptrace: stop() without start(): nothing is being traced")
        rec = under_record()
        windowed = _state.windowed
        path = _state.path
        try:
            complete, note, what = not windowed, None, "cuptrace_stop"
            end = None if rec else _lib.optional_fn("cuptrace_end")
            if end is not None:
                what = "cuptrace_end"
                rc = end()
                complete = rc == 0
                if rc == -errno.EPERM:  # another tool injected the library: its session
                    rc, complete = 0, False
                    note = "the session is the injected library's: the file is written at exit"
            else:
                rc = _lib.fn("cuptrace_stop")()
                if windowed and rc == -errno.EALREADY:
                    rc = 0  # no window was open: nothing to close
                if windowed and rc == 0 and not rec:
                    note = ("capture windows: the file is finished when the process exits "
                            "(this libcuptrace.so has no cuptrace_end())")
            if rec:
                path, complete = _resolve(None), False  # record's -o, in CUPTRACE_OUTPUT
                note = "under `cuptrace record`: the trace is record's -o file, written at exit"
        finally:
            _torch.guard_off()
            if _state.env is not None:
                _state.env.restore()
            _state.running, _state.env, _state.path, _state.windowed = False, None, None, False
        if rc == -errno.EINVAL and what == "cuptrace_end":
            raise CuptraceError("cuptrace: the session had ended already (a signal, or "
                                "cuptrace_end() called from elsewhere): %s" % _lib.strerror(rc))
        if rc != 0:
            raise CuptraceError("cuptrace: %s failed: %s; the trace may be incomplete (the "
                                "library said why on stderr)" % (what, _lib.strerror(rc)))
        return TraceResult(path, complete=complete, note=note, library=_lib.loaded_path())


def is_tracing() -> bool:
    """Whether this package started a session that is still running."""
    return _state.running


@contextlib.contextmanager
def trace(path: Optional[str] = None, **options: Any) -> Iterator["_Holder"]:
    """`with cuptrace.trace("run.pftrace", steps=(5, 3)) as t:` ... then `t.result`.

    start() on entry, stop() on exit, also when the body raises (the trace of the failing run is
    kept, and the body's exception goes on, not one of ours)."""
    holder = _Holder()
    start(path, **options)
    try:
        yield holder
    except BaseException:
        try:
            holder.result = stop()
        except CuptraceError:
            pass  # the body's exception matters more
        raise
    holder.result = stop()


class _Holder:
    """What `with trace(...) as t` gives: t.result is the TraceResult once the block ends."""

    def __init__(self) -> None:
        self.result: Optional[TraceResult] = None

    def __repr__(self) -> str:
        return "<cuptrace trace: %s>" % ("running" if self.result is None else repr(self.result))

    def _repr_html_(self) -> str:
        return self.result._repr_html_() if self.result is not None else "<i>tracing</i>"


def step() -> None:
    """Marks the end of a training step (what `--steps K,N`, `--ring-slow` and `cuptrace trigger
    --steps` count). Under record, PyTorch optimizer steps are counted already: call this in
    other loops. A no-op while nothing traces."""
    _lib.fn("cuptrace_step")()


def flush() -> None:
    """Hands every record CUPTI holds to the writer (the file has them within CUPTRACE_FLUSH_MS);
    does not wait for the GPU: synchronise first for work still running."""
    rc = _lib.fn("cuptrace_flush")()
    if rc not in (0, -errno.EINVAL):
        raise CuptraceError("cuptrace: cuptrace_flush failed: %s" % _lib.strerror(rc))


def stacks(on: bool) -> None:
    """Pauses (False) or resumes (True) call stacks at launches (start(stacks=...))."""
    rc = _lib.fn("cuptrace_stacks")(1 if on else 0)
    if rc == -errno.ENOTSUP:
        raise CuptraceError("cuptrace: this process takes no call stacks (start(stacks='python'"
                            ") or record --stacks)")
    if rc:
        raise CuptraceError("cuptrace: cuptrace_stacks failed: %s" % _lib.strerror(rc))


def _nvtx_fallback() -> Optional["tuple[Callable[[bytes], int], Callable[[], int]]"]:
    """NVTX's push/pop where the library has no range entry points: torch.cuda.nvtx when the
    program imported torch, else the `nvtx` package if installed; None without either."""
    t = sys.modules.get("torch")
    nv = getattr(getattr(t, "cuda", None), "nvtx", None) if t is not None else None
    if nv is not None and hasattr(nv, "range_push"):
        return (lambda b: (nv.range_push(b.decode("utf-8", "replace")), 0)[1],
                lambda: (nv.range_pop(), 0)[1])
    try:
        import nvtx  # type: ignore[import-not-found]
    except ImportError:
        return None
    return (lambda b: (nvtx.push_range(b.decode("utf-8", "replace")), 0)[1],
            lambda: (nvtx.pop_range(), 0)[1])


class range(contextlib.ContextDecorator):  # noqa: A001 - torch.cuda.nvtx.range's name
    """`with cuptrace.range("load batch"):` (or `@cuptrace.range("load batch")`) marks a named
    range on this thread, without NVTX: in the trace a slice on the thread's track (category
    "nvtx", nested with the thread's NVTX ranges), and for capture windows the same as an NVTX
    range of that name (`capture_range="range:load batch"`, `step_range="load batch"`).

    Through the library's cuptrace_range_push/cuptrace_range_pop: cheap, and a no-op while
    nothing traces. An older library without them: NVTX instead (torch.cuda.nvtx where torch
    is imported, or the `nvtx` package), which reaches the trace only where NVTX reaches CUPTI
    (under `cuptrace record`); with neither, MissingSymbol names the missing entry point.
    A range must end on the thread it began on (CuptraceError otherwise)."""

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise TypeError("cuptrace.range takes a non-empty name")
        self.name = name
        self._encoded = name.encode("utf-8", "replace")
        self._pop: Optional[Callable[[], int]] = None

    def _fns(self) -> "tuple[Callable[[bytes], int], Callable[[], int]]":
        push = _lib.optional_fn("cuptrace_range_push")
        pop = _lib.optional_fn("cuptrace_range_pop")
        if push is not None and pop is not None:
            return push, pop
        fallback = _nvtx_fallback()
        if fallback is not None:
            return fallback
        raise MissingSymbol("cuptrace_range_push" if push is None else "cuptrace_range_pop",
                            _lib.loaded_path())

    def __enter__(self) -> "range":
        push, pop = self._fns()
        rc = push(self._encoded)
        if rc:
            raise CuptraceError("cuptrace: cuptrace_range_push(%r) failed: %s"
                                % (self.name, _lib.strerror(rc)))
        self._pop = pop
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        pop = self._pop if self._pop is not None else self._fns()[1]
        rc = pop()
        if rc and exc_type is None:  # the body's own exception matters more
            raise CuptraceError(
                "cuptrace: range %r ended with no range open on this thread (%s): a range "
                "ends on the thread it began on" % (self.name, _lib.strerror(rc)))


@contextlib.contextmanager
def window() -> Iterator[None]:
    """`with cuptrace.window():` opens a capture window now and closes it at the end of the
    block, as `cuptrace trigger` would: in a session of capture windows (`record --on-demand`,
    or start(on_demand=True, ...) here). Each window goes into the session's file (or its own,
    with %n in the name)."""
    if not (_state.running and _state.windowed) and not (under_record() and _record_windows()):
        raise CuptraceError(
            "cuptrace: window() needs a session of capture windows: start(on_demand=True) (or "
            "steps=, ring=, ...) first, or run under `cuptrace record --on-demand`")
    h = _lib.load()
    rc = _lib._fn(h, "cuptrace_start")(None)
    if rc not in (0, -errno.EALREADY):
        raise CuptraceError("cuptrace: cannot open a window: %s" % _lib.strerror(rc))
    try:
        yield
    finally:
        _lib._fn(h, "cuptrace_stop")()
