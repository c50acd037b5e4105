#!/bin/sh
# Perfetto's own JSON flow tests (../shared/external-traces/perfetto_flow_events_json_v1.json and
# _v2.json, from Perfetto's trace processor diff tests): cuptrace reads their flows (v1 s/t/f,
# v2 bind_id/flow_in/flow_out) into the arrows Perfetto's importer draws for them. The expected
# pairs below are the results Perfetto's diff tests list for these files (slice_out, slice_in);
# the arrows cuptrace wrote are found independently here, from its Chrome JSON output: each flow
# start and end bound to the innermost slice around it on its thread.
set -u
ct=$CUPTRACE_BIN
ext=${CUPTRACE_SRC:-$(cd "$(dirname "$0")/.." && pwd)}/../shared/external-traces
if [ ! -d "$ext" ] || ! command -v python3 >/dev/null 2>&1; then
	echo "SKIP: $ext or python3 not found: Perfetto's flow tests not run"
	exit 77
fi
tmp=$(mktemp -d "${CUPTRACE_TMP:-/tmp}/pflows.XXXXXX")
fail=0
for v in 1 2; do
	"$ct" convert "$ext/perfetto_flow_events_json_v$v.json" -o "$tmp/v$v.json" >"$tmp/log" 2>&1 ||
		{ echo "FAIL: convert v$v"; cat "$tmp/log"; fail=1; continue; }
	python3 - "$tmp/v$v.json" "$v" <<'PY' || fail=1
import json, sys
doc = json.load(open(sys.argv[1]))
ev = doc["traceEvents"] if isinstance(doc, dict) else doc
xs = [e for e in ev if e.get("ph") == "X"]
def around(e):
    c = [x for x in xs if x["pid"] == e["pid"] and x["tid"] == e["tid"]
         and x["ts"] <= e["ts"] <= x["ts"] + x.get("dur", 0)]
    c.sort(key=lambda x: x.get("dur", 0))
    return c[0]["name"] if c else None
out, into = {}, {}
for e in ev:
    if e.get("ph") == "s":
        out[e["id"]] = around(e)
    elif e.get("ph") == "f":
        into[e["id"]] = around(e)
got = sorted((out[k], into.get(k)) for k in out)
want = {"1": [("OtherSlice", "SomeSlice"), ("SenderA", "OtherSlice"), ("SenderB", "Blergh")],
        "2": [("OtherSlice", "SomeOtherSlice"), ("OtherSlice", "SomeSlice"),
              ("SenderA", "OtherSlice"), ("SenderB", "Blergh")]}[sys.argv[2]]
if got != want:
    print("FAIL: v%s flows %s, Perfetto draws %s" % (sys.argv[2], got, want))
    sys.exit(1)
print("ok v%s: %d flows, as Perfetto draws them: %s" % (sys.argv[2], len(got), got))
PY
done
rm -rf "$tmp"
[ $fail = 0 ] && echo "1 passed, 0 failed" || echo "0 passed, 1 failed"
exit $fail
