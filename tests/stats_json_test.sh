#!/bin/sh
# `cuptrace stats --json` says what the text summary says, on every capture in tests/data and
# on one of them converted to Perfetto: the JSON parses with a strict parser, and the header
# lines, counts, categories, top names and GPU tracks of the text equal the JSON's numbers
# (rounded as the text rounds them). Also checks the usage errors of stats.
set -u
ct=$CUPTRACE_BIN
if ! command -v python3 >/dev/null 2>&1; then
	echo "SKIP: python3 not found (needed to parse the JSON)"
	exit 77
fi
src=${CUPTRACE_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
tmp=$(mktemp -d "${CUPTRACE_TMP:-/tmp}/statsjson.XXXXXX")
. "$src/tests/script_lib.sh"
"$ct" convert "$CUPTRACE_TEST_DATA/multi_stream.cupti" -o "$tmp/multi_stream.pftrace" 2>/dev/null ||
	{ echo "FAIL: convert"; fail=1; }
for t in "$CUPTRACE_TEST_DATA"/*.cupti "$tmp/multi_stream.pftrace"; do
	name=$(basename "$t")
	if ! "$ct" stats "$t" >"$tmp/$name.txt" 2>"$tmp/err" || ! "$ct" stats --json "$t" >"$tmp/$name.json" 2>>"$tmp/err"; then
		echo "FAIL $name: stats"; cat "$tmp/err"; fail=1; continue
	fi
	if python3 - "$tmp/$name.txt" "$tmp/$name.json" "$src/tests" <<'PY'; then n=$((n + 1)); else echo "FAIL $name"; fail=1; fi
import re, sys
sys.path.insert(0, sys.argv[3])
from strict_json import load

text = open(sys.argv[1], encoding="utf-8").read()
j = load(sys.argv[2])
bad = []

def eq(what, got, want):
    if got != want:
        bad.append(f"{what}: text {got!r}, json {want!r}")

lines = text.split("\n")
head = {}
for l in lines:
    m = re.match(r"^([A-Z][A-Za-z0-9 ]*):\s+(.*)$", l)
    if m and m.group(1) not in head:
        head[m.group(1)] = m.group(2)

def ms(ns):  # the text's "%.3f" of ns / 1e6
    return "%.3f" % (ns / 1e6)

def us(ns):
    return "%.3f" % (ns / 1e3)

h = j["header"]
for g in h["gpus"]:
    label = "GPU" + (" " + g["key"][3:] if g["key"][3:] else "")
    eq(label, head.get(label), str(g["value"]))
eq("GPUs used", head.get("GPUs used"), h["gpus_used_text"])
for label, key in (("Driver", "driver"), ("CUDA", "cuda"), ("CUPTI", "cupti"), ("Host", "host")):
    eq(label, head.get(label), "(not recorded)" if h[key] is None else str(h[key]))
eq("Process", head.get("Process"), f"{h['process_name']} (pid {h['pid']})")
eq("Command line", head.get("Command line"), h["command_line"] or "(not recorded)")
eq("Start", head.get("Start"), h["start_utc"])
d = h["dropped_records"]
eq("Dropped records", head.get("Dropped records"),
   "(not recorded)" if d is None else f"{d}" + (" (the trace is incomplete)" if d else ""))
e = j["events"]
eq("Events", head.get("Events"),
   f"{e['tracks']} tracks, {e['slices']} slices ({e['gpu_slices']} on GPU tracks, "
   f"{e['gpu_slices_with_flow_in']} with an incoming flow), {e['instants']} instants, "
   f"{e['counter_values']} counter values")
eq("Flows", head.get("Flows"),
   f"{j['flows']['complete']} complete, {j['flows']['one_end_only']} with one end only")
sp = j["span"]
if sp is None:
    eq("Time span", head.get("Time span"), "no events")
else:
    m = re.match(r"^([-0-9.]+) (ns|us|ms|s) ", head.get("Time span", ""))
    scale = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}
    if not m or abs(float(m.group(1)) * scale[m.group(2)] - sp["duration_ns"]) > scale[m.group(2)] / 1000:
        bad.append(f"Time span: text {head.get('Time span')!r}, json {sp}")
    assert sp["duration_ns"] == sp["end_ns"] - sp["start_ns"]

def table(title):
    """Rows of the text table under the line starting with title, cut at the dash columns."""
    i = next(k for k, l in enumerate(lines) if l.startswith(title))
    dashes = lines[i + 2]
    cols = [(m.start(), m.end()) for m in re.finditer(r"-+", dashes)]
    rows = []
    for l in lines[i + 3:]:
        if not l.strip() or l.startswith("% GPU"):
            break
        cells = [l[a:(b if k + 1 < len(cols) else None)].strip() for k, (a, b) in enumerate(cols)]
        rows.append(cells)
    return rows

cats = table("Slices by category")
eq("categories", cats, [[c["category"], str(c["slices"]), ms(c["total_ns"])] for c in j["categories"]])
names = table("Top 20 of" if len(j["names"]) > 20 else "Names by total time")
want = []
for s in j["names"][:20]:
    share = "" if s["gpu_share_pct"] is None else "%.1f" % s["gpu_share_pct"]
    want.append([s["name"], s["category"], str(s["count"]), ms(s["total_ns"]), us(s["avg_ns"]),
                 us(s["min_ns"]), us(s["max_ns"]), share])
# The text cuts long names with "...": compare those by their beginning.
for t, w in zip(names, want):
    if t and t[0].endswith("...") and w[0].startswith(t[0][:-3].rstrip()):
        w[0] = t[0]
eq("names", names, want)
if len(j["names"]) > 20:
    eq("names title", next(l for l in lines if l.startswith("Top ")),
       f"Top 20 of {len(j['names'])} names by total time:")
if j["gpu_tracks"]:
    rows = table("GPU tracks")
    want = [[g["gpu"], g["track"] + (f" (lane {g['lane']})" if g["lane"] else ""), str(g["slices"]),
             ms(g["busy_ns"]), "%.1f" % g["span_pct"]] for g in j["gpu_tracks"]]
    eq("gpu tracks", rows, want)
# In all: the devices' busy times summed. A device's busy time is the union of its tracks' work:
# at least its busiest track's, at most their sum; the work of all names covers it.
eq("devices", sum(dv["busy_ns"] for dv in j["devices"]), j["gpu_busy_ns"])
for dv in j["devices"]:
    mine = [g["busy_ns"] for g in j["gpu_tracks"] if g["gpu"] == dv["name"]]
    eq("device " + dv["name"], max(mine, default=0) <= dv["busy_ns"] <= sum(mine), True)
eq("names on gpu", sum(s["total_ns"] for s in j["names"] if s["gpu_share_pct"] is not None) >= j["gpu_busy_ns"], True)
# Every metadata entry the text lists under "Other metadata" is in the JSON's.
# (up to the blank line before a later section, e.g. "GPU metrics per kernel").
for l in text.split("\nOther metadata:\n", 1)[1].split("\n\n")[0].splitlines() if "\nOther metadata:\n" in text else []:
    k, v = l.split(":", 1)
    eq("metadata " + k, str(j["metadata"].get(k)), v.strip())
if bad:
    print("\n".join(bad))
    sys.exit(1)
PY
done
expect 2 "exclude each other" "$ct" stats --json --markdown "$CUPTRACE_TEST_DATA/vector_add.cupti"
expect 1 "cannot read" "$ct" stats --json /nonexistent.pftrace
[ -s "$tmp/out" ] && { echo "FAIL: stats --json of a missing file printed something"; fail=1; }
echo "$n traces: stats --json equals the text summary"
[ $fail = 0 ] && rm -rf "$tmp"
exit $fail
