#!/bin/sh
# Issue 42: no form of `cuptrace merge` may put an event where Perfetto drops it. Pairs of real
# runs (torch.profiler traces from ../shared/external-traces, never copied here; captures of
# tests/data) merged every way: --side-by-side aligned and --no-align, --ranks aligned and
# --align none, each into one .pftrace and into the .tar of one file per input. Each output is
# read back by tests/pf_times.py, which decodes the protobuf itself and works out each event's
# time as trace_processor does: no TrackEvent at a negative time, and every input's slices there
# (per input, as `cuptrace stats --json` counts them in that input alone); our reader's import
# checks (check_trace --clean: no negative time, nothing before the clock snapshot, ...) pass
# too, allowing only the GPU slices without an incoming flow that the inputs themselves have;
# where trace_processor_shell is found, its stats table has no error (tests/tp_check.py). A
# `share --keep-time --window` of each side-by-side trace keeps its times clean too.
set -u
ct=$CUPTRACE_BIN
chk=$CHECK_TRACE
src=${CUPTRACE_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
data=${CUPTRACE_TEST_DATA:-$src/tests/data}
ext=${CUPTRACE_EXTERNAL_TRACES:-$src/../shared/external-traces}
if ! command -v python3 >/dev/null 2>&1; then
	echo "SKIP: python3 not found (needed to decode the merged traces)"
	exit 77
fi
tp=${TRACE_PROCESSOR_SHELL:-$(command -v trace_processor_shell || echo "$src/../shared/tools/trace_processor_shell")}
have_tp=0
[ -x "$tp" ] && have_tp=1 || echo "SKIP (part): $tp not found: merged traces not loaded in Perfetto's trace processor"
tmp=$(mktemp -d "${CUPTRACE_TMP:-/tmp}/merge_time.XXXXXX")
. "$src/tests/script_lib.sh"

# "slices unlinked" of one input alone: its slices, and its GPU slices without a flow in.
input_counts() {
	"$ct" stats --json "$1" | python3 -c '
import json, sys
e = json.load(sys.stdin)["events"]
print(e["slices"], e["gpu_slices"] - e["gpu_slices_with_flow_in"])'
}

# check_files WANT_A WANT_B FILE...: pf_times.py's reading of FILEs (one trace, or the members
# of a .tar) holds WANT_A slices under label A and WANT_B under B, and nothing at a negative
# time; a member holds one label only.
check_files() {
	wa=$1 wb=$2
	shift 2
	python3 "$src/tests/pf_times.py" "$@" >"$tmp/times.json" || { bad "pf_times.py $*"; return; }
	python3 - "$wa" "$wb" "$#" "$tmp/times.json" <<'EOF' >"$tmp/times.err" && ok || { bad "$what: $(cat "$tmp/times.err")"; }
import json, sys
want = {"A": int(sys.argv[1]), "B": int(sys.argv[2])}
files = int(sys.argv[3])
got, neg, bad = {}, 0, []
for line in open(sys.argv[4]):
    t = json.loads(line)
    neg += t["negative"]
    if files > 1 and len(t["slices"]) != 1:
        bad.append(f"a member holds {sorted(t['slices'])}")
    for k, v in t["slices"].items():
        got[k] = got.get(k, 0) + v
if neg:
    bad.append(f"{neg} TrackEvents at a negative time: trace_processor drops them")
if got != want:
    bad.append(f"slices per input {got}, the inputs alone {want}")
print("; ".join(bad))
sys.exit(1 if bad else 0)
EOF
}

# share --window of a merged trace keeps its times and clocks (--keep-time): what it keeps of
# the first 40 ms is at no negative time either.
share_window() {
	"$ct" share --keep-time --window 0:40ms "$1" -o "$tmp/share.pftrace" >/dev/null 2>"$tmp/err" ||
		{ bad "share --window of $what: $(cat "$tmp/err")"; return; }
	python3 "$src/tests/pf_times.py" "$tmp/share.pftrace" | python3 -c '
import json, sys
t = json.load(sys.stdin)
sys.exit(0 if t["negative"] == 0 and t["total_slices"] > 0 else print(t) or 1)' >"$tmp/times.err" &&
		ok || bad "share --window of $what: $(cat "$tmp/times.err")"
	"$chk" "$tmp/share.pftrace" --clean 2>&1 | grep -E "Perfetto time|before the clock|clock errors" >"$tmp/chk.err"
	[ -s "$tmp/chk.err" ] && bad "share --window of $what: $(cat "$tmp/chk.err")" || ok
}

# merge_all A B [FORM|STDERR-PATTERN lines]: every form; where a FORM is listed, its stderr must
# match the pattern (the shifts that made the issue: the test is not vacuous).
merge_all() {
	a=$1 b=$2 says=${3:-}
	set -- $(input_counts "$a") $(input_counts "$b")
	[ $# = 4 ] || { bad "stats --json of $a or $b"; return; }
	sa=$1 ua=$2 sb=$3 ub=$4
	for form in "--side-by-side" "--side-by-side --no-align" "--ranks" "--ranks --align none"; do
		for kind in pftrace tar; do
			what="merge $form $(basename "$a") $(basename "$b") -o .$kind"
			out=$tmp/m.$kind
			rm -rf "$out" "$tmp/x"
			# shellcheck disable=SC2086
			if ! "$ct" merge $form --label A --label B "$a" "$b" -o "$out" 2>"$tmp/err"; then
				bad "$what failed: $(cat "$tmp/err")"
				continue
			fi
			printf '%s\n' "$says" | while IFS='|' read -r f say; do
				[ "$f" = "$form" ] || continue
				grep -q -- "$say" "$tmp/err" || echo "$what: stderr lacks '$say': $(cat "$tmp/err")"
			done >"$tmp/says"
			[ -s "$tmp/says" ] && bad "$(cat "$tmp/says")" || ok
			if [ $kind = tar ]; then
				mkdir "$tmp/x" && tar -xf "$out" -C "$tmp/x" || { bad "$what: tar -x"; continue; }
				check_files "$sa" "$sb" "$tmp"/x/*.pftrace
				for f in "$tmp"/x/*.pftrace; do
					case $f in *-A.pftrace) u=$ua ;; *) u=$ub ;; esac
					"$chk" "$f" --clean --allow-unlinked "$u" >/dev/null 2>"$tmp/chk.err" && ok ||
						bad "$what: $(basename "$f") not clean: $(cat "$tmp/chk.err")"
				done
			else
				check_files "$sa" "$sb" "$out"
				"$chk" "$out" --clean --allow-unlinked $((ua + ub)) >/dev/null 2>"$tmp/chk.err" && ok ||
					bad "$what: not clean: $(cat "$tmp/chk.err")"
				[ "$form" = --side-by-side ] && share_window "$out"
			fi
			[ $have_tp = 1 ] || continue
			python3 "$src/tests/tp_check.py" --tp "$tp" "$out" >"$tmp/tp.out" 2>&1 && ok ||
				bad "$what: trace_processor: $(cat "$tmp/tp.out")"
		done
	done
}

# Captures of this repository: a run and the same run changed; two ranks of one DDP job.
merge_all "$data/steps_base.cupti" "$data/steps_changed.cupti"
merge_all "$data/ddp2_rank0.cupti" "$data/ddp2_rank1.cupti"

if [ -d "$ext" ]; then
	# The issue's pair: aligned at their first ProfilerStep, the control run is shifted by
	# 10.591 ms, and its BOOTTIME (none: 0) went to -10591000 with it, which put the first
	# 10.591 ms of the merged trace at a negative time: four events lost, one member of the
	# .tar one, the other four. With --ranks --align none the runs, 8.5 days apart on the
	# files' clock, lost the whole control run (149879 events).
	merge_all "$ext/hta_trace_diff_control.json.gz" "$ext/hta_trace_diff_test.json.gz" \
		"--side-by-side|A (.*hta_trace_diff_control.json.gz): shifted by +10.591 ms
--ranks --align none|B (.*hta_trace_diff_test.json.gz): none, shifted by +735003.655724 s"
	# Two ranks of one job, and a baseline and a test run.
	merge_all "$ext/hta_sampled_rank-0.json.gz" "$ext/hta_sampled_rank-1.json.gz"
	merge_all "$ext/hta_trace_compare_base.json.gz" "$ext/hta_trace_compare_test.json.gz"
else
	echo "SKIP (part): $ext is absent (the shared folder of real traces): only tests/data merged"
fi

rm -rf "$tmp"
echo "merge_time_test: $n checks passed"
exit $fail
