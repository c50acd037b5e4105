#!/bin/sh
# GPU test of cuptrace top: `top --iterations 8 --json -- launch_storm 1 14` watches a program
# that launches kernels back to back for 14 s (the converter releases GPU work up to 3 s of
# trace time late: 8 intervals leave room for it). Asserts: some interval shows kernels/s > 0 and a
# GPU busy above 0; every kernel name top shows is one that `record` of the same program
# records (stats --json of that trace); top quits after its 8 intervals while the program goes
# on (the message names the record pid), the program then finishes on its own, and the capture
# top left has exactly as many kernels as the program says it launched (its own count, on
# stderr in the run's output.log). Skips without a GPU.
set -u
gpu_test=gpu_top
. "$(dirname "$0")/gpu_common.sh"
fail=0
if ! command -v python3 >/dev/null 2>&1; then
	echo "SKIP: python3 not found (needed to parse the JSON)"
	exit 77
fi
# The names a plain record of the program has.
if ! timeout 120 "$ct" record -o "$tmp/ref.pftrace" -- "$ex/launch_storm" 1 2 >"$tmp/rec.log" 2>&1 ||
	! "$ct" stats --json "$tmp/ref.pftrace" >"$tmp/ref.json"; then
	echo "FAIL: record of launch_storm"; cat "$tmp/rec.log"; exit 1
fi
timeout 120 "$ct" top --iterations 8 --json -- "$ex/launch_storm" 1 14 >"$tmp/top.jsonl" 2>"$tmp/top.err"
rc=$?
cat "$tmp/top.err"
[ $rc = 0 ] || { echo "FAIL: top exited $rc"; fail=1; }
python3 - "$tmp/top.jsonl" "$tmp/ref.json" <<'PY' || fail=1
import json, sys
objs = [json.loads(l) for l in open(sys.argv[1])]
ref = {n["name"] for n in json.load(open(sys.argv[2]))["names"] if n["category"] == "kernel"}
bad = []
if len(objs) != 8:
    bad.append(f"{len(objs)} intervals, want 8")
kps = [o["kernels_per_s"] for o in objs]
if not any(k > 0 for k in kps):
    bad.append(f"kernels/s never above 0: {kps}")
busy = [g["busy_pct"] for o in objs for g in o["gpus"]]
if not any(b > 0 for b in busy):
    bad.append(f"GPU busy never above 0: {busy}")
names = {k["name"] for o in objs for k in o["kernels"]}
if not names or not names <= ref:
    bad.append(f"kernel names {sorted(names)} not among record's {sorted(ref)}")
print(f"top: kernels/s per interval {kps}, busy % {busy}, names {sorted(names)}")
for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)
PY
# top left the program running: wait for `record` to finish, then count the capture.
rpid=$(sed -n 's/.*goes on (record pid \([0-9]*\)).*/\1/p' "$tmp/top.err")
dir=$(sed -n 's/.*its captures: \([^,]*\), its output.*/\1/p' "$tmp/top.err")
if [ -z "$rpid" ] || [ -z "$dir" ]; then
	echo "FAIL: top did not say that the program goes on, or where its capture is"
	fail=1
else
	i=0
	while kill -0 "$rpid" 2>/dev/null && [ $i -lt 600 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	launched=$(sed -n 's/.*launch_storm: \([0-9]*\) kernels launched.*/\1/p' "$dir/output.log")
	got=$("$ct" stats --json "$dir/top.cupti" 2>/dev/null | python3 -c '
import json, sys
print(sum(n["count"] for n in json.load(sys.stdin)["names"] if n["category"] == "kernel"))')
	if [ -n "$launched" ] && [ "$got" = "$launched" ]; then
		echo "ok: the program went on after top quit; its capture holds all $got kernels"
	else
		echo "FAIL: capture $dir/top.cupti has ${got:-?} kernels, the program launched ${launched:-?}"
		cat "$dir/output.log"
		fail=1
	fi
	rm -rf "$dir"
fi
rm -rf "$tmp"
[ $fail = 0 ] && echo "gpu_top: passed"
exit $fail
