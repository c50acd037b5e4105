#!/bin/sh
# Regressions of torch.profiler inputs, on a small trace written here (no external files):
# busy time counts kernels, copies and memsets only (a gpu_user_annotation spanning them and a
# cuda_sync do not count), one launch feeding three kernels keeps three arrows, "ProfilerStep"
# in diff --per counts "ProfilerStep#N", share --window takes "ProfilerStep#2" as that range,
# an empty file is refused. Expectations come from tests/kineto_check.py's reading of the JSON.
set -u
ct=$CUPTRACE_BIN
src=${CUPTRACE_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
if ! command -v python3 >/dev/null 2>&1; then
	echo "SKIP: python3 not found"
	exit 77
fi
tmp=$(mktemp -d "${CUPTRACE_TMP:-/tmp}/kinetoin.XXXXXX")
. "$src/tests/script_lib.sh"
t=$tmp/t.json
cat >"$t" <<'JSON'
{"schemaVersion": 1, "distributedInfo": {"rank": 0, "world_size": 2},
 "traceEvents": [
 {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 10, "tid": 10, "ts": 1000, "dur": 500},
 {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "pid": 10, "tid": 10, "ts": 1600, "dur": 400},
 {"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "pid": 10, "tid": 10, "ts": 1010, "dur": 20, "args": {"correlation": 7}},
 {"ph": "s", "id": 7, "pid": 10, "tid": 10, "ts": 1010, "cat": "ac2g", "name": "ac2g"},
 {"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#1", "pid": 0, "tid": 7, "ts": 1000, "dur": 900},
 {"ph": "X", "cat": "kernel", "name": "k1", "pid": 0, "tid": 7, "ts": 1100, "dur": 100, "args": {"correlation": 7}},
 {"ph": "f", "id": 7, "pid": 0, "tid": 7, "ts": 1100, "cat": "ac2g", "name": "ac2g", "bp": "e"},
 {"ph": "X", "cat": "kernel", "name": "k2", "pid": 0, "tid": 7, "ts": 1250, "dur": 100, "args": {"correlation": 7}},
 {"ph": "f", "id": 7, "pid": 0, "tid": 7, "ts": 1250, "cat": "ac2g", "name": "ac2g", "bp": "e"},
 {"ph": "X", "cat": "kernel", "name": "k3", "pid": 0, "tid": 8, "ts": 1300, "dur": 200, "args": {"correlation": 7}},
 {"ph": "f", "id": 7, "pid": 0, "tid": 8, "ts": 1300, "cat": "ac2g", "name": "ac2g", "bp": "e"},
 {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "pid": 0, "tid": 7, "ts": 1700, "dur": 50},
 {"ph": "X", "cat": "cuda_sync", "name": "Stream Sync", "pid": 0, "tid": 7, "ts": 1800, "dur": 90}
 ]}
JSON
want=$(python3 "$src/tests/kineto_check.py" "$t")
if "$ct" stats --json "$t" >"$tmp/s.json" 2>"$tmp/err"; then
	if python3 - "$tmp/s.json" "$want" <<'PY'; then ok; else bad "stats of the small trace"; fi
import json, sys
got, want = json.load(open(sys.argv[1])), json.loads(sys.argv[2])
# k1 alone, k2 and k3 overlapping, the copy (us -> ns); the annotation and sync not
assert want["busy_ns"] == 1000 * ((1200 - 1100) + (1500 - 1250) + (1750 - 1700)), want
assert want["flows"] == 3, want
k = sum(n["count"] for n in got["names"] if n["category"] == "kernel")
ok = (got["gpu_busy_ns"], got["flows"]["complete"], k) == (want["busy_ns"], want["flows"], want["kernels"])
if not ok:
    print("stats", got["gpu_busy_ns"], got["flows"], k, "want", want)
shares = {n["name"]: n["gpu_share_pct"] for n in got["names"] if n["category"] == "gpu_user_annotation"}
if any(v is not None for v in shares.values()):
    print("an annotation has a % GPU:", shares); ok = False
sys.exit(0 if ok else 1)
PY
else
	bad "stats"; cat "$tmp/err"
fi
# --per ProfilerStep: the two ProfilerStep#N host ranges.
"$ct" diff --per ProfilerStep "$t" "$t" >"$tmp/d.txt" 2>"$tmp/err"
if grep -q '"ProfilerStep" ranges: 2 in base, 2 in new' "$tmp/d.txt"; then ok; else
	bad "diff --per ProfilerStep"; cat "$tmp/d.txt" "$tmp/err"
fi
# share --window ProfilerStep#2: that range, [1600, 2000) us.
if "$ct" share --window 'ProfilerStep#2' "$t" -o "$tmp/w.json" 2>"$tmp/err" &&
	grep -q "window: 0.000600 s to 0.001000 s" "$tmp/err"; then ok; else
	bad "share --window ProfilerStep#2"; cat "$tmp/err"
fi
: >"$tmp/empty.json"
expect 1 "the file is empty" "$ct" stats "$tmp/empty.json"
expect 1 "the file is empty" "$ct" diff "$tmp/empty.json" "$t"
echo "$n checks"
[ $fail = 0 ] && rm -rf "$tmp"
exit $fail
