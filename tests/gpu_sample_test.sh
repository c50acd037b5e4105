#!/bin/sh
# GPU test of sampled host stacks (issue 46): tests/sample_stalls.py plants, on a feeding thread
# that is not the main thread, a sleep in load_batch, numpy preprocessing, a wait on a lock held
# by another thread and a pure-Python tokenizer loop, and measures each phase itself. Recorded
# with `record --sample` (100 Hz), the feeding thread's samples (and only its: the other threads
# never call CUDA) must name each planted function at its planted lines, with a share within 4
# points of the measured time. Then a DataLoader with worker processes (tests/sample_dataloader.py,
# needs PyTorch): analyze must name the main thread's wait for the next batch, each sample owned
# by one finding. The first trace merged with itself keeps every sample. Needs a build without
# the sanitizers (python3 loads the library).
set -u
gpu_test=gpu_sample
# shellcheck source=tests/gpu_common.sh
. "$(dirname "$0")/gpu_common.sh"
src=$(cd "$(dirname "$0")" && pwd)
out=$tmp/stalls.pftrace
if ! "$ct" record --sample -o "$out" -- python3 "$src/sample_stalls.py" 60 >"$tmp/run.log" 2>&1; then
	if grep -q "^SKIP" "$tmp/run.log"; then
		grep "^SKIP" "$tmp/run.log"; rm -rf "$tmp"; exit 77
	fi
	echo "FAIL: record --sample"; tail -20 "$tmp/run.log"; rm -rf "$tmp"; exit 1
fi
sed -n 's/^RESULT //p' "$tmp/run.log" >"$tmp/result.json"
python3 - "$tmp/result.json" "$out" "$src" <<'PY'
import collections, json, sys
sys.path.insert(0, sys.argv[3])
from pf_samples import samples
r = json.load(open(sys.argv[1]))
got = samples(sys.argv[2])
fails = []
tids = collections.Counter(tid for _, _, tid, _ in got)
if set(tids) != {r["tid"]} or r["tid"] == r["main_tid"]:
    fails.append(f"sampled threads {dict(tids)}, expected only the feeder {r['tid']}")
# The samples inside the steps, each attributed to its innermost frame in the planted file.
mine = [fr for t, _, tid, fr in got if tid == r["tid"] and r["t0"] <= t <= r["t1"]]
names = {"load_batch", "preprocess", "wait_lock", "tokenize"}
share = collections.Counter()
bad_lines = collections.Counter()
for fr in mine:
    user = [f for f in fr if f[1] == r["file"]]
    if not user:
        share["(no frame of the program)"] += 1
        continue
    fn, _, line = user[-1]
    share[fn] += 1
    if fn in names and line not in r["lines"][fn]:
        bad_lines[(fn, line)] += 1
n = len(mine)
total = sum(r["phases"].values())
expect = 100 * (r["t1"] - r["t0"]) / 1e9
print(f"{n} samples of the feeder in the steps (about {expect:.0f} expected at 100 Hz)")
if not 0.85 * expect <= n <= 1.05 * expect:
    fails.append(f"{n} samples, expected about {expect:.0f}")
for name in sorted(names):
    want = r["phases"][name] / total
    have = share[name] / max(n, 1)
    print(f"  {name:11s} sampled {100 * have:5.1f}%  measured {100 * want:5.1f}%")
    if abs(have - want) > 0.04:
        fails.append(f"{name}: {100 * have:.1f}% of the samples, {100 * want:.1f}% of the time")
if bad_lines:
    fails.append(f"samples at lines that are not the planted ones: {dict(bad_lines)}")
print("  other:", {k: v for k, v in share.items() if k not in names})
if fails:
    print("FAIL: " + "; ".join(fails))
    sys.exit(1)
print("ok")
PY
rc=$?
# The recorded trace merged with itself: both copies keep every sample, on their threads, with
# their frames, moved as their slices (tests/merge_samples_check.py).
if [ $rc -eq 0 ]; then
	"$ct" merge --side-by-side --no-align --label A --label B "$out" "$out" \
		-o "$tmp/m.pftrace" 2>"$tmp/m.err" &&
		python3 "$src/merge_samples_check.py" "$tmp/m.pftrace" "$tmp/m.err" "A:-:-:$out" \
			"B:-:-:$out" || { echo "FAIL: merge of the recorded trace"; cat "$tmp/m.err"; rc=1; }
fi
# A DataLoader with worker processes slower than the GPU: the main thread waits on its queue,
# and analyze (every finding and idle interval of that thread) must say it was at the loop's
# line waiting for the next batch, in a share near the time it measured waiting.
dl=$tmp/dl.pftrace
if [ $rc -eq 0 ]; then
	"$ct" record --sample -o "$dl" -- python3 "$src/sample_dataloader.py" 60 >"$tmp/dl.log" 2>&1
	drc=$?
	if grep -q "^SKIP" "$tmp/dl.log"; then
		echo "DataLoader case: $(grep "^SKIP" "$tmp/dl.log")"
	elif [ $drc -ne 0 ]; then
		echo "FAIL: record --sample (DataLoader)"; tail -20 "$tmp/dl.log"; rc=1
	else
		sed -n 's/^RESULT //p' "$tmp/dl.log" >"$tmp/dl.json"
		"$ct" analyze --json "$dl" >"$tmp/dl_an.json" || rc=1
		python3 - "$tmp/dl.json" "$tmp/dl_an.json" <<'PY' || rc=1
import json, sys
r = json.load(open(sys.argv[1]))
a = json.load(open(sys.argv[2]))
fails = []
want_share = r["wait_s"] / r["step_s"]
# The largest idle intervals on the main thread: their top frame is the loop's line.
mine = [d for d in a["largest_idle"] if d["host_tid"] == r["main_tid"] and d["host_samples"]]
if not mine:
    fails.append("no idle interval of the main thread with samples")
for d in mine:
    top = d["host_frames"][0]
    if top["frame"] != r["frame"] or top["samples"] < 0.8 * d["host_samples"]:
        fails.append(f"idle at {d['start_ns']}: {d['host_frames']} of {d['host_samples']}, expected {r['frame']}")
# The finding holding the idle (gpu_gap, or whichever holds most samples): the loop's line first.
fs = sorted((f for f in a["findings"] if f["host_samples"]), key=lambda f: -f["host_samples"])
if not fs:
    fails.append("no finding with host samples")
else:
    f = fs[0]
    top = f["host_frames"][0]
    share = top["samples"] / f["host_samples"]
    print(f"DataLoader: finding {f['id']}: {top['frame']} in {100 * share:.0f}% of "
          f"{f['host_samples']} samples; main thread waited {100 * want_share:.0f}% of the loop")
    if top["frame"] != r["frame"] or share < 0.8:
        fails.append(f"finding {f['id']}: {f['host_frames']}, expected {r['frame']} first")
# Each sample owned by one finding: the owned counts add up to the samples in any finding.
owned = sum(f["host_samples_owned"] for f in a["findings"])
if owned != a["findings_host_samples"] or any(f["host_samples_owned"] > f["host_samples"]
                                              for f in a["findings"]):
    fails.append(f"owned samples {owned}, findings_host_samples {a['findings_host_samples']}")
if fails:
    print("FAIL: " + "; ".join(fails))
    sys.exit(1)
print("ok (DataLoader)")
PY
	fi
fi
rm -rf "$tmp"
exit $rc
