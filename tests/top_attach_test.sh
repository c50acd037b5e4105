#!/bin/sh
# cuptrace top attached (top PID..., --job RECORD_PID) on the CPU: a stand-in process
# (fake_watched.py) serves the control socket as the injected library does for "watch DIR"
# and writes a capture from tests/data into DIR. Checked: the kernels top shows summed over its
# --json intervals equal `cuptrace stats --json` of that capture (stats' own sink), the
# directory top gave is private (the stand-in refuses it otherwise), top's quit is the
# process's hang-up (the stand-in goes on and exits 0 after it), --job finds the process
# under a shell that stands in for `cuptrace record`; and the errors: no such process, no
# control socket, a refusal passed on. The real library's side is gpu_top_test.sh's.
set -u
ct=$CUPTRACE_BIN
if ! command -v python3 >/dev/null 2>&1; then
	echo "SKIP: python3 not found"
	exit 77
fi
src=${CUPTRACE_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
tmp=$(mktemp -d "${CUPTRACE_TMP:-/tmp}/topattach.XXXXXX")
. "$src/tests/script_lib.sh"
mkdir -m 700 "$tmp/run"
export XDG_RUNTIME_DIR=$tmp/run
export TMPDIR=$tmp
pids=""
trap 'for p in $pids; do kill $p 2>/dev/null; done; rm -rf "$tmp"' EXIT
cap=$CUPTRACE_TEST_DATA/multi_stream.cupti
"$ct" stats --json "$cap" >"$tmp/stats.json" || { echo "FAIL: stats"; exit 1; }

# Waits for the stand-in's socket (its marker says listening).
started() {
	i=0
	while ! grep -q listening "$1" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
}
check_kernels() { # $1: top's JSON lines
	python3 - "$tmp/stats.json" "$1" <<'PY'
import json, sys
st = json.load(open(sys.argv[1]))
objs = [json.loads(l) for l in open(sys.argv[2])]
want = {n["name"]: (n["count"], n["total_ns"]) for n in st["names"] if n["category"] == "kernel"}
got = {}
for o in objs:
    for r in o["kernels"]:
        c, s = got.get(r["name"], (0, 0))
        got[r["name"]] = (c + r["calls"], s + r["ns"])
if got != want or not want:
    print(f"{len(objs)} intervals: kernels {sorted(got.items())[:3]} want {sorted(want.items())[:3]}")
    sys.exit(1)
PY
}

# top PID: attached, the capture's kernels, the hang-up when top leaves.
python3 "$src/tests/fake_watched.py" "$cap" "$tmp/m1" &
p1=$!
pids="$pids $p1"
started "$tmp/m1"
"$ct" top --json --interval 0.5 --iterations 4 "$p1" >"$tmp/a.jsonl" 2>"$tmp/a.err"
rc=$?
if [ $rc != 0 ] || ! grep -q "left 1 process" "$tmp/a.err"; then
	bad "top PID: exit $rc"; cat "$tmp/a.err"
elif check_kernels "$tmp/a.jsonl"; then ok; else bad "top PID: kernels"; fi
wait $p1
rc=$?
if [ $rc = 0 ] && grep -q hangup "$tmp/m1"; then ok; else bad "top PID: no hang-up seen (exit $rc)"; fi

# --job: the stand-in under a shell standing in for `cuptrace record`, found at a refresh.
sh -c "sleep 0.3; python3 '$src/tests/fake_watched.py' '$cap' '$tmp/m2' & wait" &
job=$!
pids="$pids $job"
"$ct" top --json --interval 0.5 --iterations 5 --job $job >"$tmp/j.jsonl" 2>"$tmp/j.err"
rc=$?
if [ $rc != 0 ] || ! grep -q "left 1 process" "$tmp/j.err"; then
	bad "top --job: exit $rc"; cat "$tmp/j.err"
elif check_kernels "$tmp/j.jsonl"; then ok; else bad "top --job: kernels"; fi
wait $job
if grep -q hangup "$tmp/m2"; then ok; else bad "top --job: no hang-up seen"; fi

# Errors.
python3 "$src/tests/fake_watched.py" "$cap" "$tmp/m3" refuse &
p3=$!
pids="$pids $p3"
started "$tmp/m3"
expect 1 "pid [0-9]*: window 3 is open already" "$ct" top --once "$p3"
kill $p3
sleep 30 &
plain=$!
pids="$pids $plain"
expect 1 "no control socket.*record --on-demand" "$ct" top --once $plain
kill $plain
# The pid of a `cuptrace record` (of a program that uses no CUDA): the hint to use --job.
"$ct" record --no-check -o "$tmp/r.pftrace" -- sleep 30 >/dev/null 2>&1 &
rec=$!
pids="$pids $rec"
sleep 0.5
expect 1 "is a .cuptrace record.: .cuptrace top --job $rec." "$ct" top --once $rec
kill $rec
expect 1 "no process 999999999 is running" "$ct" top --once 999999999
expect 1 "no process 999999999 is running" "$ct" top --once --job 999999999
expect 2 "takes no command" "$ct" top --job 1 -- true
expect 2 "takes a count\|--job takes the pid" "$ct" top --job x
# Nothing was left in TMPDIR by the failed attaches but the first two runs' directories.
left=$(ls -d "$tmp"/cuptrace-top-* 2>/dev/null | wc -l)
if [ "$left" = 2 ]; then ok; else bad "$left top directories left (want 2)"; fi
echo "top attach: $n checks passed"
exit $fail
