"""Checks the Chrome JSON traces written by tests/gpu_pytorch_test.sh.
  check_pytorch.py TMPDIR N"""
import json
import os
import sys

tmp, n = sys.argv[1], int(sys.argv[2])
fails = []


def load(name):
    with open(os.path.join(tmp, name)) as f:
        return [e for e in json.load(f) if e.get("ph") == "X"]


def names(ev, cat):
    return [e["name"] for e in ev if e.get("cat") == cat]


pt, plain, full, watch, nomarks = (load(x) for x in ("pt.json", "plain.json", "all.json",
                                                     "watch.json", "nomarks.json"))
ops = [e for e in pt if e.get("cat") == "nvtx" and e["name"].startswith("aten::")]
mm = [e for e in ops if e["name"] == "aten::mm"]
print("op slices %d, aten::mm %d" % (len(ops), len(mm)))
# aten::mm: the explicit one each step, and the Linear's weight gradient in its backward (its
# forward is an addmm): 2n in all.
if len(mm) != 2 * n:
    fails.append("aten::mm slices: %d, expected %d" % (len(mm), 2 * n))
dirty = [e["name"] for e in pt if e.get("cat") == "nvtx" and (", seq =" in e["name"] or
                                                                ", op_id =" in e["name"])]
if dirty:
    fails.append("op names not cleaned: %s" % dirty[:3])
if not any("seq" in e.get("args", {}) for e in ops):
    fails.append("no op slice carries its sequence number")
mods = [e for e in pt if e.get("cat") == "nvtx" and e["name"] == "nn.Module: Linear"]
if len(mods) != n:
    fails.append("nn.Module: Linear slices: %d, expected %d" % (len(mods), n))
# Every launch made by PyTorch sits inside an op on the same thread.
launches = [e for e in pt if e.get("cat") in ("cuda_runtime", "cuda_driver")
            and "Launch" in e["name"]]
outside = [l for l in launches if not any(
    o["tid"] == l["tid"] and o["ts"] <= l["ts"] and l["ts"] + l["dur"] <= o["ts"] + o["dur"]
    for o in ops)]
print("launches %d, outside any op %d" % (len(launches), len(outside)))
if not launches or outside:
    fails.append("%d of %d launches are not inside an op slice" % (len(outside), len(launches)))
kernels = {x: len(names(ev, "kernel")) for x, ev in (("pytorch", pt), ("plain", plain))}
print("kernels", kernels)
if kernels["pytorch"] != kernels["plain"] or not kernels["plain"]:
    fails.append("kernel counts differ with --pytorch: %s" % kernels)
gd = {x: names(ev, "cuda_runtime").count("cudaGetDevice")
      for x, ev in (("default", plain), ("all", full))}
print("cudaGetDevice slices", gd)
if gd["default"] != 0 or gd["all"] < n:
    fails.append("cudaGetDevice: %s (none by default, some with --runtime all)" % gd)
bad = [e for e in watch if e["name"] == "cudaSetDevice" and e.get("args", {}).get(
    "return_value", 0) not in (0, "0")]
print("failed cudaSetDevice kept by --runtime watch: %d" % len(bad))
if len(bad) != 1:
    fails.append("--runtime watch kept %d failed cudaSetDevice calls, expected 1" % len(bad))
# record's default step marks: one "optimizer.step" NVTX slice per step on the thread that
# called it, holding the optimizer's launches; --pytorch nests it in Optimizer.step#SGD.step;
# --no-step-marks leaves it out.
for name, ev, want in (("plain", plain, n), ("pytorch", pt, n), ("--no-step-marks", nomarks, 0)):
    marks = [e for e in ev if e.get("cat") == "nvtx" and e["name"] == "optimizer.step"]
    print("%s: optimizer.step slices %d" % (name, len(marks)))
    if len(marks) != want:
        fails.append("%s: %d optimizer.step slices, expected %d" % (name, len(marks), want))
    inside = [l for l in ev if l.get("cat") in ("cuda_runtime", "cuda_driver") and
              "Launch" in l["name"] and any(m["tid"] == l["tid"] and m["ts"] <= l["ts"] and
                                            l["ts"] <= m["ts"] + m["dur"] for m in marks)]
    if want and not inside:
        fails.append("%s: no launch inside an optimizer.step slice" % name)
outer = [e for e in pt if e.get("cat") == "nvtx" and e["name"].startswith("Optimizer.step#")]
if len(outer) != n:
    fails.append("--pytorch: %d Optimizer.step# slices, expected %d" % (len(outer), n))
for f in fails:
    print("FAIL:", f)
sys.exit(1 if fails else 0)
