"""The call-stack recorder's Python walker, without a GPU: takes stacks from lines marked below
(directly, through a helper, through a lambda, in a loop) by calling into tests/stacks_probe.c,
the same code the tracer runs at a CUDA launch, and checks file, function and line of each frame
against the marks found in this file's text. Usage: stacks_walker.py libstacks_probe.so"""
import ctypes
import os
import sys

lib_path = sys.argv[1]
HERE = os.path.abspath(__file__)
MARKS = {}
with open(HERE) as f:
    for no, text in enumerate(f, 1):
        if "# MARK:" in text:
            MARKS[text.split("# MARK:")[1].strip()] = no

lib = ctypes.PyDLL(lib_path)  # PyDLL: the call keeps the GIL, as a CUDA call from Python does
lib.probe_take.restype = ctypes.c_uint64
lib.probe_count.restype = ctypes.c_uint64
lib.probe_frames.argtypes = [ctypes.c_uint64, ctypes.c_char_p, ctypes.c_size_t]
nogil = ctypes.CDLL(lib_path)  # CDLL releases the GIL around the call
nogil.probe_take.restype = ctypes.c_uint64
failures = []


def frames(sid):
    buf = ctypes.create_string_buffer(1 << 16)
    n = lib.probe_frames(sid, buf, len(buf))
    if n < 0:
        return None
    return [l.split("|") for l in buf.value.decode().splitlines()]


def check(what, sid, expect, outermost="<module>"):
    """expect: (function, mark) innermost last; they must be the stack's innermost frames."""
    fr = frames(sid) if sid else None
    if not fr:
        failures.append(f"{what}: no stack (id {sid})")
        return
    py = [f for f in fr if f[0] == "py"]
    got = [(f[1], f[2], int(f[3])) for f in py[-len(expect):]]
    want = [(fn, HERE, MARKS[m]) for fn, m in expect]
    if got != want:
        failures.append(f"{what}: innermost frames {got}, expected {want}")
    if py[0][1] != outermost:
        failures.append(f"{what}: outermost frame {py[0]}, expected {outermost}")


def direct():
    return lib.probe_take()  # MARK: direct


def helper():
    return lib.probe_take()  # MARK: helper


def through_helper():
    return helper()  # MARK: calls-helper


lam = lambda: helper()  # MARK: lambda


class Model:
    def forward(self):
        return lib.probe_take()  # MARK: method


if lib.probe_init(1) != 0:  # CUPTRACE_STACKS_PYTHON
    sys.exit("probe_init failed")
check("direct", direct(), [("direct", "direct")])
check("helper", through_helper(), [("through_helper", "calls-helper"), ("helper", "helper")])
check("lambda", lam(), [("<lambda>", "lambda"), ("helper", "helper")])
check("method", Model().forward(), [("Model.forward", "method")])
top = lib.probe_take()  # MARK: top
check("module level", top, [("<module>", "top")])

# Interning: one line taken again and again gives one id and one new stack.
ids = set()
for i in range(1000):
    ids.add(direct())  # MARK: loop
    if i == 0:
        before = lib.probe_count()
if len(ids) != 1 or lib.probe_count() != before:
    failures.append(f"interning: ids {ids}, stacks {before} -> {lib.probe_count()}")
# Two call sites of one function are two stacks.
a = through_helper()
b = lam()
if a == b:
    failures.append("two call sites share a stack id")

# With the GIL released around the native call (PyTorch releases it around every op): the
# walker takes it back and finds the same frames as with it held.
def released():
    return nogil.probe_take()  # MARK: released


check("GIL released", released(), [("released", "released")])
# ... and gives it back: another Python thread runs afterwards.
import threading
ran = []
th = threading.Thread(target=lambda: ran.append(released()))
th.start()
th.join(10)
if th.is_alive() or not ran:
    failures.append("the GIL was not given back after a walk that took it")
else:
    check("GIL released, another thread", ran[0], [("released", "released")],
          outermost="Thread._bootstrap")

# --stacks python-held (CUPTRACE_STACKS_PYTHON | CUPTRACE_STACKS_HELD_ONLY): a call with the GIL
# released gets no Python frames (the GIL is never taken), one with it held still does.
lib.probe_init(1 | 4)
if released() != 0:
    failures.append("python-held: a call with the GIL released got a stack")
check("python-held, GIL held", direct(), [("direct", "direct")])
lib.probe_init(1)

# Native frames: the recorder's unwinder (libunwind where installed, else glibc) lists the same
# return addresses as glibc's backtrace() below one C frame, here through ctypes and Python.
name = ctypes.c_char_p()
lib.probe_compare_unwinders.argtypes = [ctypes.POINTER(ctypes.c_char_p)]
nframes = lib.probe_compare_unwinders(ctypes.byref(name))
if nframes < 5:
    failures.append(f"native unwinder {name.value}: frames differ from backtrace() ({nframes})")
else:
    print(f"native unwinder {name.value.decode()}: {nframes} frames equal to backtrace()'s")

# A Python error the program has set stays set, and none is added.
try:
    raise KeyError("x")
except KeyError:
    sid = direct()
    if sys.exc_info()[0] is not KeyError:
        failures.append("the walker changed the exception being handled")

# Cost of a repeated stack (walk + hash + probe), for the report.
import time
t0 = time.perf_counter_ns()
for _ in range(20000):
    direct()
t1 = time.perf_counter_ns()
loop = time.perf_counter_ns()
for _ in range(20000):
    len(ids)
loop = time.perf_counter_ns() - loop
print(f"python stack, repeated: {(t1 - t0 - loop) / 20000:.0f} ns per take (with the ctypes call)")

if failures:
    print("FAIL:\n  " + "\n  ".join(failures))
    sys.exit(1)
print(f"ok: {len(MARKS)} call sites, {lib.probe_count()} stacks")
