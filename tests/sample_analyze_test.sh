#!/bin/sh
# analyze's answer from host stack samples, without a GPU (issue 46 item 3): samples planted in a
# GPU capture (tests/sample_capture.py) inside the largest idle interval of the main thread (15
# in load_batch, 5 in preprocess), inside it on another thread (not counted), just before it
# (not counted), and inside an interval of the other thread (8, all preprocess). analyze must
# count exactly those of the launching thread inside each interval, by frame, in JSON and text;
# and say how to get samples where a trace has none. Per finding: each finding's host_samples are
# those of the launching thread inside its worst instances at least (every instance is a
# superset), and its frames' counts add up to them; --annotate puts them on the finding's slices.
# --group-by line: the host wait of each line, the largest interval's host_wait part split over
# its samples, computed here; the lines' total is the GPUs' host_wait.
set -eu
ct=${CUPTRACE_BIN:?} src=${CUPTRACE_SRC:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$ct" convert "$src/tests/data/torch_train.cupti" -o "$tmp/plain.pftrace"
"$ct" analyze "$tmp/plain.pftrace" >"$tmp/plain.txt"
grep -q "No host stack samples in this trace: \`cuptrace record --sample\`" "$tmp/plain.txt" || {
	echo "FAIL: analyze without samples does not say how to get them"; exit 1; }
"$ct" analyze --json "$tmp/plain.pftrace" >"$tmp/plain.json"
python3 - "$tmp/plain.json" "$tmp/plan.json" "$tmp/want.json" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))
idle = a["largest_idle"]
i1 = next(d for d in idle if d["host_tid"] == 1497)
i2 = next(d for d in idle if d["host_tid"] != 1497)
plan = []
s, d = i1["start_ns"], i1["dur_ns"]
for k in range(20):
    plan.append([s + (k + 0.5) * d / 20, 1497, 1 if k % 4 != 3 else 2])
for k in range(10):
    plan.append([s + (k + 0.5) * d / 10, i2["host_tid"], 2])
for k in range(5):
    plan.append([s - 1_000_000 + k * 100_000, 1497, 2])
s2, d2 = i2["start_ns"], i2["dur_ns"]
for k in range(8):
    plan.append([s2 + (k + 0.5) * d2 / 8, i2["host_tid"], 2])
plan.sort()
json.dump(plan, open(sys.argv[2], "w"))
json.dump({"i1": [i1["start_ns"], 20, {"load_batch (train.py:13)": 15, "preprocess (data.py:7)": 5}],
           "i2": [i2["start_ns"], 8 + sum(1 for k in range(10) if s2 <= s + (k + 0.5) * d / 10 <= s2 + d2),
                  None]}, open(sys.argv[3], "w"))
PY
python3 "$src/tests/sample_capture.py" make "$src/tests/data/torch_train.cupti" "$tmp/s.cupti" "$tmp/plan.json"
"$ct" convert "$tmp/s.cupti" -o "$tmp/s.pftrace"
"$ct" analyze --json "$tmp/s.pftrace" >"$tmp/s.json"
"$ct" analyze "$tmp/s.pftrace" >"$tmp/s.txt"
"$ct" analyze --markdown "$tmp/s.pftrace" >"$tmp/s.md"
"$ct" analyze --annotate "$tmp/ann.json" "$tmp/s.pftrace" >/dev/null
python3 - "$tmp/s.json" "$tmp/want.json" "$tmp/s.txt" "$tmp/s.md" "$tmp/ann.json" "$tmp/plan.json" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))
want = json.load(open(sys.argv[2]))
by_start = {d["start_ns"]: d for d in a["largest_idle"]}
fails = []
t1, n1, f1 = want["i1"]
d = by_start[t1]
got = {f["frame"]: f["samples"] for f in d["host_frames"]}
if d["host_samples"] != n1 or got != f1:
    fails.append(f"interval at {t1}: {d['host_samples']} samples {got}, expected {n1} {f1}")
t2, n2, _ = want["i2"]
d = by_start[t2]
got = {f["frame"]: f["samples"] for f in d["host_frames"]}
if d["host_samples"] != n2 or got != {"preprocess (data.py:7)": n2}:
    fails.append(f"interval at {t2}: {d['host_samples']} samples {got}, expected {n2} preprocess")
text, md = open(sys.argv[3]).read(), open(sys.argv[4]).read()
line = "load_batch (train.py:13) in 75%, preprocess (data.py:7) in 25% of 20 samples"
if line not in text:
    fails.append(f"text: no line with '{line}'")
if "`load_batch (train.py:13)` in 75%" not in md:
    fails.append("markdown: no load_batch line")
# --annotate: the idle interval's slice carries the launching thread and what it was doing.
ann = json.load(open(sys.argv[5]))
evs = ann["traceEvents"] if isinstance(ann, dict) else ann
hit = [e for e in evs if e.get("args", {}).get("host_was")]
want_was = "load_batch (train.py:13) 75%, preprocess (data.py:7) 25% of 20 samples"
if not any(e["args"]["host_was"] == want_was and e["args"].get("host_thread") == 1497 and
           e.get("name") == "host_wait" for e in hit):
    fails.append(f"annotate: no host_wait slice with host_was '{want_was}' (got {[e['args'] for e in hit][:3]})")
# Findings: frames add up to the samples; the worst instances' samples are inside the finding's.
for f in a["findings"]:
    fr = sum(x["samples"] for x in f["host_frames"])
    inst = sum(w["host_samples"] for w in f["worst"])
    if fr > f["host_samples"] or inst > f["host_samples"]:
        fails.append(f"finding {f['id']}: frames {fr}, worst {inst}, samples {f['host_samples']}")
    for w in f["worst"]:
        if w["host_samples"] and not (0 < w["host_frame_samples"] <= w["host_samples"]):
            fails.append(f"finding {f['id']}: instance {w}")
# Each sample owned by one finding at most: the owned counts add up to the distinct samples in
# any finding's intervals, which no finding's own count exceeds and the plan bounds.
owned = sum(f["host_samples_owned"] for f in a["findings"])
most = max((f["host_samples"] for f in a["findings"]), default=0)
if owned != a["findings_host_samples"] or not most <= owned <= len(json.load(open(sys.argv[6]))):
    fails.append(f"owned {owned}, findings_host_samples {a['findings_host_samples']}, "
                 f"largest finding {most}")
if any(f["host_samples_owned"] > f["host_samples"] for f in a["findings"]):
    fails.append("a finding owns more samples than it counts")
with_s = [f for f in a["findings"] if f["host_samples"]]
if not with_s:
    fails.append("no finding has host samples")
fann = [e for e in evs if e.get("args", {}).get("finding_host_was")]
if with_s and not fann:
    fails.append("annotate: no finding slice with finding_host_was")
if "The launching thread was in" not in " ".join(text.split()):
    fails.append("text: no finding says what the launching thread was in")
print(f"interval 1: {n1} samples, interval 2: {n2}, annotated: {len(hit)}, findings with samples: {len(with_s)}")
if fails:
    print("FAIL: " + "; ".join(fails))
    sys.exit(1)
print("ok")
PY

# --group-by line: host wait per line.
"$ct" analyze --group-by line --json "$tmp/s.pftrace" >"$tmp/l.json"
"$ct" analyze --group-by line "$tmp/s.pftrace" >"$tmp/l.txt"
python3 - "$tmp/l.json" "$tmp/plan.json" "$tmp/l.txt" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))
plan = json.load(open(sys.argv[2]))
hl = a["host_wait_lines"]
fails = []
total = sum(g["idle_by_cause_ns"]["host_wait"] for g in a["gpus"])
if hl["host_wait_ns"] != total:
    fails.append(f"host wait total {hl['host_wait_ns']} != GPUs' host_wait {total}")
i1 = next(d for d in a["largest_idle"] if d["host_tid"] == 1497)
g0, hw = i1["start_ns"], i1["idle_by_cause_ns"]["host_wait"]
# load_batch samples were planted in the largest interval alone: its host_wait part's share.
inside = [k for t, tid, k in plan if tid == 1497 and g0 <= t <= g0 + hw]
want = hw * sum(1 for k in inside if k == 1) // len(inside) if inside else 0
rows = {r["line"]: r for r in hl["rows"]}
got = rows.get("load_batch (train.py:13)", {}).get("host_wait_ns", 0)
if got != want:
    fails.append(f"load_batch host wait {got}, expected {want}")
if sum(r["host_wait_ns"] for r in hl["rows"]) + hl["unsampled_ns"] > total:
    fails.append("lines' host wait exceeds the total")
txt = open(sys.argv[3]).read()
if "Host wait by source line" not in txt or "load_batch (train.py:13)" not in txt:
    fails.append("text: no host wait by line table")
print(f"host wait {total} ns, load_batch {got} ns")
if fails:
    print("FAIL: " + "; ".join(fails))
    sys.exit(1)
print("ok")
PY
