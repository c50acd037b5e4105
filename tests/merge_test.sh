#!/bin/sh
# `cuptrace merge --side-by-side` end to end, no GPU needed: synthetic runs (tests/steps_trace.c)
# and real captures merged into .pftrace, .pftrace.gz and .json; the output holds the sum of
# what the inputs hold (our reader, and Perfetto's trace processor where
# ../shared/tools/trace_processor_shell exists: no import error, one process per input in input
# order with distinct pids); the shifts printed on stderr; errors exit 1 or 2 with a message and
# leave no output behind.
set -u
ct=$CUPTRACE_BIN
chk=$CHECK_TRACE
src=${CUPTRACE_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
tp=${TRACE_PROCESSOR_SHELL:-$src/../shared/tools/trace_processor_shell}
if ! command -v python3 >/dev/null 2>&1; then
	echo "SKIP: python3 not found (needed to read stats --json)"
	exit 77
fi
tmp=$(mktemp -d "${CUPTRACE_TMP:-/tmp}/merge.XXXXXX")
. "$src/tests/script_lib.sh"
have_tp=0
[ -x "$tp" ] && have_tp=1 || echo "SKIP (part): $tp not found: merged traces not loaded in Perfetto's trace processor"

"$STEPS_TRACE" "$tmp/base.pftrace" &&
	"$STEPS_TRACE" "$tmp/slow.pftrace" --gemm 4500 --softmax --start 50000 --lead 7000 ||
	{ echo "FAIL: steps_trace"; exit 1; }

# The sums of what `cuptrace stats --json` says of each input, as "slices instants counters
# flows tracks gpu_busy_ns".
sums() {
	for f in "$@"; do "$ct" stats --json "$f"; done | python3 -c '
import json, sys
t = [0] * 6
for line in sys.stdin:
    j = json.loads(line)
    e = j["events"]
    for i, v in enumerate((e["slices"], e["instants"], e["counter_values"], j["flows"]["complete"],
                           e["tracks"], j["gpu_busy_ns"])):
        t[i] += v
print(*t)'
}

# Checks a merged trace: our reader's sums, a clean Perfetto file, and trace_processor.
check_merged() { # merged inputs...
	out=$1
	shift
	# Besides the inputs' instants, each input's own trace info and, where the input has a
	# summary (its JSON form shows one), its summary: instants "cuptrace: trace info (LABEL)"
	# and "cuptrace: summary (LABEL)" (issue 25).
	nsum=0 nin=$#
	for f in "$@"; do
		"$ct" convert "$f" -o "$tmp/in.json" 2>/dev/null || bad "convert $f"
		grep -q '"cuptrace: summary"' "$tmp/in.json" && nsum=$((nsum + 1))
	done
	"$ct" convert "$out" -o "$tmp/out.json" 2>/dev/null || bad "convert $out"
	[ "$(grep -o '"cuptrace: trace info (' "$tmp/out.json" | wc -l)" = $# ] && ok ||
		bad "$out: not one trace info per input"
	[ "$(grep -o '"cuptrace: summary (' "$tmp/out.json" | wc -l)" = $nsum ] && ok ||
		bad "$out: not one summary per input that has one ($nsum)"
	set -- $(sums "$@")
	want="$1 $(($2 + nin + nsum)) $3 $4 $5 $6"
	got=$(sums "$out")
	[ "$got" = "$want" ] && ok || bad "$out holds $got (slices instants counters flows tracks busy), inputs $want"
	case $out in
	*.json | *.json.gz) ;;
	*) "$chk" "$out" --clean >/dev/null 2>"$tmp/chk.err" && ok || { bad "$out not clean"; cat "$tmp/chk.err"; } ;;
	esac
	[ $have_tp = 1 ] || return 0
	set -- $want
	# trace_processor counts the "cuptrace: trace info" instant that our reader leaves out.
	python3 "$src/tests/tp_check.py" --tp "$tp" "$out" --slices "$1" --instants $(($2 + 1)) \
		--counters "$3" --flows "$4" >"$tmp/tp.out" && ok || { bad "trace_processor on $out"; cat "$tmp/tp.out"; }
}

# Processes as trace_processor sees them, in the UI's order (its sort hint): "pid name" lines.
tp_processes() {
	echo "select pid, name from process where pid != 0 and name not like 'GPU %'
		order by extract_arg(arg_set_id, 'process_sort_index_hint'), upid;" >"$tmp/q.sql"
	"$tp" -q "$tmp/q.sql" "$1" 2>/dev/null | tail -n +2 | tr -d '"' | tr ',' ' '
}

# 1. Two runs of one program: labels, shifts, pids (--no-align: each from its first event).
"$ct" merge --side-by-side --no-align --label A --label B "$tmp/base.pftrace" "$tmp/slow.pftrace" \
	-o "$tmp/ab.pftrace" 2>"$tmp/err" && ok || { bad "merge A B"; cat "$tmp/err"; }
grep -qxF "cuptrace merge: A ($tmp/base.pftrace): shifted by -1 us" "$tmp/err" &&
	grep -qxF "cuptrace merge: B ($tmp/slow.pftrace): shifted by -43 us, pid 4244 (was 4242)" "$tmp/err" &&
	ok || { bad "merge: shifts on stderr:"; cat "$tmp/err"; }
check_merged "$tmp/ab.pftrace" "$tmp/base.pftrace" "$tmp/slow.pftrace"
if [ $have_tp = 1 ]; then
	tp_processes "$tmp/ab.pftrace" >"$tmp/procs"
	printf '4242 A: steps\n4244 B: steps\n' | cmp -s - "$tmp/procs" && ok ||
		{ bad "processes in trace_processor:"; cat "$tmp/procs"; }
fi
for ext in json pftrace.gz json.gz; do
	"$ct" merge --side-by-side --label A --label B "$tmp/base.pftrace" "$tmp/slow.pftrace" \
		-o "$tmp/ab.$ext" 2>/dev/null && ok || bad "merge to .$ext"
	case $ext in json*) [ $have_tp = 1 ] && { python3 "$src/tests/tp_check.py" --tp "$tp" "$tmp/ab.$ext" \
		--same-as "$tmp/ab.pftrace" >"$tmp/tp.out" && ok || { bad "ab.$ext differs from ab.pftrace"; cat "$tmp/tp.out"; }; } ;;
	*) check_merged "$tmp/ab.$ext" "$tmp/base.pftrace" "$tmp/slow.pftrace" ;;
	esac
done
if [ $have_tp = 1 ]; then
	tp_processes "$tmp/ab.json" >"$tmp/procs"
	printf '4242 A: steps\n4244 B: steps\n' | cmp -s - "$tmp/procs" && ok ||
		{ bad "processes of the JSON in trace_processor:"; cat "$tmp/procs"; }
fi

# 2. Aligned on the second step: both start it at 17 us.
"$ct" merge --side-by-side --align-on 'step#2' "$tmp/base.pftrace" "$tmp/slow.pftrace" \
	-o "$tmp/al.pftrace" 2>"$tmp/err" && ok || { bad "merge --align-on"; cat "$tmp/err"; }
grep -qxF "cuptrace merge: base.pftrace ($tmp/base.pftrace): shifted by +6 us, step #2 at 17 us" "$tmp/err" &&
	grep -qxF "cuptrace merge: slow.pftrace ($tmp/slow.pftrace): shifted by -43 us, step #2 at 17 us, pid 4244 (was 4242)" "$tmp/err" &&
	ok || { bad "--align-on: shifts on stderr:"; cat "$tmp/err"; }
if [ $have_tp = 1 ]; then
	# Every step's start, relative to the earliest slice of all (the slow run's cudaMalloc).
	echo "select p.name, s.ts - (select min(ts) from slice) from slice s
		join thread_track tt on s.track_id = tt.id join thread using (utid)
		join process p using (upid) where s.name = 'step' order by p.name, s.ts;" >"$tmp/q.sql"
	"$tp" -q "$tmp/q.sql" "$tmp/al.pftrace" 2>/dev/null | tail -n +2 | tr -d '"' >"$tmp/steps"
	for p in base slow; do for t in 7000 17000 27000; do echo "$p.pftrace: steps,$t"; done; done |
		cmp -s - "$tmp/steps" && ok || { bad "aligned steps in trace_processor:"; cat "$tmp/steps"; }
fi
check_merged "$tmp/al.pftrace" "$tmp/base.pftrace" "$tmp/slow.pftrace"

# 2b. By default: a run started 3 s later with 2 s of start-up (a cudaMalloc 2 s before its first
# step) still has its steps on the other's. The steps are named "step" (no ProfilerStep#N), so
# the runs align at their first GPU work; then with ProfilerStep#N names, at their first step.
"$STEPS_TRACE" "$tmp/late.pftrace" --start 3000001000 --lead 2000000000 --pid 77 ||
	bad "steps_trace late"
step_starts() { # trace -> "pid start_ns" per step, by pid then time, from analyze --step step
	"$ct" analyze --step "$2" --json "$1" | python3 -c '
import json, sys
for r in sorted(json.load(sys.stdin)["steps"]["rows"], key=lambda r: (r["pid"], r["start_ns"])):
    print(r["pid"], r["start_ns"])'
}
( cd "$tmp" && "$ct" merge --side-by-side base.pftrace late.pftrace -o auto.pftrace 2>err ) &&
	grep -qxF "cuptrace merge: runs aligned at their first GPU work (no steps found); --align-on NAME[#K] or --no-align to choose" "$tmp/err" &&
	grep -qxF "cuptrace merge: base.pftrace (base.pftrace): shifted by +1.999999 s, aligned at 2.000001 s" "$tmp/err" &&
	grep -qxF "cuptrace merge: late.pftrace (late.pftrace): shifted by -1.000001 s, aligned at 2.000001 s" "$tmp/err" &&
	ok || { bad "default alignment on stderr:"; cat "$tmp/err"; }
# every step of both at the same time: 2 s (the late run's start-up) + 10 us * i
for p in 77 4242; do for i in 0 1 2; do echo "$p $((2000000000 + 10000 * i))"; done; done >"$tmp/want"
step_starts "$tmp/auto.pftrace" step | cmp -s - "$tmp/want" && ok ||
	{ bad "default alignment: steps"; step_starts "$tmp/auto.pftrace" step; }
"$STEPS_TRACE" "$tmp/base.json" && "$STEPS_TRACE" "$tmp/late.json" --start 3000001000 \
	--lead 2000000000 --pid 77 || bad "steps_trace json"
sed -i 's/"name": *"step"/"name": "ProfilerStep#1"/' "$tmp/base.json" "$tmp/late.json"
"$ct" merge --side-by-side "$tmp/base.json" "$tmp/late.json" -o "$tmp/autop.pftrace" 2>"$tmp/err" &&
	grep -q "runs aligned at their first step (ProfilerStep#N)" "$tmp/err" && ok ||
	{ bad "ProfilerStep alignment on stderr:"; cat "$tmp/err"; }
step_starts "$tmp/autop.pftrace" "ProfilerStep#1" | cmp -s - "$tmp/want" && ok ||
	{ bad "ProfilerStep alignment: steps"; step_starts "$tmp/autop.pftrace" "ProfilerStep#1"; }
expect 2 "--align-on or --no-align" "$ct" merge --side-by-side --no-align --align-on step \
	"$tmp/base.pftrace" "$tmp/late.pftrace" -o "$tmp/x.pftrace"

# 3. Real captures, one of them twice.
set -- "$CUPTRACE_TEST_DATA/vector_add.cupti" "$CUPTRACE_TEST_DATA/multi_stream.cupti" \
	"$CUPTRACE_TEST_DATA/torch_train.cupti" "$CUPTRACE_TEST_DATA/vector_add.cupti"
"$ct" merge --side-by-side -o "$tmp/caps.pftrace" "$@" 2>"$tmp/err" && ok || { bad "merge captures"; cat "$tmp/err"; }
grep -q "^cuptrace merge: vector_add.cupti (2) (" "$tmp/err" || bad "a repeated file name's label"
check_merged "$tmp/caps.pftrace" "$@"
if [ $have_tp = 1 ]; then
	tp_processes "$tmp/caps.pftrace" | awk '{ $1 = ""; print substr($0, 2) }' >"$tmp/procs"
	printf '%s\n' "vector_add.cupti: vector_add" "multi_stream.cupti: multi_stream" \
		"torch_train.cupti: python3" "vector_add.cupti (2): vector_add" | cmp -s - "$tmp/procs" && ok ||
		{ bad "capture processes in trace_processor:"; cat "$tmp/procs"; }
	echo "select count(distinct pid), count(*) from process where pid != 0 and name not like 'GPU %';" >"$tmp/q.sql"
	[ "$("$tp" -q "$tmp/q.sql" "$tmp/caps.pftrace" 2>/dev/null | tail -1)" = "4,4" ] && ok || bad "4 distinct pids"
fi

# 4. Errors: a message, the right exit status, no output left behind.
# Like expect, and no output may be left behind.
expect_none() {
	expect "$@"
	[ -e "$tmp/x.pftrace" ] && { bad "$*: left $tmp/x.pftrace"; rm -f "$tmp/x.pftrace"; }
}
# Perfetto's multi-trace form: -o X.tar holds one .pftrace per input, which together hold what
# the single merged file holds, on the same time axis (real captures, aligned on the 2nd step).
d=$CUPTRACE_TEST_DATA
if [ -e "$d/steps_base.cupti" ]; then
	for ext in tar pftrace; do
		"$ct" merge --side-by-side --align-on 'step#2' "$d/steps_base.cupti" "$d/steps_changed.cupti" \
			-o "$tmp/st.$ext" 2>"$tmp/err" || bad "merge -o st.$ext: $(cat "$tmp/err")"
	done
	mkdir -p "$tmp/untar"
	members=$(tar tf "$tmp/st.tar" 2>/dev/null | tr '\n' ' ')
	[ "$members" = "1-steps_base.cupti.pftrace 2-steps_changed.cupti.pftrace " ] && ok || bad "st.tar holds: $members"
	tar xf "$tmp/st.tar" -C "$tmp/untar"
	set -- $(sums "$tmp"/untar/*.pftrace)
	# Each member has its own trace-info instant, which stats does not count; all else sums up.
	set -- $(sums "$tmp/st.pftrace") "$1" "$2" "$3" "$4" "$5"
	[ "$1 $2 $3 $4 $5" = "$7 $8 $9 ${10} ${11}" ] && ok || bad "st.tar members hold $7 $8 $9 ${10} ${11}, st.pftrace $1 $2 $3 $4 $5"
	for f in "$tmp"/untar/*.pftrace; do
		"$chk" "$f" --clean >/dev/null 2>&1 && ok || bad "$f not clean"
	done
	if [ $have_tp = 1 ]; then
		cat >"$tmp/step2.sql" <<'SQL'
select p.name, s.ts from slice s join thread_track tt on s.track_id = tt.id join thread using (utid)
join process p using (upid) where s.name = 'step' order by p.name, s.ts;
SQL
		for ext in tar pftrace; do
			"$tp" -q "$tmp/step2.sql" "$tmp/st.$ext" 2>/dev/null |
				awk -F, 'NR > 1 {c[$1]++; if (c[$1] == 2) print $2}' >"$tmp/step2.$ext"
		done
		# The second step starts at one moment in both runs, in the archive as in the file.
		[ "$(sort -u "$tmp/step2.tar" | wc -l)" = 1 ] && cmp -s "$tmp/step2.tar" "$tmp/step2.pftrace" &&
			ok || bad "st.tar: the 2nd steps at $(cat "$tmp/step2.tar"), st.pftrace: $(cat "$tmp/step2.pftrace")"
		python3 "$src/tests/tp_check.py" --tp "$tp" "$tmp/st.tar" --slices "$(sums "$tmp/st.pftrace" | cut -d' ' -f1)" \
			>"$tmp/tp.out" && ok || { bad "trace_processor on st.tar"; cat "$tmp/tp.out"; }
	fi
	expect_none 2 "named like another format than -f chrome" "$ct" merge --side-by-side -f chrome "$d/steps_base.cupti" \
		"$d/steps_changed.cupti" -o "$tmp/x.tar"
	[ -e "$tmp/x.tar" ] && bad "a refused merge left x.tar"
else
	echo "SKIP (part): $d/steps_base.cupti missing"
fi

b=$tmp/base.pftrace s=$tmp/slow.pftrace o=$tmp/x.pftrace
expect_none 2 "say --side-by-side" "$ct" merge "$b" "$s" -o "$o"
expect_none 2 "needs at least two traces (got 1)" "$ct" merge --side-by-side "$b" -o "$o"
expect_none 2 "needs -o OUTPUT" "$ct" merge --side-by-side "$b" "$s"
expect_none 2 "3 labels for 2 inputs" "$ct" merge --side-by-side -l a -l b -l c "$b" "$s" -o "$o"
expect_none 2 "non-empty label" "$ct" merge --side-by-side -l "" "$b" "$s" -o "$o"
expect_none 2 "takes NAME or NAME#K" "$ct" merge --side-by-side --align-on '#2' "$b" "$s" -o "$o"
expect_none 2 "takes NAME or NAME#K" "$ct" merge --side-by-side --align-on 'step#0' "$b" "$s" -o "$o"
expect_none 2 "unknown format" "$ct" merge --side-by-side -f xml "$b" "$s" -o "$o"
expect_none 1 "$b has 0 slices named 'epoch'; --align-on epoch needs 1" "$ct" merge --side-by-side --align-on epoch "$b" "$s" -o "$o"
expect_none 1 "$s has 3 slices named 'step'; --align-on step#4 needs 4" "$ct" merge --side-by-side --align-on 'step#4' "$s" "$b" -o "$o"
expect_none 1 "cannot read /nonexistent.pftrace" "$ct" merge --side-by-side "$b" /nonexistent.pftrace -o "$o"
head -c 3000 /dev/urandom >"$tmp/garbage.bin"
expect_none 1 "cannot read $tmp/garbage.bin" "$ct" merge --side-by-side "$b" "$tmp/garbage.bin" -o "$o"
expect_none 1 "cannot write /nonexistent-dir/x.pftrace" "$ct" merge --side-by-side "$b" "$s" -o /nonexistent-dir/x.pftrace
cp "$b" "$tmp/keep.pftrace"
expect_none 2 "the output $b is also an input" "$ct" merge --side-by-side "$s" "$b" -o "$b"
cmp -s "$b" "$tmp/keep.pftrace" && ok || bad "merging into an input changed it"
"$ct" merge --help | grep -q "^usage: cuptrace merge" && ok || bad "merge --help"

echo "$n checks passed"
[ $fail = 0 ] && rm -rf "$tmp"
exit $fail
