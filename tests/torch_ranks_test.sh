#!/bin/sh
# torch.profiler traces of the ranks of one job, no GPU needed: what the reader takes from them
# (host name, rank, world size, devices) and `merge --ranks` over them. The test writes two
# ranks' JSONs the way Kineto does (absolute times: baseTimeNanoseconds + ts, on hosts whose
# wall clocks disagree by 5 ms) and computes in Python, from those JSONs alone, where each step
# must land: under --align none and --align realtime where the JSONs put them (the files share
# one clock), under nccl with the all-reduce ends together (in truth they end together). Also
# the same through HTA's two sampled ranks of a real job, and traces with no collective.
set -u
ct=$CUPTRACE_BIN
src=${CUPTRACE_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
ext=${EXTERNAL_TRACES:-$src/../shared/external-traces}
if ! command -v python3 >/dev/null 2>&1; then
	echo "SKIP: python3 not found"
	exit 77
fi
tmp=$(mktemp -d "${CUPTRACE_TMP:-/tmp}/torchranks.XXXXXX")
. "$src/tests/script_lib.sh"

# Two ranks, hosts nodeA and nodeB; nodeB's clock 5 ms ahead (its JSON says so); 4 steps of
# 10 ms, each a gemm then an all-reduce whose end is the same true moment on both ranks.
python3 - "$tmp" <<'PY'
import json, sys, os
tmp = sys.argv[1]
skew_us = {0: 0.0, 1: 5000.0}
bases = {0: 1711964646000000000, 1: 1711964649000000000}  # 3 s apart, ts make up for it
for r, nc in ((0, 1), (1, 1), (0, 0), (1, 0)):
    base_us = bases[r] / 1000.0
    ev = [{"ph": "M", "name": "process_name", "pid": 100 + r, "tid": 0, "args": {"name": "python"}},
          {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "python"}},
          {"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}}]
    for k in range(4):
        # true start of step k (us since the epoch), rank 1 starting 300.25 us later
        t = 1711964650000000.0 + k * 10000.0 + r * 300.25 + skew_us[r]
        ts = round(t - base_us, 3)
        ev.append({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#%d" % (k + 1),
                   "pid": 100 + r, "tid": 100 + r, "ts": ts, "dur": 9000.0})
        ev.append({"ph": "X", "cat": "kernel", "name": "gemm_kernel", "pid": 0, "tid": 7,
                   "ts": round(ts + 100, 3), "dur": 3000.0 + 700 * r, "args": {"device": 0, "stream": 7}})
        if nc:
            ar0 = ts + 3200 + 700 * r
            end = 1711964650000000.0 + k * 10000.0 + 8000.0 + skew_us[r]  # same true end
            ev.append({"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                       "pid": 0, "tid": 13, "ts": round(ar0, 3),
                       "dur": round(end - base_us - ar0, 3), "args": {"device": 0, "stream": 13}})
    doc = {"schemaVersion": 1,
           "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85520809984,
                                 "computeMajor": 9, "computeMinor": 0, "numSms": 132}],
           "distributedInfo": {"backend": "nccl", "rank": r, "world_size": 2},
           ("host_name" if r == 0 else "hostname"): "node%s" % "AB"[r],
           "baseTimeNanoseconds": bases[r], "traceEvents": ev}
    json.dump(doc, open(os.path.join(tmp, "%s%d.json" % ("r" if nc else "q", r)), "w"))
PY

# 1. The reader: host, rank, world size, GPU as stats sees them.
"$ct" stats "$tmp/r1.json" >"$tmp/st" 2>&1 && grep -q "^Host: *nodeB$" "$tmp/st" &&
	grep -q "^GPU 0: *NVIDIA H100 80GB HBM3, compute capability 9.0, 132 SMs, 79.6 GiB" "$tmp/st" &&
	ok || { bad "stats of a torch.profiler rank:"; cat "$tmp/st"; }
"$ct" stats --json "$tmp/r1.json" | python3 -c '
import json, sys
m = json.load(sys.stdin)["metadata"]
assert (m["hostname"], m["rank"], m["world_size"], m["distributed_backend"]) == ("nodeB", 1, 2, "nccl"), m' &&
	ok || bad "stats --json metadata of r1.json"

# Per rank and step of a merged JSON, against the input JSONs: prints the largest error (us) of
# the steps' starts relative to rank 0's first step, and of the all-reduce ends' spread.
cat >"$tmp/check.py" <<'PY'
import json, sys, gzip
def load(p):
    return json.load(gzip.open(p) if p.endswith(".gz") else open(p))
mode, out, ins = sys.argv[1], sys.argv[2], sys.argv[3:]
def steps_abs(p):
    d = load(p); ev = d["traceEvents"] if isinstance(d, dict) else d
    base = d.get("baseTimeNanoseconds", 0) / 1000.0 if isinstance(d, dict) else 0
    rank = d["distributedInfo"]["rank"]
    st = {e["name"]: e["ts"] + base for e in ev if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#")}
    ar = sorted(e["ts"] + e["dur"] + base for e in ev if e.get("ph") == "X" and e["name"].startswith("nccl"))
    return rank, st, ar
want = {}
for p in ins:
    r, st, ar = steps_abs(p)
    want[r] = (st, ar)
d = load(out); ev = d["traceEvents"] if isinstance(d, dict) else d
pname = {e["pid"]: e["args"]["name"] for e in ev if e.get("ph") == "M" and e.get("name") == "process_name"}
got = {}
for e in ev:
    if e.get("ph") != "X":
        continue
    # a process's GPU tracks go in pid 1000000000 + its pid (chrome_writer.c)
    n = pname.get(e["pid"] % 1000000000, "")
    if not n.startswith("rank "):
        continue
    r = int(n.split()[1].rstrip(":"))  # "rank 1 @ host: name", or "rank 1: name" without a host
    g = got.setdefault(r, ({}, []))
    if e["name"].startswith("ProfilerStep#"):
        g[0].setdefault(e["name"], e["ts"])  # the first: one per rank in the input
    elif e["name"].startswith("nccl"):
        g[1].append(e["ts"] + e["dur"])
assert sorted(got) == sorted(want), (sorted(got), sorted(want))
ref = min(want); first = min(want[ref][0].values()); gfirst = min(got[ref][0].values())
err = 0.0
for r in want:
    for name, t in want[r][0].items():
        if mode == "file":  # where the JSONs put them, relative to rank 0's first step
            err = max(err, abs((got[r][0][name] - gfirst) - (t - first)))
        else:  # each rank's own steps keep their spacing
            mine = min(want[r][0].values()); gmine = min(got[r][0].values())
            err = max(err, abs((got[r][0][name] - gmine) - (t - mine)))
spread = 0.0
ends = [sorted(got[r][1]) for r in got]
for k in range(min(len(e) for e in ends)):
    v = [e[k] for e in ends]
    spread = max(spread, max(v) - min(v))
print("%.3f %.3f" % (err, spread))
PY

# 2. merge --ranks, the three modes, inputs given out of rank order.
for mode in none realtime nccl; do
	"$ct" merge --ranks --align $mode "$tmp/r1.json" "$tmp/r0.json" -o "$tmp/m-$mode.json" 2>"$tmp/err-$mode" ||
		{ bad "merge --align $mode:"; cat "$tmp/err-$mode"; continue; }
	case $mode in nccl) kind=own ;; *) kind=file ;; esac
	set -- $(python3 "$tmp/check.py" $kind "$tmp/m-$mode.json" "$tmp/r0.json" "$tmp/r1.json")
	python3 -c "import sys; sys.exit(not float('$1') <= 1.0)" && ok ||
		bad "--align $mode: steps off by $1 us from where the JSONs put them"
	if [ $mode = nccl ]; then
		# the JSONs' 5 ms skew is gone: the all-reduces end together again
		python3 -c "import sys; sys.exit(not float('$2') <= 1.0)" && ok ||
			bad "--align nccl: all-reduce ends spread by $2 us"
		grep -q "rank 1 @ nodeB (.*): nccl, .*REALTIME placement corrected by -5 ms" "$tmp/err-$mode" &&
			ok || { bad "nccl report:"; cat "$tmp/err-$mode"; }
	else
		python3 -c "import sys; sys.exit(not abs(float('$2') - 5000) <= 1.0)" && ok ||
			bad "--align $mode: all-reduce ends spread by $2 us, the JSONs' 5000"
	fi
done
grep -q "^cuptrace merge: rank 0 @ nodeA (" "$tmp/err-realtime" && grep -q "2 machines" "$tmp/err-realtime" &&
	ok || { bad "report of --align realtime:"; cat "$tmp/err-realtime"; }

# 3. No collective at all (UBSan stopped here: qsort got a NULL pointer), both modes.
for mode in nccl realtime; do
	"$ct" merge --ranks --align $mode "$tmp/q0.json" "$tmp/q1.json" -o "$tmp/q-$mode.json" 2>"$tmp/err" ||
		{ bad "merge --ranks of traces without collectives ($mode):"; cat "$tmp/err"; continue; }
	set -- $(python3 "$tmp/check.py" file "$tmp/q-$mode.json" "$tmp/q0.json" "$tmp/q1.json")
	python3 -c "import sys; sys.exit(not float('$1') <= 1.0)" && ok || bad "no collectives, $mode: steps off by $1 us"
done

# 4. One host, two ranks: the same clock, placed exactly.
sed 's/"hostname": "nodeB"/"host_name": "nodeA"/' "$tmp/q1.json" >"$tmp/q1a.json"
"$ct" merge --ranks "$tmp/q0.json" "$tmp/q1a.json" -o "$tmp/qa.json" 2>"$tmp/err" && grep -q "1 machine" "$tmp/err" &&
	ok || { bad "one host:"; cat "$tmp/err"; }
set -- $(python3 "$tmp/check.py" file "$tmp/qa.json" "$tmp/q0.json" "$tmp/q1a.json")
python3 -c "import sys; sys.exit(not float('$1') <= 1.0)" && ok || bad "one host: steps off by $1 us"

# 5. HTA's two sampled ranks of a real 128-rank job (no baseTimeNanoseconds: absolute ts).
a=$ext/hta_sampled_rank-0.json.gz b=$ext/hta_sampled_rank-1.json.gz
if [ -f "$a" ] && [ -f "$b" ]; then
	for mode in none realtime; do
		"$ct" merge --ranks --align $mode "$b" "$a" -o "$tmp/h-$mode.json" 2>"$tmp/err" ||
			{ bad "merge HTA ranks ($mode):"; cat "$tmp/err"; continue; }
		set -- $(python3 "$tmp/check.py" file "$tmp/h-$mode.json" "$a" "$b")
		python3 -c "import sys; sys.exit(not float('$1') <= 1.0)" && ok || bad "HTA ranks, $mode: steps off by $1 us"
	done
else
	echo "SKIP (part): $ext not found: HTA's ranks not merged"
fi

echo "$n checks passed"
[ $fail = 0 ] && rm -rf "$tmp"
exit $fail
