#!/usr/bin/env python3
"""Planted host stalls for tests/gpu_sample_test.sh (issue 46): a feeding thread (not the main
thread) that, each step, loads a batch (sleeps), preprocesses it with numpy (pure Python where
numpy is missing), waits on a lock another thread holds, tokenizes in a pure-Python loop, then
launches GPU work through the CUDA runtime (ctypes: no framework needed) and synchronizes. It
measures the time of each phase itself and prints, last, one line:
  RESULT {"tid": feeder's thread id, "phases": {name: seconds}, "lines": {name: [lines]},
          "file": this file, "t0"/"t1": CLOCK_BOOTTIME ns around the steps}
  sample_stalls.py [STEPS]"""
import ctypes
import ctypes.util
import glob
import json
import os
import sys
import threading
import time

HERE = os.path.abspath(__file__)
MARKS = {}
with open(HERE) as f:
    for no, text in enumerate(f, 1):
        if "# MARK:" in text:
            MARKS.setdefault(text.split("# MARK:")[1].split()[0], []).append(no)

try:
    import numpy
except ImportError:
    numpy = None


def cudart():
    names = [ctypes.util.find_library("cudart")] + sorted(
        glob.glob("/usr/local/cuda*/lib64/libcudart.so*"), reverse=True)
    for n in names:
        if n:
            try:
                return ctypes.CDLL(n)
            except OSError:
                pass
    sys.exit("SKIP: no libcudart")


rt = cudart()
phases = {"load_batch": 0.0, "preprocess": 0.0, "wait_lock": 0.0, "tokenize": 0.0, "gpu": 0.0}
lock = threading.Lock()
holder_go = threading.Event()


def load_batch():
    time.sleep(0.025)  # MARK: load_batch


def preprocess():
    end = time.perf_counter() + 0.010  # MARK: preprocess
    if numpy is not None:  # MARK: preprocess
        a = numpy.ones((256, 256))  # MARK: preprocess
        while time.perf_counter() < end:  # MARK: preprocess
            a = numpy.sqrt(a @ a.T / 256.0)  # MARK: preprocess
    else:
        x = 0
        while time.perf_counter() < end:  # MARK: preprocess
            x += 1  # MARK: preprocess


def holder():
    while True:
        holder_go.wait()
        holder_go.clear()
        with lock:
            time.sleep(0.010)


def wait_lock():
    holder_go.set()
    while not lock.locked():  # let the holder take it first
        time.sleep(0)  # MARK: wait_lock
    with lock:  # MARK: wait_lock
        pass


def tokenize():
    end = time.perf_counter() + 0.010
    toks = []
    while time.perf_counter() < end:  # MARK: tokenize
        toks = [w.lower() for w in "The Quick brown FOX jumps".split()]  # MARK: tokenize
    return toks


def feeder(steps, out):
    out["tid"] = threading.get_native_id()
    buf = ctypes.c_void_p()
    assert rt.cudaMalloc(ctypes.byref(buf), ctypes.c_size_t(1 << 24)) == 0
    rt.cudaDeviceSynchronize()
    out["t0"] = time.clock_gettime_ns(time.CLOCK_BOOTTIME)
    for _ in range(steps):
        for name, fn in (("load_batch", load_batch), ("preprocess", preprocess),
                         ("wait_lock", wait_lock), ("tokenize", tokenize)):
            t = time.perf_counter()
            fn()
            phases[name] += time.perf_counter() - t
        t = time.perf_counter()
        rt.cudaMemset(buf, 1, ctypes.c_size_t(1 << 24))
        rt.cudaDeviceSynchronize()
        phases["gpu"] += time.perf_counter() - t
    out["t1"] = time.clock_gettime_ns(time.CLOCK_BOOTTIME)


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    threading.Thread(target=holder, daemon=True, name="holder").start()
    out = {}
    t = threading.Thread(target=feeder, args=(steps, out), name="feeder")
    t.start()
    t.join()
    print("RESULT " + json.dumps({"tid": out["tid"], "main_tid": threading.get_native_id(),
                                  "phases": phases, "lines": MARKS, "file": HERE,
                                  "numpy": numpy is not None, "t0": out["t0"],
                                  "t1": out["t1"]}))


main()
