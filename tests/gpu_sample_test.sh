#!/bin/sh
# GPU test of sampled host stacks (issue 46): tests/sample_stalls.py plants, on a feeding thread
# that is not the main thread, a sleep in load_batch, numpy preprocessing, a wait on a lock held
# by another thread and a pure-Python tokenizer loop, and measures each phase itself. Recorded
# with `record --sample` (100 Hz), the feeding thread's samples (and only its: the other threads
# never call CUDA) must name each planted function at its planted lines, with a share within 4
# points of the measured time. Needs a build without the sanitizers (python3 loads the library).
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
rm -rf "$tmp"
exit $rc
