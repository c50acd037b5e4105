#!/bin/sh
# cuptrace top on the CPU: --replay of the captures in tests/data through the same aggregator a
# live run uses. Checked against `cuptrace stats --json` of the same capture (an independent
# computation: stats' own sink): the per-kernel calls and times summed over every interval of
# --json equal stats' names of category kernel; the API calls likewise; the last interval's
# totals equal the sums. --once's text fits 80 columns; a tmux pane of 80x24 shows the screen
# with the kernel stats names first (skipped without tmux); a capture written while top
# watches, through the CLI's live path. Idle by cause: on the captures where `analyze` covers
# the whole trace (no steps, no start-up), each GPU's idle_by_cause_total_ns of top's last
# interval equals analyze's idle_by_cause_ns (its own sink and sweep), and the intervals' values
# sum to it. Usage errors last.
set -u
ct=$CUPTRACE_BIN
if ! command -v python3 >/dev/null 2>&1; then
	echo "SKIP: python3 not found (needed to parse the JSON)"
	exit 77
fi
src=${CUPTRACE_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
tmp=$(mktemp -d "${CUPTRACE_TMP:-/tmp}/toptest.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
. "$src/tests/script_lib.sh"
for t in "$CUPTRACE_TEST_DATA"/*.cupti; do
	name=$(basename "$t")
	if ! "$ct" stats --json "$t" >"$tmp/$name.stats" 2>"$tmp/err"; then
		echo "FAIL $name: stats"; cat "$tmp/err"; fail=1; continue
	fi
	# Short intervals: many of them, so that sums across intervals are tested.
	if ! "$ct" top --replay "$t" --speed max --interval 0.005 --json >"$tmp/$name.top" 2>"$tmp/err"; then
		echo "FAIL $name: top --json"; cat "$tmp/err"; fail=1; continue
	fi
	if ! "$ct" analyze --json "$t" >"$tmp/$name.an" 2>"$tmp/err"; then
		echo "FAIL $name: analyze --json"; cat "$tmp/err"; fail=1; continue
	fi
	if python3 - "$tmp/$name.stats" "$tmp/$name.top" "$src/tests" "$tmp/$name.an" "$tmp/idle_compared" <<'PY'; then ok; else echo "FAIL $name"; fail=1; fi
import sys
sys.path.insert(0, sys.argv[3])
from strict_json import load
import json
st = load(sys.argv[1])
lines = open(sys.argv[2], encoding="utf-8").read().splitlines()
objs = [json.loads(l) for l in lines]
bad = []
if not objs:
    bad.append("no interval")
want_k = {n["name"]: (n["count"], n["total_ns"]) for n in st["names"] if n["category"] == "kernel"}
want_a = {}
for n in st["names"]:
    if n["category"] in ("cuda_runtime", "cuda_driver"):
        c, s = want_a.get(n["name"], (0, 0))
        want_a[n["name"]] = (c + n["count"], s + n["total_ns"])
def summed(key):
    got = {}
    for o in objs:
        for r in o[key]:
            c, s = got.get(r["name"], (0, 0))
            got[r["name"]] = (c + r["calls"], s + r["ns"])
    return got
for key, want in (("kernels", want_k), ("api", want_a)):
    got = summed(key)
    if got != want:
        diff = sorted(set(got) ^ set(want))[:3] or [n for n in want if got.get(n) != want[n]][:3]
        bad.append(f"{key}: top {len(got)} names, stats {len(want)}; first differences: " +
                   ", ".join(f"{d}: top {got.get(d)} stats {want.get(d)}" for d in diff))
last = objs[-1] if objs else {"totals": {}}
kc = sum(c for c, _ in want_k.values())
kn = sum(s for _, s in want_k.values())
if last["totals"].get("kernels") != kc or last["totals"].get("kernel_ns") != kn:
    bad.append(f"totals {last['totals']} != stats kernels {kc} / {kn} ns")
if [o["interval"] for o in objs] != list(range(1, len(objs) + 1)):
    bad.append("intervals not numbered 1..N")
for o in objs:
    for g in o["gpus"]:
        if not 0 <= g["busy_pct"] <= 100:
            bad.append(f"busy {g['busy_pct']}")
# Idle by cause: the intervals sum to the total; the total is analyze's where analyze covers
# the whole trace.
summed = {}
for o in objs:
    for i, g in enumerate(o["gpus"]):
        d = summed.setdefault(i, {})
        for k, v in g["idle_by_cause_ns"].items():
            d[k] = d.get(k, 0) + v
tot = {i: g["idle_by_cause_total_ns"] for i, g in enumerate(objs[-1]["gpus"])} if objs else {}
if any(o["top_cpu_pct"] is not None or any(p["tracer_cpu_pct"] is not None for p in o["procs"])
       for o in objs):
    bad.append("a replay has a CPU figure (no process to measure)")
if summed != tot:
    bad.append(f"idle by cause: intervals sum to {summed}, the totals say {tot}")
an = json.load(open(sys.argv[4], encoding="utf-8"))
if not an["steady_state"]["from_steps"] and all(g.get("startup_ns", 0) == 0 for g in an["gpus"]):
    want = [g["idle_by_cause_ns"] for g in an["gpus"]]
    got = [tot.get(i) for i in range(len(want))]
    if got != want:
        bad.append(f"idle by cause {got}, analyze {want}")
    elif sum(sum(w.values()) for w in want):
        open(sys.argv[5], "a").write(sys.argv[2] + "\n")
for b in bad:
    print(sys.argv[2].split("/")[-1], b)
sys.exit(1 if bad else 0)
PY
	# --once: plain text, at most 24 lines of at most 80 columns.
	if ! "$ct" top --replay "$t" --once --speed max --interval 60 >"$tmp/once" 2>"$tmp/err"; then
		bad "$name: top --once"; cat "$tmp/err"
	elif awk 'length($0) > 80 {w = 1} END {exit !(w || NR > 24 || NR < 5)}' "$tmp/once"; then
		bad "$name: --once wider than 80 columns or not 5..24 lines:"; cat "$tmp/once"
	else
		ok
	fi
done
# Idle by cause was compared on enough captures with idle (host_sync, host_wait, launch_latency).
nidle=$(wc -l <"$tmp/idle_compared" 2>/dev/null || echo 0)
if [ "$nidle" -ge 5 ]; then ok; else bad "idle by cause compared with analyze on $nidle captures, want 5"; fi
# --once of a whole capture (one interval longer than the run) lists the run's first kernel
# by time as stats does (the first kernel name of stats' names, category kernel).
t=$CUPTRACE_TEST_DATA/multi_stream.cupti
first=$(python3 -c '
import json, sys
st = json.load(open(sys.argv[1]))
print([n["name"] for n in st["names"] if n["category"] == "kernel"][0])' "$tmp/multi_stream.cupti.stats")
"$ct" top --replay "$t" --once --speed max --interval 3600 >"$tmp/once" 2>&1
row=$(awk '/TIME +SHARE/ {getline; print; exit}' "$tmp/once")
case $row in
*"$first"*) ok ;;
*) bad "--once's first row '$row' is not stats' first kernel '$first'" ;;
esac
# tmux: the screen in an 80x24 terminal, as a person sees it.
if command -v tmux >/dev/null 2>&1; then
	sock=$tmp/tmux
	tmux -S "$sock" new-session -d -x 80 -y 24 \
		"'$ct' top --replay '$t' --speed 100000 --interval 0.2; sleep 5" 2>"$tmp/err" ||
		{ bad "tmux did not start"; cat "$tmp/err"; }
	i=0
	while [ $i -lt 50 ]; do
		tmux -S "$sock" capture-pane -p >"$tmp/pane" 2>/dev/null
		grep -q "TIME" "$tmp/pane" && break
		sleep 0.1
		i=$((i + 1))
	done
	tmux -S "$sock" kill-server 2>/dev/null
	if grep -qF "$first" "$tmp/pane" && grep -q "busy" "$tmp/pane" &&
		awk 'length($0) > 80 {w = 1} END {exit w}' "$tmp/pane"; then
		ok
	else
		bad "tmux pane lacks the kernel '$first' or the busy line:"; cat "$tmp/pane"
	fi
	# The t key: on a replay at half speed of a capture whose kernels run from 0.67 s to
	# 1.26 s after its first event, t pressed once the screen says 0.7 s writes a trace of
	# the next 300 ms. Its kernels are exactly the capture's kernels that overlap the span the
	# status line names (both read back with convert: an independent reading of each file).
	tc=$CUPTRACE_TEST_DATA/gm_h100.cupti
	tmux -S "$sock" new-session -d -x 80 -y 24 \
		"cd '$tmp' && '$ct' top --replay '$tc' --speed 0.5 --interval 0.1 --t-duration 300ms; sleep 30" 2>"$tmp/err" ||
		{ bad "tmux did not start"; cat "$tmp/err"; }
	i=0
	pressed=0
	while [ $i -lt 200 ]; do
		tmux -S "$sock" capture-pane -p >"$tmp/pane" 2>/dev/null
		if [ $pressed = 0 ] && awk '/cuptrace top  t / {v = $4; sub("s", "", v); f = v + 0 >= 0.7} END {exit !f}' "$tmp/pane"; then
			tmux -S "$sock" send-keys t
			pressed=1
		fi
		grep -q "t: wrote\|t: writing .* failed" "$tmp/pane" && break
		sleep 0.1
		i=$((i + 1))
	done
	tmux -S "$sock" kill-server 2>/dev/null
	shot=$(sed -n 's/.*t: wrote \([^ ]*\) (\([0-9.]*\) s to \([0-9.]*\) s).*/\1 \2 \3/p' "$tmp/pane")
	set -- $shot
	if [ $# != 3 ] || ! "$ct" convert "$tmp/$1" -o "$tmp/shot.json" 2>"$tmp/err" ||
		! "$ct" convert "$tc" -o "$tmp/whole.json" 2>>"$tmp/err"; then
		bad "t: no trace written, or unreadable:"; cat "$tmp/pane" "$tmp/err"
	elif python3 - "$tmp/shot.json" "$tmp/whole.json" "$2" "$3" <<'PY'; then ok; else bad "t: the trace's kernels"; fi
import json, sys
def kernels(p):
    d = json.load(open(p))
    ev = d["traceEvents"] if isinstance(d, dict) else d
    return sorted((e["ts"], e.get("dur", 0), e["name"]) for e in ev
                  if e.get("ph") == "X" and e.get("cat") == "kernel")
got, whole = kernels(sys.argv[1]), kernels(sys.argv[2])
t0, t1 = float(sys.argv[3]) * 1e6, float(sys.argv[4]) * 1e6  # us, as the JSON's ts
want = [k for k in whole if k[0] < t1 and k[0] + k[1] > t0]
print(f"t: {len(got)} kernels in {t0:.0f}..{t1:.0f} us; the capture has {len(want)} there of {len(whole)}")
sys.exit(0 if want and got == want else 1)
PY
else
	echo "SKIP (part): tmux not installed: the 80x24 pane and the t key are not checked"
fi
# The live path without a GPU: `top --no-check -- PROGRAM` runs record, whose program here is
# a stand-in that writes a real capture to the file record names ($CUPTRACE_OUTPUT) a sixth at
# a time (items cut anywhere) and exits 3. top tails it through the CLI: the kernels summed over
# its intervals equal stats of the capture, the process ends, top exits with the status 3.
cat >"$tmp/writer.sh" <<'SH'
#!/bin/sh
size=$(wc -c <"$1")
chunk=$((size / 6 + 1))
i=0
while [ $((i * chunk)) -lt "$size" ]; do
	dd if="$1" bs=$chunk skip=$i count=1 2>/dev/null >>"$CUPTRACE_OUTPUT"
	i=$((i + 1))
	sleep 0.2
done
exit 3
SH
chmod +x "$tmp/writer.sh"
for name in multi_stream.cupti steps_base.cupti; do
	TMPDIR=$tmp "$ct" top --no-check --interval 0.1 --json -- "$tmp/writer.sh" "$CUPTRACE_TEST_DATA/$name" \
		>"$tmp/live.jsonl" 2>"$tmp/live.err"
	rc=$?
	if [ $rc != 3 ] || ! grep -q "ended (status 3)" "$tmp/live.err"; then
		bad "live $name: exit $rc (want 3, the program's):"; cat "$tmp/live.err"; continue
	fi
	if python3 - "$tmp/$name.stats" "$tmp/live.jsonl" <<'PY'; then ok; else bad "live $name"; fi
import json, sys
st = json.load(open(sys.argv[1]))
objs = [json.loads(l) for l in open(sys.argv[2])]
want = {}
for n in st["names"]:
    if n["category"] == "kernel":
        want[n["name"]] = (n["count"], n["total_ns"])
got = {}
for o in objs:
    for r in o["kernels"]:
        c, s = got.get(r["name"], (0, 0))
        got[r["name"]] = (c + r["calls"], s + r["ns"])
ended = objs and all(p["ended"] for p in objs[-1]["procs"]) and objs[-1]["procs"]
# top's own CPU is known live from the second interval on (a difference of two readings).
cpu = [o["top_cpu_pct"] for o in objs]
if any(c is None or c < 0 for c in cpu[1:]):
    print(f"top_cpu_pct {cpu}")
    sys.exit(1)
if got != want or not ended or len(objs) < 3:
    print(f"{len(objs)} intervals, ended {ended}, kernels {sorted(got.items())[:3]} want {sorted(want.items())[:3]}")
    sys.exit(1)
PY
done
expect 2 "needs a command" "$ct" top
expect 2 "iterations" "$ct" top --iterations 0 --replay "$t"
expect 2 "interval" "$ct" top --interval x --replay "$t"
expect 2 "takes no command" "$ct" top --replay "$t" -- true
expect 1 "cannot replay" "$ct" top --replay /nonexistent.cupti
echo "top: $n checks passed"
exit $fail
