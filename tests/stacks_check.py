"""Checks call stacks in a Chrome JSON trace (the "stack" argument, innermost frame first):
  stacks_check.py python TRACE SOURCE.py   every GPU slice launched from SOURCE's marked sites
      has SOURCE:line innermost among SOURCE's frames, and each marked site is seen
  stacks_check.py native TRACE PROGRAM [RAN]  memset/memcpy slices have frames in RAN (default
      PROGRAM; a stripped copy) whose offsets lie inside c(), b() and a() (from `nm PROGRAM`)"""
import json
import os
import re
import subprocess
import sys

mode, trace, src = sys.argv[1:4]
with open(trace) as f:
    doc = json.load(f)
events = doc["traceEvents"] if isinstance(doc, dict) else doc
gpu = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "memcpy", "memset")]
api = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver")]
fail = []
if mode == "python":
    marks = {}
    for no, text in enumerate(open(src), 1):
        if "# SITE:" in text:
            marks[no] = text.split("# SITE:")[1].strip()
    base = os.path.basename(src)
    seen = set()
    with_stack = 0
    for e in gpu + api:
        st = e.get("args", {}).get("stack")
        if not st:
            continue
        with_stack += 1
        ours = [l for l in st.splitlines() if re.search(r"\((.*/)?%s:\d+\)$" % re.escape(base), l)]
        if not ours:
            continue
        line = int(ours[0].rsplit(":", 1)[1].rstrip(")"))
        if line not in marks:
            fail.append(f"{e['name']}: innermost line {line} of {base} is no marked site:\n{st}")
        else:
            seen.add(marks[line])
    if not with_stack:
        fail.append("no slice has a stack")
    want = ["direct", "helper", "lambda", "sync"]
    if "cuptrace_stacks(0)" in open(src).read():
        # launched while stacks were paused: four neg kernels, none with a stack
        want.append("resumed")
        neg = [e for e in gpu if "neg_kernel" in e["name"]]
        if len(neg) != 4 or any(e.get("args", {}).get("stack") for e in neg):
            fail.append(f"{len(neg)} neg kernels (4 expected), "
                        f"{sum(1 for e in neg if e.get('args', {}).get('stack'))} with a stack (0 expected)")
        # the trace's metadata: the args of its last "cuptrace: summary" instant
        summ = [e.get("args", {}) for e in events if e.get("name") == "cuptrace: summary"]
        paused = summ[-1].get("call_stacks_paused") if summ else None
        if str(paused) != "1":
            fail.append(f"metadata call_stacks_paused is {paused!r}, 1 expected")
        print(f"paused: {len(neg)} neg kernels, call_stacks_paused {paused}")
    for m in want:
        if m not in seen:
            fail.append(f"site {m} not seen (seen: {sorted(seen)})")
    gpu_with = sum(1 for e in gpu if e.get("args", {}).get("stack"))
    print(f"{with_stack} slices with stacks ({gpu_with} of {len(gpu)} GPU slices); sites {sorted(seen)}")
else:
    syms = {}
    out = subprocess.run(["nm", "-S", src], capture_output=True, text=True, check=True).stdout
    for l in out.splitlines():
        p = l.split()
        if len(p) == 4 and p[3] in ("a", "b", "c"):
            syms[p[3]] = (int(p[0], 16), int(p[0], 16) + int(p[1], 16))
    if set(syms) != {"a", "b", "c"}:
        sys.exit(f"FAIL: nm found {syms} in {src}")
    prog = os.path.basename(sys.argv[4] if len(sys.argv) > 4 else src)
    checked = 0
    for e in gpu:
        st = e.get("args", {}).get("stack")
        if not st:
            fail.append(f"{e['name']} has no stack")
            continue
        offs = [int(m.group(1), 16) for m in re.finditer(r"%s\+0x([0-9a-f]+)" % re.escape(prog), st)]
        names = [n for o in offs for n, (lo, hi) in syms.items() if lo <= o < hi]
        named = re.findall(r"^(\w+) \(.*stacks_prog\.c:\d+\)$", st, re.M)
        if named:
            # symbolized on the way (convert does so): the functions named at stacks_prog.c lines
            names = named
        if names[:3] != ["c", "b", "a"]:
            fail.append(f"{e['name']}: frames in {prog} fall in {names}, expected c, b, a:\n{st}")
        checked += 1
    if not checked:
        fail.append("no memset/memcpy slices")
    print(f"{checked} GPU slices with c <- b <- a in {prog}")
if fail:
    print("FAIL:\n" + "\n".join(fail[:10]))
    sys.exit(1)
print("ok")
