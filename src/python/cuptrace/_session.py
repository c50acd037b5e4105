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
import threading
from typing import Any, Iterator, Optional

from . import _lib, _options, _torch
from .errors import CuptraceError
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
        _check_values(env)
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


def _check_values(env: "dict[str, str]") -> None:
    """Each value through the library's own settings table where it offers that
    (cuptrace_setting_check): a bad one is a ValueError here, not a warning on stderr and the
    default (what the library does with a bad variable)."""
    check = _lib.optional_fn("cuptrace_setting_check")
    if check is None:
        return
    check.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
    why = ctypes.create_string_buffer(512)
    for var, value in env.items():
        if check(var.encode(), value.encode(), why, len(why)) != 0:
            raise ValueError("cuptrace: %s" % why.value.decode(errors="replace"))


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

    In a session of capture windows, stop() closes the window that is open; the file(s) are
    finished when the session ends, which needs the library's cuptrace_end() (else: at exit;
    the result then says `complete=False`). Under `cuptrace record` the file is record's."""
    with _LOCK:
        if not _state.running:
            raise CuptraceError("cuptrace: stop() without start(): nothing is being traced")
        rec = under_record()
        windowed = _state.windowed
        path = _state.path
        try:
            rc = _lib.fn("cuptrace_stop")()
            complete = not windowed
            note = None
            if windowed and rc in (0, -errno.EALREADY) and not rec:
                end = _lib.optional_fn("cuptrace_end")
                if end is not None:
                    rc = end()
                    complete = rc == 0
                else:
                    rc = 0
                    note = ("capture windows: the file is finished when the process exits "
                            "(this libcuptrace.so has no cuptrace_end())")
            elif windowed and rc == -errno.EALREADY:
                rc = 0  # no window was open: nothing to close
            if rec:
                path, complete = _resolve(None), False  # record's -o, in CUPTRACE_OUTPUT
                note = "under `cuptrace record`: the trace is record's -o file, written at exit"
        finally:
            _torch.guard_off()
            if _state.env is not None:
                _state.env.restore()
            _state.running, _state.env, _state.path, _state.windowed = False, None, None, False
        if rc != 0:
            raise CuptraceError("cuptrace: cuptrace_stop failed: %s; the trace may be "
                                "incomplete (the library said why on stderr)" % _lib.strerror(rc))
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


class range(contextlib.ContextDecorator):  # noqa: A001 - torch.cuda.nvtx.range's name
    """`with cuptrace.range("load batch"):` (or as a decorator) marks a named range on this
    thread, without NVTX: a slice on the thread's track, and for `--capture-range
    range:NAME` / `step_range=` the same as an NVTX range of that name.

    Needs the library's cuptrace_range_push/cuptrace_range_pop; an older library raises
    MissingSymbol naming the one it lacks."""

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise TypeError("cuptrace.range takes a non-empty name")
        self.name = name
        self._encoded = name.encode("utf-8", "replace")

    def __enter__(self) -> "range":
        push = _lib.fn("cuptrace_range_push")
        _lib.fn("cuptrace_range_pop")  # both or neither: fail before pushing
        push.argtypes = [ctypes.c_char_p]
        push(self._encoded)
        return self

    def __exit__(self, *exc: Any) -> None:
        _lib.fn("cuptrace_range_pop")()


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
