"""The package's exceptions: all are CuptraceError, so `except cuptrace.CuptraceError` catches
every refusal of the package itself (the traced program's own errors pass through untouched)."""
from __future__ import annotations

from typing import Optional


class CuptraceError(RuntimeError):
    """Tracing could not do what was asked; the message says why and what to do."""


class LibraryNotFound(CuptraceError):
    """libcuptrace.so was not found or could not be loaded."""


class MissingSymbol(CuptraceError):
    """The loaded libcuptrace.so lacks a C entry point this call needs (an older library)."""

    def __init__(self, symbol: str, path: Optional[str] = None) -> None:
        self.symbol = symbol
        super().__init__(
            "cuptrace: the library %s has no C function %s(); this call needs a newer "
            "libcuptrace.so" % (path or "libcuptrace.so", symbol))


class RecordOnlyOption(CuptraceError):
    """An option only `cuptrace record` can honour (it acts before the program starts)."""


class ProfilerConflict(CuptraceError):
    """torch.profiler and cuptrace would both need CUPTI, which serves one subscriber."""
