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

# A long value wraps onto lines indented to its column: join them back.
lines = re.sub(r"\n {18}(?=\S)", " ", text).split("\n")
head = {}
for l in lines:
    m = re.match(r"^([A-Z][A-Za-z0-9 ]*):\s+(.*)$", l)
    if m and m.group(1) not in head:
        head[m.group(1)] = m.group(2)


def dur(ns):  # common/text.c's report_dur, computed here: the unit that fits, 4 digits
    ns = int(ns + 0.5) if ns >= 0 else -int(-ns + 0.5)  # as the C rounds a mean
    if abs(ns) < 1000:
        return f"{ns} ns"
    v, u = ns / 1e3, 0
    while abs(v) >= 999.95 and u < 2:
        v, u = v / 1e3, u + 1
    a = abs(v)
    return ("%.3f" if a < 9.9995 else "%.2f" if a < 99.995 else "%.1f") % v + " " + ["us", "ms", "s"][u]

ms = us = dur

h = j["header"]
for g in h["gpus"]:
    label = "GPU" + (" " + g["key"][3:] if g["key"][3:] else "")
    eq(label, head.get(label), str(g["value"]))
eq("GPUs used", head.get("GPUs used"), h["gpus_used_text"])
for label, key in (("Driver", "driver"), ("CUDA", "cuda"), ("CUPTI", "cupti"), ("Host", "host")):
    eq(label, head.get(label), "not recorded" if h[key] is None else str(h[key]))
eq("Process", head.get("Process"), f"{h['process_name']} (pid {h['pid']})")
eq("Command line", head.get("Command line"), h["command_line"] or "not recorded")
eq("Start", head.get("Start"), h["start_utc"])
d = h["dropped_records"]
eq("Dropped records", head.get("Dropped records"),
   "not recorded" if d is None else f"{d}" + (" (the trace is incomplete)" if d else ""))
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
    eq("Time span", head.get("Time span"),
       f"{dur(sp['duration_ns'])} (from {dur(sp['start_ns'])} to {dur(sp['end_ns'])})")
    assert sp["duration_ns"] == sp["end_ns"] - sp["start_ns"]

def table(title):
    """Rows of the text table under the line starting with title, cut at the dash columns."""
    i = next(k for k, l in enumerate(lines) if l.startswith(title))
    dashes = lines[i + 2]
    cols = [(m.start(), m.end()) for m in re.finditer(r"-+", dashes)]
    rows = []
    for l in lines[i + 3:]:
        if not l.strip() or l.startswith("% GPU") or l.startswith("["):
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
                 us(s["max_ns"]), share])
    eq("share at most 100", share == "" or float(share) <= 100.0, True)
# The text shortens long names with "..." (the start, then where they differ): compare those
# by their beginning.
for t, w in zip(names, want):
    if t and "..." in t[0] and w[0].startswith(t[0].split("...")[0]):
        w[0] = t[0]
eq("names", names, want)
if len(j["names"]) > 20:
    eq("names title", next(l for l in lines if l.startswith("Top ")),
       f"Top 20 of {len(j['names'])} names by total time:")
if j["gpu_tracks"]:
    rows = table("GPU tracks")
    want = [[g["gpu"], g["track"] + (f" (lane {g['lane']})" if g["lane"] else ""), str(g["slices"]),
             ms(g["busy_ns"]), "%.1f" % g["busy_pct"]] for g in j["gpu_tracks"]]
    # busy_pct: of the GPU's window (its first work to its last end), computed here from the
    # device's tracks is not possible from the JSON alone; at most 100 and >= span_pct.
    for g in j["gpu_tracks"]:
        eq("busy_pct range", g["span_pct"] - 0.05 <= g["busy_pct"] <= 100.0, True)
    eq("gpu tracks", rows, want)
# In all: the devices' busy times summed. A device's busy time is the union of its tracks' work:
# at least its busiest track's, at most their sum; the work of all names covers it.
eq("devices", sum(dv["busy_ns"] for dv in j["devices"]), j["gpu_busy_ns"])
for dv in j["devices"]:
    mine = [g["busy_ns"] for g in j["gpu_tracks"] if g["gpu"] == dv["name"]]
    eq("device " + dv["name"], max(mine, default=0) <= dv["busy_ns"] <= sum(mine), True)
eq("names on gpu", sum(s["total_ns"] for s in j["names"] if s["gpu_share_pct"] is not None) >= j["gpu_busy_ns"], True)
# gpu_work_ns is the GPU work names' time summed, the shares' denominator: they add up to 100.
work = sum(s["total_ns"] for s in j["names"] if s["gpu_share_pct"] is not None)
eq("gpu_work_ns", j["gpu_work_ns"], work)
if work:
    eq("shares sum", abs(sum(s["gpu_share_pct"] for s in j["names"] if s["gpu_share_pct"] is not None) - 100.0) < 1e-6, True)
# Every metadata entry the text lists under "Other metadata" is in the JSON's.
# (up to the blank line before a later section, e.g. "GPU metrics per kernel").
other = text.split("\nOther metadata:\n", 1)[1].split("\n\n")[0] if "\nOther metadata:\n" in text else ""
for l in re.sub(r"\n +(?=\S)", " ", other).splitlines():
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
