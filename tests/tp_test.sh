#!/bin/sh
# Perfetto's own trace processor reads every capture in tests/data converted to Perfetto and to
# Chrome JSON (torch_train also to .pftrace.gz and .json.gz): its stats table has no import error
# or data loss, it reads back what `cuptrace stats` reports for the capture (slices by category,
# instants, flows, counter values, the process, the traced host's system) and the slices per
# track of our own reader, plus exact counts for vector_add and multi_stream; the Perfetto
# and JSON files of one capture agree (tp_check.py --same-as), and so does the Perfetto trace
# read back from the JSON (pftrace -> json.gz -> pftrace). Every torch.profiler trace of
# tests/data (*.kineto.json*) converted to Perfetto and JSON loads clean with the slices, flows
# and counter values trace_processor reads from the original, and JSON -> Perfetto -> JSON
# keeps its timeline. Call stacks (native, symbolized; Python-like) come back as the slices'
# callstacks. Host stack samples (PerfSample) land in perf_sample with their callstacks, also
# after a merge. Uses $TRACE_PROCESSOR_SHELL, trace_processor_shell on PATH, or
# shared/tools/trace_processor_shell beside the checkout; skips where there is none.
set -u
src=${CUPTRACE_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
tp=${TRACE_PROCESSOR_SHELL:-$(command -v trace_processor_shell || echo "$src/../shared/tools/trace_processor_shell")}
if [ ! -x "$tp" ]; then
	echo "SKIP: $tp not found: traces not checked in Perfetto's trace processor"
	exit 77
fi
if ! command -v python3 >/dev/null 2>&1; then
	echo "SKIP: python3 not found (needed by tests/tp_check.py)"
	exit 77
fi
export TRACE_PROCESSOR_SHELL="$tp"
ct=$CUPTRACE_BIN
chk=$CHECK_TRACE
tpc() { python3 "$src/tests/tp_check.py" "$@"; }
tmp=$(mktemp -d "${CUPTRACE_TMP:-/tmp}/tp.XXXXXX")
fail=0 n=0

# What `cuptrace stats CAPTURE` reports, as tp_check.py arguments, one a line. trace_processor
# also counts the two "cuptrace:" instants (trace info, summary) that stats leaves out.
stats_args() {
	awk '
	/^Process:/ { s = $0; sub(/^Process: */, "", s); sub(/ \(pid [0-9]+\)$/, "", s)
		print "--process"; print s }
	/^Events:/ { for (i = 2; i < NF; i++) {
			if ($(i + 1) ~ /^slices/) print "--slices\n" $i
			if ($(i + 1) ~ /^instants/) print "--instants\n" $i + 2
			if ($(i + 1) == "counter") print "--counters\n" $i } }
	/^Flows:/ { print "--flows"; print $2 }
	/^Slices by category:/ { cat = 1; next }
	cat && /^$/ { cat = 0 }
	cat && $2 ~ /^[0-9]+$/ { print "--category"; print $1 "=" $2 }
	' "$1"
	printf '%s\n' --name "cuptrace: trace info=1" --name "cuptrace: summary=1"
}
# The traced host's system, from the "os" stats shows (sysname release machine): Perfetto only.
meta_args() {
	awk '/^os: / { print "--meta\nsystem_name=" $2 "\n--meta\nsystem_release=" $3
		print "--meta\nsystem_machine=" $4 }' "$1"
}
# Slices and instants per track name from our reader (lanes of one name summed), with the trace
# info and summary instants it leaves out on the main thread that holds them ("meta" line);
# $2 = --track for the counts, or --thread: in the JSON every track is a thread of that name.
track_args() {
	awk -F '\t' -v opt="$2" '
	$1 == "track" || $1 == "meta" { n[$2] += $1 == "meta" ? $3 : $3 + $4 }
	END { for (t in n) if (n[t] > 0) { print opt; print opt == "--track" ? t "=" n[t] : t } }
	' "$1"
}
# Exact counts of the examples, as in test_convert.c.
exact_args() {
	case $1 in
	vector_add)
		printf '%s\n' --flows 5 --category kernel=1 --category memset=1 \
			--name "vector_add(float const*, float const*, float*, int)=1" \
			--name "Memcpy HtoD (Pageable -> Device)=2" \
			--name "Memcpy DtoH (Device -> Pageable)=1" --name cudaLaunchKernel=1 \
			--name cudaMemcpy=3 --name cudaMalloc=3 --thread vector_add ;;
	multi_stream)
		printf '%s\n' --flows 1002 --category kernel=1000 --name "tiny(int*)=1000" \
			--name cudaLaunchKernel=1000 --name "Wait: stream=4" --thread worker-0 \
			--thread worker-1 --thread worker-2 --thread worker-3 ;;
	esac
}

for cap in "$CUPTRACE_TEST_DATA"/*.cupti; do
	name=$(basename "$cap" .cupti)
	t=$tmp/$name
	if ! "$ct" convert "$cap" -o "$t.pftrace" 2>"$t.err" || ! "$ct" convert "$cap" -o "$t.json" 2>>"$t.err" ||
		! "$ct" stats "$cap" >"$t.stats" 2>>"$t.err" || ! "$chk" "$t.pftrace" --dump-tracks --dump-meta-track >"$t.tracks"; then
		echo "FAIL $name: convert, stats or check_trace"; cat "$t.err"; fail=1; continue
	fi
	{ stats_args "$t.stats"; track_args "$t.tracks" --track; exact_args "$name"; } >"$t.args"
	meta_args "$t.stats" >"$t.pf.args"
	track_args "$t.tracks" --thread >"$t.json.args"
	ok=1
	tpc "$t.pftrace" "@$t.args" "@$t.pf.args" || ok=0
	tpc "$t.json" "@$t.args" "@$t.json.args" --same-as "$t.pftrace" || ok=0
	# Read back from cuptrace's JSON, the Perfetto trace is the same timeline.
	"$ct" convert "$t.pftrace" -o "$t.rt.json.gz" 2>/dev/null &&
		"$ct" convert "$t.rt.json.gz" -o "$t.rt.pftrace" 2>/dev/null &&
		tpc "$t.rt.pftrace" "@$t.pf.args" --same-as "$t.pftrace" || ok=0
	if [ "$name" = torch_train ]; then
		"$ct" convert "$cap" -o "$t.pftrace.gz" 2>/dev/null && "$ct" convert "$cap" -o "$t.json.gz" 2>/dev/null &&
			tpc "$t.json.gz" "@$t.args" --same-as "$t.pftrace.gz" || ok=0
	fi
	if [ $ok = 1 ]; then n=$((n + 1)); else echo "FAIL $name"; fail=1; fi
done
echo "$n captures read back by trace_processor as cuptrace stats reports them, Perfetto and JSON alike"
k=0
for f in "$CUPTRACE_TEST_DATA"/*.kineto.json*; do
	[ -e "$f" ] || continue
	t=$tmp/$(basename "$f")
	if ! "$ct" convert "$f" -o "$t.pftrace" 2>"$t.err" || ! "$ct" convert "$f" -o "$t.json" 2>>"$t.err" ||
		! "$ct" convert "$t.pftrace" -o "$t.rt.json" 2>>"$t.err"; then
		echo "FAIL $f: convert"; cat "$t.err"; fail=1; continue
	fi
	if tpc "$t.pftrace" --same-totals-as "$f" && tpc "$t.json" --same-totals-as "$f" &&
		tpc "$t.rt.json" --same-as "$t.json"; then
		k=$((k + 1))
	else
		echo "FAIL $f"; fail=1
	fi
done
echo "$k torch.profiler traces converted to Perfetto and JSON as trace_processor reads them"

# Call stacks (issue 27) as trace_processor imports them: each slice's interned callstack
# (TrackEvent.callstack_iid) walked from the callsite to the root. A capture recorded on an H100
# from a stripped C program, symbolized here: every memset and copy is c <- b <- a <- main at
# the lines of tests/stacks_prog.c found by their text; and Python-like frames (function, file,
# line) written from a JSON trace's "stack" argument (on the launch and its kernel, as cuptrace's
# JSON has it).
cp -r "$CUPTRACE_TEST_DATA/stacks_native" "$tmp/stacks_native"
cat >"$tmp/py.json" <<'JSON'
{"traceEvents": [
 {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10, "dur": 5,
  "args": {"correlation": 7, "stack": "forward (/w/model.py:42)\n<lambda> (/w/train.py:9)\ntrain (/w/train.py:3)"}},
 {"ph": "X", "cat": "kernel", "name": "k", "pid": 1, "tid": 100, "ts": 20, "dur": 5,
  "args": {"correlation": 7, "stack": "forward (/w/model.py:42)\n<lambda> (/w/train.py:9)\ntrain (/w/train.py:3)"}}
]}
JSON
cat >"$tmp/stacks.sql" <<'SQL'
with recursive chain(slice_id, cid, depth) as (
  select slice_id, callsite_id, 0 from __intrinsic_track_event_callstacks
  union all
  select chain.slice_id, c.parent_id, chain.depth + 1 from chain
  join stack_profile_callsite c on c.id = chain.cid where c.parent_id is not null)
select s.id, s.category, chain.depth, f.name, coalesce(sym.source_file, ''),
  coalesce(sym.line_number, 0)
from chain join slice s on s.id = chain.slice_id
join stack_profile_callsite c on c.id = chain.cid join stack_profile_frame f on f.id = c.frame_id
left join stack_profile_symbol sym on sym.symbol_set_id = f.symbol_set_id
order by s.id, chain.depth;
SQL
# What ui.perfetto.dev shows when a slice is selected: its "Callstack" section (plugin
# dev.perfetto.TraceProcessorTrack) lists the frames that the stdlib macro
# _callstacks_for_stack_profile_samples gives for the slice's callsite, root first, each
# "name (file:line)". Asked here the same way for the first memset and the first copy.
# Names go through the trace processor's demangler: builds with LLVM's (the UI's) leave C
# names alone, builds with libstdc++'s turn one-letter ones into types ("c" -> "char"), so
# the check is on files and lines, and on names only for main and the CUDA call.
cat >"$tmp/ui.sql" <<'SQL'
include perfetto module callstacks.stack_profile;
select 'memset' as category, * from _callstacks_for_stack_profile_samples!((
  select callsite_id from __intrinsic_track_event_callstacks
  where slice_id = (select min(id) from slice where category = 'memset')))
union all
select 'memcpy' as category, * from _callstacks_for_stack_profile_samples!((
  select callsite_id from __intrinsic_track_event_callstacks
  where slice_id = (select min(id) from slice where category = 'memcpy')))
order by category, id;
SQL
if "$ct" convert --symbol-dir "$tmp/stacks_native" "$CUPTRACE_TEST_DATA/stacks_native.cupti" \
	-o "$tmp/sn.pftrace" 2>"$tmp/sn.err" && "$ct" convert "$tmp/py.json" -o "$tmp/py.pftrace" 2>>"$tmp/sn.err" &&
	"$tp" -q "$tmp/stacks.sql" "$tmp/sn.pftrace" >"$tmp/sn.csv" 2>"$tmp/tp.err" &&
	"$tp" -q "$tmp/stacks.sql" "$tmp/py.pftrace" >"$tmp/py.csv" 2>>"$tmp/tp.err" &&
	"$tp" -q "$tmp/ui.sql" "$tmp/sn.pftrace" >"$tmp/ui.csv" 2>>"$tmp/tp.err"; then
	if grep -q "built without libdw" "$tmp/sn.err"; then
		echo "note: this cuptrace was built without libdw: native frames not checked" >&2
		: >"$tmp/sn.csv.skip"
	fi
	python3 - "$src/tests/stacks_prog.c" "$tmp/sn.csv" "$tmp/py.csv" "$tmp/ui.csv" <<'PY' || fail=1
import csv, os, re, sys
src, sn, py, ui = sys.argv[1:]
lines = open(src).read().splitlines()
def line_of(pat):
    hits = [i + 1 for i, l in enumerate(lines) if re.search(pat, l)]
    assert len(hits) == 1, (pat, hits)
    return hits[0]
def stacks(path):
    out = {}
    for row in csv.reader(open(path)):
        if len(row) == 6 and row[0].isdigit():
            out.setdefault((int(row[0]), row[1]), []).append((row[3], row[4], int(row[5])))
    return out
fails = []
want = {"memset": line_of(r"cudaMemset\("), "memcpy": line_of(r"cudaMemcpy\(")}
outer = [("b", line_of(r"return c\(")), ("a", line_of(r"r \|= b\(")), ("main", line_of(r"int r = a\("))]
seen = {"memset": 0, "memcpy": 0}
for (sid, cat), frames in stacks(sn).items():
    if cat not in seen:
        continue
    ours = [(f, ln) for f, path, ln in frames if path.endswith("stacks_prog.c")]
    if ours != [("c", want[cat])] + outer:
        fails.append("slice %d (%s): frames in stacks_prog.c %s" % (sid, cat, ours))
    seen[cat] += 1
if seen != {"memset": 3, "memcpy": 3} and not os.path.exists(sn + ".skip"):
    fails.append("GPU slices with a callstack in trace_processor: %s, expected 3 and 3" % seen)
if not os.path.exists(sn + ".skip"):
    # the UI's query: root first, so the lines of main, a, b, then c's call
    rows = list(csv.DictReader(open(ui)))
    for cat, call in (("memset", "cudaMemset"), ("memcpy", "cudaMemcpy")):
        fr = [r for r in rows if r["category"] == cat]
        ours = [int(r["line_number"]) for r in fr if r["source_file"].endswith("stacks_prog.c")]
        names = [r["name"] for r in fr]
        if ours != [ln for _, ln in reversed(outer)] + [want[cat]] or "main" not in names \
                or names[-1] != call:
            fails.append("%s: the UI's callstack query gives %s" % (
                cat, ["%s (%s:%s)" % (r["name"], r["source_file"], r["line_number"]) for r in fr]))
pys = [f for (sid, cat), f in stacks(py).items()]
exp = [("forward", "/w/model.py", 42), ("<lambda>", "/w/train.py", 9), ("train", "/w/train.py", 3)]
if len(pys) != 2 or any(p != exp for p in pys):  # the launch and its kernel
    fails.append("Python frames in trace_processor: %s" % pys)
print("\n".join("FAIL: " + f for f in fails) if fails else
      "ok call stacks in trace_processor: 3 memsets and 3 copies c <- b <- a <- main at the "
      "source's lines, and so in the UI's Callstack section (its query); Python frames "
      "function/file/line on a launch and its kernel")
sys.exit(1 if fails else 0)
PY
else
	echo "FAIL call stacks: convert or trace_processor"; cat "$tmp/sn.err" "$tmp/tp.err"; fail=1
fi

# Host stack samples (record --sample: PerfSample packets, TracePacket field 66), planted in a
# GPU capture by sample_capture.py from its own plan (70 samples in load_batch, 30 in
# preprocess, all on the main thread, 1 ms apart; one more naming no stack, which the converter
# drops): trace_processor's perf_sample rows, their thread, their callsites' leaf frames and
# depth (3 frames: depth 2), and no import error or data loss.
cat >"$tmp/samples.sql" <<'SQL'
SELECT 'SAMPLES ' || COUNT(*) || ' ' || COUNT(DISTINCT utid) || ' '
       || IFNULL(MAX(ts) - MIN(ts), -1) AS line FROM perf_sample
UNION ALL
SELECT 'TID ' || t.tid || ' ' || COUNT(*) FROM perf_sample s JOIN thread t USING (utid)
GROUP BY t.tid
UNION ALL
SELECT 'LEAF ' || f.name || ' ' || COUNT(*) || ' ' || MAX(c.depth)
FROM perf_sample s JOIN stack_profile_callsite c ON c.id = s.callsite_id
JOIN stack_profile_frame f ON f.id = c.frame_id GROUP BY f.name
UNION ALL
SELECT 'STAT ' || name || ' ' || idx || ' ' || severity || ' ' || value FROM stats
WHERE value > 0 AND severity IN ('error', 'data_losses');
SQL
if python3 "$src/tests/sample_capture.py" make "$CUPTRACE_TEST_DATA/torch_train.cupti" \
	"$tmp/s.cupti" >/dev/null 2>&1 && "$ct" convert "$tmp/s.cupti" -o "$tmp/s.pftrace" \
	>/dev/null 2>&1 && "$tp" -q "$tmp/samples.sql" "$tmp/s.pftrace" >"$tmp/s.csv" 2>"$tmp/tp.err"; then
	got=$(grep -oE '(SAMPLES|TID|LEAF|STAT) [^"]*' "$tmp/s.csv" | sort | tr '\n' ';')
	main=$(python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import sample_capture as s
print(s.meta(open(sys.argv[2], "rb").read())["pid"])' "$src/tests" "$tmp/s.cupti")
	want="LEAF load_batch 70 2;LEAF preprocess 30 2;SAMPLES 100 1 99000000;TID $main 100;"
	if [ "$got" = "$want" ]; then
		echo "ok host samples in trace_processor: $got"
	else
		echo "FAIL host samples in trace_processor: got '$got', expected '$want'"
		fail=1
	fi
else
	echo "FAIL host samples: sample_capture, convert or trace_processor"
	cat "$tmp/tp.err"
	fail=1
fi
# The same trace merged with itself (`cuptrace merge` keeps every input's samples): 200
# perf_sample rows on two threads (the merge gives the second input a pid of its own, so its
# thread is another), 100 in each input's process, the leaf frames doubled.
cat >"$tmp/msamples.sql" <<'SQL'
SELECT 'SAMPLES ' || COUNT(*) || ' ' || COUNT(DISTINCT utid) AS line FROM perf_sample
UNION ALL
SELECT 'PROC ' || SUBSTR(p.name, 1, INSTR(p.name, ':') - 1) || ' ' || COUNT(*)
FROM perf_sample s JOIN thread t USING (utid) JOIN process p USING (upid) GROUP BY p.name
UNION ALL
SELECT 'LEAF ' || f.name || ' ' || COUNT(*)
FROM perf_sample s JOIN stack_profile_callsite c ON c.id = s.callsite_id
JOIN stack_profile_frame f ON f.id = c.frame_id GROUP BY f.name
UNION ALL
SELECT 'STAT ' || name || ' ' || idx || ' ' || severity || ' ' || value FROM stats
WHERE value > 0 AND severity IN ('error', 'data_losses');
SQL
if [ -s "$tmp/s.pftrace" ] && "$ct" merge --side-by-side --no-align --label A --label B \
	"$tmp/s.pftrace" "$tmp/s.pftrace" -o "$tmp/ms.pftrace" >/dev/null 2>&1 &&
	"$tp" -q "$tmp/msamples.sql" "$tmp/ms.pftrace" >"$tmp/ms.csv" 2>"$tmp/tp.err"; then
	got=$(grep -oE '(SAMPLES|PROC|LEAF|STAT) [^"]*' "$tmp/ms.csv" | sort | tr '\n' ';')
	want="LEAF load_batch 140;LEAF preprocess 60;PROC A 100;PROC B 100;SAMPLES 200 2;"
	if [ "$got" = "$want" ]; then
		echo "ok merged host samples in trace_processor: $got"
	else
		echo "FAIL merged host samples in trace_processor: got '$got', expected '$want'"
		fail=1
	fi
else
	echo "FAIL merged host samples: merge or trace_processor"
	cat "$tmp/tp.err"
	fail=1
fi
[ $fail = 0 ] && rm -rf "$tmp"
exit $fail
