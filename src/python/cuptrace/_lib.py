"""Finding and loading libcuptrace.so, and calling its C API (include/cuptrace.h) through ctypes.

One library per process: under `cuptrace record` the CUDA driver has loaded the file named in
CUDA_INJECTION64_PATH, and loading that same file again gives the same instance (dlopen returns
the handle it already holds), so the package and the injected tracer share one session. Loaded on
first use, never at import: `import cuptrace` costs nothing and works without the library.
Thread-safety: the loaded handle is set once under _LOCK; the C functions are thread-safe.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import shutil
import threading
from typing import Callable, List, Optional

from .errors import CuptraceError, LibraryNotFound, MissingSymbol

LIB_NAME = "libcuptrace.so"
_LOCK = threading.Lock()
_lib: Optional[ctypes.CDLL] = None
_lib_path: Optional[str] = None


def _package_dir() -> str:
    return os.path.dirname(os.path.abspath(__file__))


def _under_record() -> Optional[str]:
    """The injected library's path when `cuptrace record` (it sets CUPTRACE_JOB, and --lib may
    name any file) or anyone else injected cuptrace."""
    p = os.environ.get("CUDA_INJECTION64_PATH")
    if p and os.path.isfile(p) and ("cuptrace" in os.path.basename(p) or
                                    os.environ.get("CUPTRACE_JOB")):
        return p
    return None


def candidates(lib: Optional[str] = None) -> List[str]:
    """The places looked at, in order (the first that exists is loaded):
    `lib` (record's --lib); under record CUDA_INJECTION64_PATH (the same instance); CUPTRACE_LIB;
    beside the package (build tree: <build>/python/cuptrace -> <build>/libcuptrace.so;
    installed: <prefix>/share/cuptrace/python/cuptrace -> <prefix>/lib[/<multiarch>]); beside
    the `cuptrace` command on PATH (<prefix>/bin -> <prefix>/lib); then the linker's search
    (ldconfig)."""
    out: List[str] = []
    if lib:
        return [lib]
    inj = _under_record()
    if inj:
        return [inj]  # anything else would be a second, separate tracer in this process
    env = os.environ.get("CUPTRACE_LIB")
    if env:
        return [env]
    here = _package_dir()
    build = os.path.dirname(os.path.dirname(here))  # <build>/python/cuptrace -> <build>
    out.append(os.path.join(build, LIB_NAME))
    prefix = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(here))))
    out += _lib_dirs_of(prefix)
    cli = shutil.which("cuptrace")
    if cli:
        out += _lib_dirs_of(os.path.dirname(os.path.dirname(os.path.realpath(cli))))
    found = ctypes.util.find_library("cuptrace")
    if found:
        out.append(found)
    return out


def _lib_dirs_of(prefix: str) -> List[str]:
    """<prefix>/lib/libcuptrace.so, <prefix>/lib64/..., <prefix>/lib/<multiarch>/..."""
    out = []
    for d in ("lib", "lib64"):
        top = os.path.join(prefix, d)
        out.append(os.path.join(top, LIB_NAME))
        try:
            subs = sorted(os.listdir(top))
        except OSError:
            continue
        out += [os.path.join(top, s, LIB_NAME) for s in subs if "-linux-" in s]
    return out


def load(lib: Optional[str] = None) -> ctypes.CDLL:
    """The library, loaded once per process. A later `lib` that names another file is an
    error: two tracers in one process would fight over CUPTI."""
    global _lib, _lib_path
    with _LOCK:
        if _lib is not None:
            if lib and os.path.realpath(lib) != os.path.realpath(_lib_path or ""):
                raise CuptraceError(
                    "cuptrace: %s is loaded already; lib=%r cannot replace it in this process"
                    % (_lib_path, lib))
            return _lib
        tried = candidates(lib)
        for path in tried:
            # ldconfig's answer is a bare soname: let dlopen search for it.
            if os.sep in path and not os.path.isfile(path):
                continue
            try:
                handle = ctypes.CDLL(path)
            except OSError as e:
                raise LibraryNotFound("cuptrace: cannot load %s: %s" % (path, e)) from e
            _declare(handle)
            _lib, _lib_path = handle, path
            return handle
        raise LibraryNotFound(
            "cuptrace: libcuptrace.so not found (looked at: %s). Set CUPTRACE_LIB to its path, "
            "or pass lib=..." % (", ".join(tried) or "nothing"))


def loaded_path() -> Optional[str]:
    """The loaded library's path, or None before the first call that needs it."""
    return _lib_path


# Entry points of a newer library (include/cuptrace.h); an older one lacks them, and the calls
# that need them fall back or fail naming the symbol (fn, optional_fn).
_OPTIONAL_ARGS = {
    "cuptrace_end": [],
    "cuptrace_range_push": [ctypes.c_char_p],
    "cuptrace_range_pop": [],
    "cuptrace_setting_check": [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                               ctypes.c_size_t],
}


def _declare(h: ctypes.CDLL) -> None:
    for name in ("cuptrace_start",):
        _fn(h, name).argtypes = [ctypes.c_char_p]
    for name in ("cuptrace_stop", "cuptrace_flush", "cuptrace_step"):
        _fn(h, name).argtypes = []
    _fn(h, "cuptrace_stacks").argtypes = [ctypes.c_int]
    for name, args in _OPTIONAL_ARGS.items():
        try:
            f = getattr(h, name)
        except AttributeError:
            continue
        f.argtypes, f.restype = args, ctypes.c_int


def _fn(h: ctypes.CDLL, name: str) -> Callable[..., int]:
    try:
        f = getattr(h, name)
    except AttributeError:
        raise MissingSymbol(name, _lib_path) from None
    f.restype = ctypes.c_int
    return f  # type: ignore[no-any-return]


def fn(name: str) -> Callable[..., int]:
    """A C entry point by name, looked up at call time (so a library without an optional one,
    such as cuptrace_range_push, fails only when it is used, naming the symbol)."""
    return _fn(load(), name)


def optional_fn(name: str) -> Optional[Callable[..., int]]:
    """As fn(), or None where the library lacks it."""
    try:
        return fn(name)
    except MissingSymbol:
        return None


def strerror(rc: int) -> str:
    """A negative errno as words ("-114 (EALREADY: Operation already in progress)")."""
    code = -rc
    return "%d (%s: %s)" % (rc, errno.errorcode.get(code, "?"), os.strerror(code))


def _reset_for_tests() -> None:
    """Forget the loaded library (tests load stubs one after another in one process)."""
    global _lib, _lib_path
    with _LOCK:
        _lib, _lib_path = None, None
