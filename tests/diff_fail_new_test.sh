#!/bin/sh
# `diff --fail-above`: a name new in NEW counts when it takes at least 1% of NEW's GPU busy time
# (README, --help). BASE: kernel a, 100 us. NEW: a 980 us (+880%) and a new kernel b; with
# --fail-above 1000 only b can fail it: b of 2 us (0.2% of NEW's busy time, though 2% of BASE's)
# must not, b of 20 us (2% of NEW's) must. The shares are computed here from the JSONs.
set -u
ct=$CUPTRACE_BIN
src=${CUPTRACE_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 not found"; exit 77; }
tmp=$(mktemp -d "${CUPTRACE_TMP:-/tmp}/difffail.XXXXXX")
. "$src/tests/script_lib.sh"
python3 - "$tmp" <<'PY'
import json, sys
def trace(kernels):
    ev, t = [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "GPU 0"}}], 1000.0
    for name, dur in kernels:
        ev.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": t, "dur": dur,
                   "args": {"device": 0, "stream": 7}})
        t += dur + 10
    return {"schemaVersion": 1, "traceEvents": ev}
runs = {"base": [("a", 100.0)], "small": [("a", 980.0), ("b", 2.0)], "big": [("a", 980.0), ("b", 20.0)]}
for k, v in runs.items():
    json.dump(trace(v), open("%s/%s.json" % (sys.argv[1], k), "w"))
# the independent expectation: b's share of NEW's busy time, and of BASE's
for k in ("small", "big"):
    busy = sum(d for _, d in runs[k]); b = dict(runs[k])["b"]
    print(k, "b is %.2f%% of NEW's busy time, %.2f%% of BASE's" % (100 * b / busy, 100 * b / 100.0))
PY
"$ct" diff --fail-above 1000 "$tmp/base.json" "$tmp/small.json" >"$tmp/out" 2>"$tmp/err"
[ $? = 0 ] && ok || { bad "a new kernel of 0.2% of NEW's busy time failed --fail-above:"; cat "$tmp/err"; }
"$ct" diff --fail-above 1000 "$tmp/base.json" "$tmp/big.json" >"$tmp/out" 2>"$tmp/err"
[ $? = 3 ] && grep -q "b" "$tmp/err" && ok || { bad "a new kernel of 2% of NEW's busy time did not fail --fail-above:"; cat "$tmp/err"; }
echo "$n checks passed"
[ $fail = 0 ] && rm -rf "$tmp"
exit $fail
