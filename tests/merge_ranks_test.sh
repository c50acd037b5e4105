#!/bin/sh
# `cuptrace merge --ranks` end to end, no GPU needed: the simulated jobs of tests/ranks.h
# (tests/ranks_trace.c), whose machines' clocks disagree by known amounts, merged into one
# .pftrace and into a .tar with Perfetto's manifest. In truth every rank starts each step's gemm
# at the same moment and ends each all-reduce together (up to 3 us of jitter): after the merge,
# in Perfetto's trace processor, both must line up within 10 us. Also: the report on stderr,
# rank order, what is kept (our reader's sums), --align realtime visibly off by the skew, errors.
set -u
ct=$CUPTRACE_BIN
chk=$CHECK_TRACE
gen=$RANKS_TRACE
src=${CUPTRACE_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
tp=${TRACE_PROCESSOR_SHELL:-$src/../shared/tools/trace_processor_shell}
if ! command -v python3 >/dev/null 2>&1; then
	echo "SKIP: python3 not found (needed to read stats --json)"
	exit 77
fi
tmp=$(mktemp -d "${CUPTRACE_TMP:-/tmp}/ranks.XXXXXX")
. "$src/tests/script_lib.sh"
have_tp=0
[ -x "$tp" ] && have_tp=1 || echo "SKIP (part): $tp not found: merged traces not loaded in Perfetto's trace processor"

# Sums of `stats --json` over files: "slices flows tracks".
sums() {
	for f in "$@"; do "$ct" stats --json "$f"; done | python3 -c '
import json, sys
t = [0] * 3
for line in sys.stdin:
    j = json.loads(line)
    for i, v in enumerate((j["events"]["slices"], j["flows"]["complete"], j["events"]["tracks"])):
        t[i] += v
print(*t)'
}

# Per step, the spread (latest - earliest, ns) over ranks of the gemm starts and of the
# all-reduce ends, as trace_processor places them: prints "steps max_gemm_spread max_ar_spread
# ranks".
cat >"$tmp/spread.sql" <<'SQL'
with k as (
  select s.name, s.ts, s.dur, p.name as proc,
         row_number() over (partition by p.upid, s.name order by s.ts) as i
  from slice s join track t on s.track_id = t.id
  join process p on p.upid = extract_arg(t.dimension_arg_set_id, 'upid')
  where s.name = 'gemm' or s.name like 'ncclDevKernel_AllReduce%'
), per as (
  select i, max(case when name = 'gemm' then ts end) - min(case when name = 'gemm' then ts end) as g,
         max(case when name != 'gemm' then ts + dur end) - min(case when name != 'gemm' then ts + dur end) as a
  from k group by i
)
select count(*), max(g), max(a), (select count(distinct proc) from k) from per;
SQL
spread() {
	"$tp" -q "$tmp/spread.sql" "$1" 2>/dev/null | tail -1 | tr ',' ' '
}
# The rank processes in the UI's order.
procs() {
	echo "select name from process where name like 'rank %'
		order by extract_arg(arg_set_id, 'process_sort_index_hint'), upid;" >"$tmp/p.sql"
	"$tp" -q "$tmp/p.sql" "$1" 2>/dev/null | tail -n +2 | tr -d '"'
}
within() { # spread-line limit_ns steps ranks
	set -- $1 "$2" "$3" "$4"
	[ "$1" = "$6" ] && [ "$4" = "$7" ] && [ "$2" -le "$5" ] && [ "$3" -le "$5" ]
}

# 1. Two machines, node1's wall clock 3.2 s ahead and 20 ppm fast; inputs given out of order.
for r in 0 1; do
	"$gen" "$tmp/a-$r.pftrace" --rank $r --skew 1:3200000000 --drift 1:20 || bad "ranks_trace $r"
done
"$ct" merge --ranks "$tmp/a-1.pftrace" "$tmp/a-0.pftrace" -o "$tmp/a.pftrace" 2>"$tmp/err" && ok ||
	{ bad "merge --ranks"; cat "$tmp/err"; }
grep -q "^cuptrace merge: rank 0 @ node0 ($tmp/a-0.pftrace): reference, shifted by" "$tmp/err" &&
	grep -q "^cuptrace merge: rank 1 @ node1 ($tmp/a-1.pftrace): nccl, shifted by .*, drift -20\.[0-9]* ppm; REALTIME placement corrected by -3\.2000[0-9]* s (40 collectives matched)" "$tmp/err" &&
	grep -q "^cuptrace merge: 2 machines; 40 symmetric collectives (all-reduce, all-gather, reduce-scatter, all-to-all) on two ranks or more; their ends after alignment spread by" "$tmp/err" &&
	ok || { bad "merge --ranks report:"; cat "$tmp/err"; }
[ "$(sums "$tmp/a.pftrace")" = "$(sums "$tmp/a-0.pftrace" "$tmp/a-1.pftrace")" ] && ok ||
	bad "a.pftrace holds $(sums "$tmp/a.pftrace") (slices flows tracks), inputs $(sums "$tmp/a-0.pftrace" "$tmp/a-1.pftrace")"
"$chk" "$tmp/a.pftrace" --clean >/dev/null 2>"$tmp/chk.err" && ok || { bad "a.pftrace not clean"; cat "$tmp/chk.err"; }
"$ct" stats --json "$tmp/a.pftrace" | python3 -c '
import json, sys
m = json.load(sys.stdin)["metadata"]
assert m["rank 1 @ node1: merge_clock"] == "nccl", m
assert m["merge_collectives_matched"] in (40, "40"), m
assert int(m["merge_collective_end_spread_max_ns"]) <= 4000, m
assert m["rank 0 @ node0: rank"] in (0, "0") and m["rank 1 @ node1: boot_id"], m
' 2>"$tmp/py.err" && ok || { bad "merged metadata"; cat "$tmp/py.err"; }
if [ $have_tp = 1 ]; then
	python3 "$src/tests/tp_check.py" --tp "$tp" "$tmp/a.pftrace" --slices "$(sums "$tmp/a.pftrace" | cut -d' ' -f1)" \
		>"$tmp/tp.out" && ok || { bad "trace_processor on a.pftrace"; cat "$tmp/tp.out"; }
	s=$(spread "$tmp/a.pftrace")
	within "$s" 10000 40 2 && ok || bad "a.pftrace: steps, gemm and all-reduce spreads, ranks: $s"
	printf 'rank 0 @ node0: python3\nrank 1 @ node1: python3\n' | cmp -s - "$(procs "$tmp/a.pftrace" >"$tmp/procs"; echo "$tmp/procs")" &&
		ok || { bad "rank processes:"; cat "$tmp/procs"; }
fi

# 2. The same job by REALTIME only: 3.2 s apart, which the check above would catch.
"$ct" merge --ranks --align realtime "$tmp/a-0.pftrace" "$tmp/a-1.pftrace" -o "$tmp/rt.pftrace" 2>"$tmp/err" && ok || bad "--align realtime"
grep -q "rank 1 @ node1 ($tmp/a-1.pftrace): realtime, shifted by" "$tmp/err" && ok || { bad "--align realtime report:"; cat "$tmp/err"; }
if [ $have_tp = 1 ]; then
	set -- $(spread "$tmp/rt.pftrace")
	[ "${3:-0}" -gt 3100000000 ] && ok || bad "--align realtime: all-reduce ends spread by ${3:-?} ns, want about 3.2 s"
fi

# 3. The archive: rank files with their own clocks, the manifest relating them. Without drift
# (the manifest holds an offset, no rate) it must line up as the merged file does.
for r in 0 1 2 3; do
	"$gen" "$tmp/b-$r.pftrace" --rank $r --world 4 --per-host 2 --skew 1:-750000000 || bad "ranks_trace $r"
done
"$ct" merge --ranks "$tmp"/b-[0-3].pftrace -o "$tmp/b.tar" 2>"$tmp/err" && ok || { bad "merge -o b.tar"; cat "$tmp/err"; }
"$ct" merge --ranks "$tmp"/b-[0-3].pftrace -o "$tmp/b.pftrace" 2>/dev/null && ok || bad "merge -o b.pftrace"
grep -q "rank 1 @ node0 ($tmp/b-1.pftrace): boottime, shifted by" "$tmp/err" &&
	grep -q "rank 3 @ node1 ($tmp/b-3.pftrace): nccl, shifted by" "$tmp/err" && ok || { bad "b.tar report:"; cat "$tmp/err"; }
members=$(tar tf "$tmp/b.tar" | tr '\n' ' ')
[ "$members" = "perfetto_manifest.json 1-rank_0_@_node0.pftrace 2-rank_1_@_node0.pftrace 3-rank_2_@_node1.pftrace 4-rank_3_@_node1.pftrace " ] &&
	ok || bad "b.tar holds $members"
tar xOf "$tmp/b.tar" perfetto_manifest.json | python3 -c '
import json, sys
m = json.load(sys.stdin)["perfetto_manifest"]
assert m["version"] == 1 and m["trace_time"] == {"clock": "BOOTTIME", "file": "1-rank_0_@_node0.pftrace"}, m
f = m["files"]
assert [x["machine"]["name"] for x in f] == ["node0", "node0", "node1", "node1"], f
assert "clocks" not in f[0] and "clocks" not in f[1], f
# node0 boots at 7000 s, node1 at 3100 s (tests/ranks.h): BOOTTIME_0 = BOOTTIME_1 + 3900 s
for x in f[2:]:
    c = x["clocks"]
    assert c["clock"] == "BOOTTIME" and c["sync_to"] == {"file": f[0]["path"], "clock": "BOOTTIME"}, c
    assert abs(c["offset_ns"] - 3900 * 10**9) < 5000, c
' 2>"$tmp/py.err" && ok || { bad "b.tar manifest"; cat "$tmp/py.err"; }
if [ $have_tp = 1 ]; then
	for f in b.tar b.pftrace; do
		s=$(spread "$tmp/$f")
		within "$s" 10000 40 4 && ok || bad "$f: steps, gemm and all-reduce spreads, ranks: $s"
	done
	procs "$tmp/b.tar" >"$tmp/procs"
	printf 'rank %s: python3\n' "0 @ node0" "1 @ node0" "2 @ node1" "3 @ node1" | cmp -s - "$tmp/procs" &&
		ok || { bad "b.tar processes:"; cat "$tmp/procs"; }
	echo "select name from machine order by name;" >"$tmp/m.sql"
	[ "$("$tp" -q "$tmp/m.sql" "$tmp/b.tar" 2>/dev/null | tail -n +2 | tr -d '"' | tr '\n' ' ')" = "node0 node1 " ] &&
		ok || bad "b.tar: machines in trace_processor"
	python3 "$src/tests/tp_check.py" --tp "$tp" "$tmp/b.tar" --slices "$(sums "$tmp/b.pftrace" | cut -d' ' -f1)" \
		>"$tmp/tp.out" && ok || { bad "trace_processor on b.tar"; cat "$tmp/tp.out"; }
fi

# 4. Traces that name no rank: merged after the ranks, with a warning.
d=$CUPTRACE_TEST_DATA
"$ct" merge --ranks "$d/vector_add.cupti" "$tmp/a-1.pftrace" -o "$tmp/c.pftrace" 2>"$tmp/err" && ok || bad "merge --ranks, one without rank"
grep -q "vector_add.cupti names no rank" "$tmp/err" && grep -q "^cuptrace merge: rank 1 @ node1 (" "$tmp/err" &&
	ok || { bad "no-rank report:"; cat "$tmp/err"; }

# 5. Errors.
o=$tmp/x.pftrace a=$tmp/a-0.pftrace b=$tmp/a-1.pftrace
expect 2 "--align takes none, realtime or nccl, not 'ptp'" "$ct" merge --ranks --align ptp "$a" "$b" -o "$o"
expect 2 "--align-on is for --side-by-side" "$ct" merge --ranks --align-on step "$a" "$b" -o "$o"
expect 2 "--align is for --ranks" "$ct" merge --side-by-side --align nccl "$a" "$b" -o "$o"
expect 2 "say --side-by-side" "$ct" merge --ranks --side-by-side "$a" "$b" -o "$o"
expect 1 "cannot read /nonexistent.pftrace" "$ct" merge --ranks "$a" /nonexistent.pftrace -o "$o"
[ -e "$o" ] && bad "a refused merge left $o"

echo "$n checks passed"
[ $fail = 0 ] && rm -rf "$tmp"
exit $fail
