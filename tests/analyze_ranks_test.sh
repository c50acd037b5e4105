#!/bin/sh
# `cuptrace analyze` over many rank files (issue 43), no GPU needed: the simulated job of
# tests/ranks.h (tests/ranks_trace), 8 ranks a machine, 40 steps of 100 ms each with 200 small
# kernels more (16,200 slices a rank), analyzed together with --step step.
#  - What it says, against the job's own truth (ranks.h's formulas, again in Python below):
#    every rank named "rank R @ nodeH"; the job's steps by number, each naming the rank the
#    others waited for in the all-reduce (the longest gemm: the last rank) and their wait (per
#    step the median over them of their all-reduce time less its own); the straggler finding:
#    that rank, in how many steps, by how much in all.
#  - Streaming: analyze keeps one rank's events and the summaries of the others, so its peak
#    RSS (/usr/bin/time -v) must grow by far less per rank than a rank's events take to keep
#    (64 bytes a slice, sink_state.h): from 16 to 64 and 256 ranks, at most a tenth of
#    that per rank; and 256 ranks in under a minute. Both only in a Release build (sanitizers
#    change memory and time); other builds check what it says on 16 ranks.
# Prints the numbers (README, "Why is it slow: analyze", quotes them).
set -u
ct=$CUPTRACE_BIN
gen=$RANKS_TRACE
src=${CUPTRACE_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
if ! command -v python3 >/dev/null 2>&1; then
	echo "SKIP: python3 not found (needed to read analyze --json)"
	exit 77
fi
tmp=$(mktemp -d "${CUPTRACE_TMP:-/tmp}/anranks.XXXXXX")
. "$src/tests/script_lib.sh"
STEPS=40 KERNELS=200
release=0
grep -q "CMAKE_BUILD_TYPE:STRING=Release" "${CUPTRACE_BUILD_DIR:-.}/CMakeCache.txt" 2>/dev/null &&
	release=1
timer=0
[ $release = 1 ] && [ -x /usr/bin/time ] && timer=1

sizes=16
[ $release = 1 ] && sizes="16 64 256"
for N in $sizes; do
	mkdir -p "$tmp/$N"
	r=0
	files=
	while [ $r -lt "$N" ]; do
		"$gen" "$tmp/$N/rank-$r.pftrace" --rank $r --world "$N" --per-host 8 --steps $STEPS \
			--kernels $KERNELS || bad "ranks_trace rank $r of $N"
		files="$files $tmp/$N/rank-$r.pftrace"
		r=$((r + 1))
	done
	if [ $timer = 1 ]; then
		# shellcheck disable=SC2086
		/usr/bin/time -v -o "$tmp/$N.time" "$ct" analyze --json --step step $files \
			>"$tmp/$N.json" 2>"$tmp/$N.err" || { bad "analyze of $N ranks"; cat "$tmp/$N.err"; }
		rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$tmp/$N.time")
		wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$tmp/$N.time")
		echo "analyze of $N ranks ($((N * STEPS * (5 + 2 * KERNELS))) slices): peak RSS $rss kB, wall $wall"
		eval "rss_$N=$rss"
		eval "wall_$N=\$wall"
	else
		# shellcheck disable=SC2086
		"$ct" analyze --json --step step $files >"$tmp/$N.json" 2>"$tmp/$N.err" ||
			{ bad "analyze of $N ranks"; cat "$tmp/$N.err"; }
	fi
	python3 - "$tmp/$N.json" "$N" "$STEPS" <<'PY' && ok || bad "analyze of $N ranks: what it says"
import json, sys
j = json.load(open(sys.argv[1]))
N, STEPS = int(sys.argv[2]), int(sys.argv[3])
M = 2**64

# tests/ranks.h: step i's true times, per rank; every rank on one clock rate (no drift), so a
# duration in a rank's trace is the true one.
def gemm(r, i):
    d = 2000000 + 300000 * r
    return 2 * d if r == 1 and i % 5 == 4 else d
def jitter(r, i):
    x = ((r * 1000003 + i * 7919 + 12345) * 0x9e3779b97f4a7c15) % M
    x ^= x >> 29
    return x % 3000
def comm(r, i):
    t = 20000000 + i * 100000000 + 100000
    last = t + max(gemm(q, i) for q in range(N))
    return (last + 150000 + jitter(r, i)) - (t + gemm(r, i) + 5000)
def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else v[n // 2 - 1] + (v[n // 2] - v[n // 2 - 1]) // 2

assert j["multi_rank"] and j["files"] == N, (j["multi_rank"], j["files"])
ranks = j["ranks"]
assert len(ranks) == N, len(ranks)
for x in ranks:
    r = x["file"]
    assert x["rank"] == r and x["rank_label"] == f"rank {r} @ node{r // 8}", x
assert len(j["steps"]["rows"]) == N * STEPS
for row in j["steps"]["rows"]:
    assert row["rank_label"] == f"rank {row['file']} @ node{row['file'] // 8}", row
js = j["job_steps"]
assert [s["number"] for s in js] == list(range(STEPS)), [s["number"] for s in js]
total = count = 0
for i, s in enumerate(js):
    c = [comm(r, i) for r in range(N)]
    last = min(range(N), key=lambda r: (c[r], r))
    wait = median([c[r] - c[last] for r in range(N) if r != last])
    assert s["ranks"] == N and s["wait_ns"] == wait, (i, s, wait)
    assert s["waited_for_rank"] == last == N - 1, (i, s, last)
    if i:  # step 0 is start-up
        total += wait
        count += 1
st = [f for f in j["findings"] if f["id"] == "straggler"]
assert st and st[0]["top_rank_label"] == f"rank {N - 1} @ node{(N - 1) // 8}", st
assert st[0]["count"] == count and st[0]["total_ns"] == total, (st[0]["count"], count, st[0]["total_ns"], total)
steady = [x["steady_ns"] for x in ranks if x["file"] == N - 1][0]
assert st[0]["severe"] == (total * 20 >= steady), (st[0]["severe"], total, steady)
for f in j["findings"]:
    assert f["top_rank_label"] and all(w["rank_label"] for w in f["worst"]), f
print(f"{N} ranks: straggler rank {N - 1}, {count} steps, {total / 1e6:.3f} ms in all")
PY
	rm -rf "${tmp:?}/$N"
done

# One merged trace (merge --ranks) says the same as its rank files: its processes named by their
# "cuptrace: trace info" (rank, host), the same job steps, waits and straggler.
mkdir -p "$tmp/m"
for r in 0 1 2 3; do
	"$gen" "$tmp/m/rank-$r.pftrace" --rank $r --world 4 --per-host 2 --steps 12 --kernels 20 ||
		bad "ranks_trace rank $r of 4"
done
"$ct" merge --ranks "$tmp"/m/rank-[0-3].pftrace -o "$tmp/m/job.pftrace" 2>/dev/null || bad "merge --ranks"
"$ct" analyze --json --step step "$tmp"/m/rank-[0-3].pftrace >"$tmp/m/files.json" || bad "analyze files"
"$ct" analyze --json --step step "$tmp/m/job.pftrace" >"$tmp/m/merged.json" || bad "analyze merged"
python3 - "$tmp/m/files.json" "$tmp/m/merged.json" <<'PY' && ok || bad "merged trace against its rank files"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert b["files"] == 1 and b["multi_rank"], (b["files"], b["multi_rank"])
la = sorted(r["rank_label"] for r in a["ranks"])
lb = sorted(r["rank_label"] for r in b["ranks"])
assert la == lb == ["rank 0 @ node0", "rank 1 @ node0", "rank 2 @ node1", "rank 3 @ node1"], (la, lb)
key = lambda s: (s["number"], s["waited_for_rank_label"], s["wait_ns"], s["ranks"])
assert [key(s) for s in a["job_steps"]] == [key(s) for s in b["job_steps"]], \
    ([key(s) for s in a["job_steps"]], [key(s) for s in b["job_steps"]])
# ranks.h: rank 3's gemm is the longest (2.9 ms), but rank 1's doubles every fifth step (4.6)
last = ["rank 1 @ node0" if i % 5 == 4 else "rank 3 @ node1" for i in range(12)]
assert [s["waited_for_rank_label"] for s in b["job_steps"]] == last, b["job_steps"]
st = lambda j: [(f["top_rank_label"], f["count"], f["total_ns"], f["severe"])
                for f in j["findings"] if f["id"] == "straggler"]
assert st(a) == st(b), (st(a), st(b))
print("merged:", lb, "straggler", st(b))
PY

if [ $timer = 1 ]; then
	# A rank's events as the sink keeps them: 64 bytes a slice (sink_state.h).
	per_rank_kb=$((STEPS * (5 + 2 * KERNELS) * 64 / 1024))
	for N in 64 256; do
		eval "rss=\$rss_$N"
		grow=$(((rss - rss_16) / (N - 16)))
		echo "from 16 to $N ranks: $grow kB more per rank; a rank's events take about $per_rank_kb kB"
		[ $((grow * 10)) -le $per_rank_kb ] && ok ||
			bad "peak RSS grows by $grow kB a rank from 16 to $N ranks (16: $rss_16 kB, $N: $rss kB): more than a tenth of a rank's events ($per_rank_kb kB)"
	done
	secs=$(echo "$wall_256" | awk -F: '{s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; print s}')
	[ "$(echo "$secs < 60" | bc)" = 1 ] && ok || bad "256 ranks took $secs s (over a minute)"
fi

echo "$n checks passed"
[ $fail = 0 ] && rm -rf "$tmp"
exit $fail
