#!/bin/sh
# Every capture in tests/data, converted to Perfetto and to Chrome JSON: the JSON parses with a
# strict parser, and both hold the same slices, instants and counter values per track, and the
# same flows, for our reader and for Perfetto's trace processor.
set -u
ct=$CUPTRACE_BIN
chk=$CHECK_TRACE
tmp=$(mktemp -d "${CUPTRACE_TMP:-/tmp}/fmt.XXXXXX")
src=${CUPTRACE_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
tp=${TRACE_PROCESSOR_SHELL:-$src/../shared/tools/trace_processor_shell}
if ! command -v python3 >/dev/null 2>&1; then
	echo "SKIP: python3 not found (needed for the strict JSON parse)"
	exit 77
fi
fail=0 n=0
for cap in "$CUPTRACE_TEST_DATA"/*.cupti; do
	name=$(basename "$cap" .cupti)
	"$ct" convert "$cap" -o "$tmp/$name.pftrace" && "$ct" convert "$cap" -o "$tmp/$name.json" || {
		echo "FAIL $name: convert"; fail=1; continue; }
	# graphs launched from the GPU: no API call launched them, so no flow comes in
	unlinked=0 && [ "$name" = device_graph ] && unlinked=20
	"$chk" "$tmp/$name.pftrace" --clean --allow-unlinked $unlinked --dump-tracks >"$tmp/$name.tracks" ||
		{ echo "FAIL $name: check"; fail=1; continue; }
	if python3 - "$tmp/$name.json" "$tmp/$name.tracks" <<'PY'
import json, sys, collections
def reject(x):
    raise ValueError("non-standard JSON constant " + x)
def no_dups(pairs):
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError("duplicate key")
    return dict(pairs)
ev = json.load(open(sys.argv[1], encoding="utf-8"), parse_constant=reject, object_pairs_hook=no_dups)
names = {}
for e in ev:
    if e.get("ph") == "M" and e["name"] == "thread_name":
        names[(e["pid"], e["tid"])] = e["args"]["name"]
    if e.get("ph") == "M" and e["name"] == "process_name":
        names[(e["pid"], None)] = e["args"]["name"]
js = collections.Counter()
for e in ev:
    ph = e.get("ph")
    if ph == "X":
        js[("slices", names.get((e["pid"], e["tid"]), "?"))] += 1
    elif ph == "i" and e.get("cat") != "cuptrace":
        js[("instants", names.get((e["pid"], e.get("tid")), "?"))] += 1
    elif ph == "C":
        js[("counters", e["name"])] += len(e["args"])
flows_s = collections.Counter((e["id"], e["cat"], e["name"]) for e in ev if e.get("ph") == "s")
flows_f = collections.Counter((e["id"], e["cat"], e["name"]) for e in ev if e.get("ph") == "f" and e.get("bp") == "e")
pf = collections.Counter()
flows = 0
for line in open(sys.argv[2]):
    if line.startswith("track\t"):
        _, n, s, i, c = line.rstrip("\n").split("\t")
        for kind, v in (("slices", s), ("instants", i), ("counters", c)):
            if int(v):
                pf[(kind, n)] += int(v)
    if line.strip().startswith("flows:"):
        flows = int(line.split()[1])
    if " flows, " in line:
        flows = int(line.split(" flows, ")[0].split(", ")[-1])
pairs = sum(1 for k in flows_s if k in flows_f)
bad = {k: (pf.get(k, 0), js.get(k, 0)) for k in set(pf) | set(js) if pf.get(k, 0) != js.get(k, 0)}
print(f"{sys.argv[1]}: {sum(v for (k, _), v in js.items() if k == 'slices')} slices, "
      f"{sum(v for (k, _), v in js.items() if k == 'counters')} counter values, {pairs} flows; "
      f"perfetto {flows} flows")
if bad:
    print("per-track differences (perfetto, json):", bad)
sys.exit(1 if bad or pairs != flows or len(flows_s) != pairs else 0)
PY
	then n=$((n + 1)); else echo "FAIL $name"; fail=1; fi
	# The same in Perfetto's trace processor, where shared/tools/ is beside the checkout.
	if [ -x "$tp" ]; then
		TRACE_PROCESSOR_SHELL=$tp python3 "$src/tests/tp_check.py" "$tmp/$name.json" \
			--same-as "$tmp/$name.pftrace" || { echo "FAIL $name: trace_processor"; fail=1; }
	fi
done
[ -x "$tp" ] || echo "SKIP trace_processor checks: $tp not found"
echo "$n captures: Perfetto and JSON agree"
# torch_train's Stream 7 work comes in CUPTI buffers whose times interleave but never overlaps:
# one thread of that name in the JSON, one row in stats.
s7=$(python3 -c 'import json, sys
print(sum(e.get("ph") == "M" and e["name"] == "thread_name" and e["args"]["name"] == "Stream 7"
          for e in json.load(open(sys.argv[1]))))' "$tmp/torch_train.json")
rows=$("$ct" stats "$CUPTRACE_TEST_DATA/torch_train.cupti" | grep -c " Stream 7")
if [ "$s7" != 1 ] || [ "$rows" != 1 ]; then
	echo "FAIL torch_train: $s7 JSON threads and $rows stats rows named Stream 7 (want 1 and 1)"
	fail=1
fi
rm -rf "$tmp"
exit $fail
