"""cuptrace from Python: trace CUDA work from inside a script or a notebook.

    import cuptrace
    with cuptrace.trace("run.pftrace") as t:        # or cuptrace.start(...) / cuptrace.stop()
        for batch in loader:
            with cuptrace.range("load batch"):
                ...
            train_step(batch)
            cuptrace.step()
    t.result                 # file, counts, summary(), analyze(), open_in_perfetto()

Keyword options are `cuptrace record`'s (with '_' for '-'): steps=(K, N), capture_repeat=,
ring=, delay=, duration=, on_demand=, format=, stacks=, ... Pure Python over libcuptrace.so's C
API (include/cuptrace.h) through ctypes; the library is found as _lib.candidates() says.
"""
from __future__ import annotations

from ._session import flush, is_tracing, range, stacks, start, step, stop, trace, \
    under_record, window
from .errors import (CuptraceError, LibraryNotFound, MissingSymbol, ProfilerConflict,
                     RecordOnlyOption)
from .result import PerfettoLink, TraceResult

__version__ = "0.1.0"

__all__ = [
    "start", "stop", "trace", "step", "range", "window", "flush", "stacks", "is_tracing",
    "under_record", "TraceResult", "PerfettoLink", "CuptraceError", "LibraryNotFound",
    "MissingSymbol", "RecordOnlyOption", "ProfilerConflict", "__version__",
]
