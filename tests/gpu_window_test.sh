#!/bin/sh
# GPU test: capture windows and the flight recorder (README: Tracing part of a run). Each run's
# window files hold exactly the kernels whose launch lay inside the window (counted from what
# tests/window_work.cu launches, worked out here), with their arrows (check_trace --clean).
set -u
# shellcheck source=tests/gpu_common.sh
gpu_test=win
. "$(dirname "$0")/gpu_common.sh"
set -m
fail=0
ww=${CUPTRACE_BUILD_DIR:-$(dirname "$ct")}/tests/window_work
src=${CUPTRACE_SRC:-$(dirname "$0")/..}
say() { echo "$*"; }
bad() {
	echo "FAIL: $*"
	fail=1
}

# Kernels of window_work nvtx ITERS between the start of range FIRST and the end of range
# LAST (1-based): iteration i launches i % 3 + 1 step kernels inside its range and one
# outside kernel after it (inside the window for every iteration but the last).
expect_nvtx() { # FIRST LAST -> "STEP OUTSIDE"
	python3 -c "import sys; f,l=int(sys.argv[1]),int(sys.argv[2]); print(sum(i%3+1 for i in range(f,l+1)), l-f)" "$1" "$2"
}
check_window() { # FILE STEP OUTSIDE WHAT
	"$chk" "$1" --clean --count "kernel:step_kernel=$2" --count "kernel:outside_kernel=$3" \
		>"$tmp/chk.log" 2>&1 || { cat "$tmp/chk.log"; bad "$4: $1"; return; }
	say "ok $4: $(basename "$1"): $2 step kernels, $3 outside kernels"
}

# 1. range:step#3,2 -> ranges 3 and 4.
"$ct" record --capture-range 'range:step#3,2' -o "$tmp/nv-%n.pftrace" -- "$ww" nvtx 12 \
	>"$tmp/nv.log" 2>&1 || bad "range record (exit $?)"
set -- $(expect_nvtx 3 4)
check_window "$tmp/nv-1.pftrace" "$1" "$2" "range:step#3,2"
[ ! -e "$tmp/nv-2.pftrace" ] || bad "range without repeat wrote a second window"
"$chk" "$tmp/nv-1.pftrace" --count nvtx:step=2 --meta capture_window >/dev/null 2>&1 ||
	{ "$chk" "$tmp/nv-1.pftrace" --count nvtx:step=2 --meta capture_window; bad "the opening range is not in the window's file"; }

# 2. Every 4th from the 2nd, 2 ranges each: windows 2-3, 6-7, 10-11 of 12.
"$ct" record --capture-range 'range:step#2,2' --capture-repeat 4 -o "$tmp/rep-%n.pftrace" -- \
	"$ww" nvtx 12 >"$tmp/rep.log" 2>&1 || bad "repeat record"
n=1
for first in 2 6 10; do
	set -- $(expect_nvtx $first $((first + 1)))
	check_window "$tmp/rep-$n.pftrace" "$1" "$2" "repeat window $n"
	n=$((n + 1))
done
[ ! -e "$tmp/rep-4.pftrace" ] || bad "repeat wrote a 4th window"

# 3. Every range, all in one file (no %n): each window marked; the outside kernels are out.
"$ct" record --capture-range 'range:step' --capture-repeat all -o "$tmp/all.pftrace" -- \
	"$ww" nvtx 6 >"$tmp/all.log" 2>&1 || bad "repeat all record"
set -- $(expect_nvtx 1 6)
check_window "$tmp/all.pftrace" "$1" 0 "repeat all, one file"
for k in 1 2 3 4 5 6; do
	"$chk" "$tmp/all.pftrace" --meta capture_window_$k >/dev/null 2>&1 || bad "no capture_window_$k"
done
grep -q "capture windows (range:step#1,1, again every 1): 6" "$tmp/all.log" ||
	{ grep cuptrace "$tmp/all.log"; bad "the summary does not list 6 windows"; }

# 4. cudaProfilerStart/Stop around iterations 3..5 and 8..9.
"$ct" record --capture-range cuda-profiler-api --capture-repeat all -o "$tmp/prof-%n.pftrace" \
	-- "$ww" profiler 12 >"$tmp/prof.log" 2>&1 || bad "profiler record"
set -- $(expect_nvtx 3 5)
check_window "$tmp/prof-1.pftrace" "$1" "$2" "cudaProfilerStart/Stop window 1"
set -- $(expect_nvtx 8 9)
check_window "$tmp/prof-2.pftrace" "$1" "$2" "cudaProfilerStart/Stop window 2"

# 4b. Steps that are NVTX ranges (--step-range): steps 3 and 4 are ranges 3 and 4, from the
# end of step 2 (so iteration 2's outside kernel is in) to the end of step 4 (4's is out).
"$ct" record --steps 3,2 --step-range step -o "$tmp/sr.pftrace" -- "$ww" nvtx 12 \
	>"$tmp/sr.log" 2>&1 || bad "step-range record"
set -- $(expect_nvtx 3 4)
check_window "$tmp/sr.pftrace" "$1" "$(($2 + 1))" "--steps 3,2 --step-range step"

# 5. --steps on PyTorch (optimizer.step()) against the same steps as NVTX ranges.
if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
	"$ct" record --steps 5,3 -o "$tmp/steps.pftrace" -- python3 "$src/tests/window_torch.py" \
		--steps 12 --mark >"$tmp/steps.log" 2>&1 || bad "--steps record"
	"$ct" record --capture-range 'range:teststep#5,3' -o "$tmp/rng.pftrace" -- \
		python3 "$src/tests/window_torch.py" --steps 12 --mark >"$tmp/rng.log" 2>&1 ||
		bad "range record (torch)"
	ks=$("$ct" stats --json "$tmp/steps.pftrace" | python3 -c "import json,sys; print(sum(c['slices'] for c in json.load(sys.stdin)['categories'] if c['category']=='kernel'))" 2>/dev/null)
	kr=$("$ct" stats --json "$tmp/rng.pftrace" | python3 -c "import json,sys; print(sum(c['slices'] for c in json.load(sys.stdin)['categories'] if c['category']=='kernel'))" 2>/dev/null)
	say "--steps 5,3: $ks kernels; range:teststep#5,3: $kr kernels"
	[ -n "$ks" ] && [ "$ks" = "$kr" ] && [ "$ks" -gt 0 ] || bad "--steps and the range window differ"
	"$chk" "$tmp/steps.pftrace" --clean --count nvtx:teststep=3 >"$tmp/chk.log" 2>&1 ||
		{ cat "$tmp/chk.log"; bad "--steps window: not 3 teststep ranges"; }
else
	say "SKIP --steps: no PyTorch with CUDA"
fi

# 6. On demand: a trigger on a running loop writes a window of about its duration.
"$ct" record --on-demand -o "$tmp/od-%n.pftrace" -- "$ww" spin 8 >"$tmp/od.log" 2>&1 &
rec=$!
sleep 3
pid=$(pgrep -n -x window_work)
"$ct" trigger --duration 1s "$pid" >"$tmp/trig.out" 2>"$tmp/trig.err" || { cat "$tmp/trig.err"; bad "trigger exit"; }
f=$(head -1 "$tmp/trig.out")
say "trigger printed: $f"
[ "$f" = "$tmp/od-1.pftrace" ] || bad "trigger printed '$f'"
# A step every ~20 ms plus its launch and sync: 25 to 60 steps in a second.
"$chk" "$f" --clean --at-least kernel:step_kernel=25 >"$tmp/chk.log" 2>&1 || { cat "$tmp/chk.log"; bad "triggered window"; }
n=$("$ct" stats --json "$f" 2>/dev/null | python3 -c "import json,sys; print(sum(c['slices'] for c in json.load(sys.stdin)['categories'] if c['category']=='kernel'))")
say "triggered window: $n kernels"
[ "${n:-0}" -le 60 ] || bad "triggered window holds $n kernels for 1 s"
# The same through --job, then nothing open: --stop says so.
"$ct" trigger --job "$rec" --duration 500ms >"$tmp/trig2.out" 2>&1 || bad "trigger --job"
grep -q "od-2.pftrace" "$tmp/trig2.out" || { cat "$tmp/trig2.out"; bad "trigger --job printed no file"; }
"$ct" trigger --stop "$pid" >/dev/null 2>&1 && bad "--stop with no window open succeeded"
wait "$rec" || bad "on-demand record exit"

span_check() { # FILE MAX_SECONDS WHAT: every kernel within MAX_SECONDS of the last one
	"$ct" convert "$1" -o "$tmp/span.json" >/dev/null 2>&1 || { bad "$3: convert"; return; }
	python3 - "$tmp/span.json" "$2" "$3" <<'PY' || fail=1
import json, sys
ev = json.load(open(sys.argv[1]))
ev = ev["traceEvents"] if isinstance(ev, dict) else ev
k = [e for e in ev if e.get("cat") == "kernel"]
if not k:
    print("FAIL: %s: no kernels" % sys.argv[3]); sys.exit(1)
span = (max(e["ts"] for e in k) - min(e["ts"] for e in k)) / 1e6
print("%s: %d kernels over %.3f s" % (sys.argv[3], len(k), span))
if span > float(sys.argv[2]):
    print("FAIL: %s: %.3f s of kernels, more than %s s" % (sys.argv[3], span, sys.argv[2])); sys.exit(1)
PY
}

# 6b. --delay 300ms --duration 500ms on a loop of ~20 ms steps: half a second of kernels.
"$ct" record --delay 300ms --duration 500ms -o "$tmp/time.pftrace" -- "$ww" spin 2 \
	>"$tmp/time.log" 2>&1 || bad "time window record"
"$chk" "$tmp/time.pftrace" --clean --at-least kernel:step_kernel=10 >"$tmp/chk.log" 2>&1 ||
	{ cat "$tmp/chk.log"; bad "time window"; }
span_check "$tmp/time.pftrace" 0.55 "--delay 300ms --duration 500ms"

# 7. Flight recorder and a crash: the last 2 s written, then the program dies of SIGSEGV.
"$ct" record --ring 2s -o "$tmp/segv.pftrace" -- "$ww" segv 5 >"$tmp/segv.log" 2>&1
st=$?
say "ring + SIGSEGV: exit $st (want 139)"
[ "$st" = 139 ] || { cat "$tmp/segv.log"; bad "SIGSEGV exit status"; }
grep -q "crashed: the last" "$tmp/segv.log" || bad "no crash line"
"$chk" "$tmp/segv.pftrace" --clean --allow-unlinked 2 --at-least kernel=50 >"$tmp/chk.log" 2>&1 ||
	{ cat "$tmp/chk.log"; bad "crash trace"; }
span_check "$tmp/segv.pftrace" 2.3 "ring + SIGSEGV"

# 7b. The other crashes the flight recorder handles: each dies of its own signal, trace kept.
for sig in bus:135 abrt:134 fpe:136; do
	m=${sig%%:*}
	want=${sig#*:}
	"$ct" record --ring 2s -o "$tmp/$m.pftrace" -- "$ww" "$m" 3 >"$tmp/$m.log" 2>&1
	st=$?
	say "ring + $m: exit $st (want $want)"
	[ "$st" = "$want" ] || { cat "$tmp/$m.log"; bad "$m exit status"; }
	grep -q "crashed: the last" "$tmp/$m.log" || bad "$m: no crash line"
	"$chk" "$tmp/$m.pftrace" --clean --allow-unlinked 2 --at-least kernel=50 \
		>"$tmp/chk.log" 2>&1 || { cat "$tmp/chk.log"; bad "$m crash trace"; }
	span_check "$tmp/$m.pftrace" 2.3 "ring + $m"
done

# 8. Flight recorder and SIGTERM.
"$ct" record --ring 2s -o "$tmp/term.pftrace" -- "$ww" term >"$tmp/term.log" 2>&1 &
rec=$!
sleep 5
kill -TERM "$(pgrep -n -x window_work)"
wait "$rec"
st=$?
say "ring + SIGTERM: exit $st (want 143)"
[ "$st" = 143 ] || bad "SIGTERM exit status"
"$chk" "$tmp/term.pftrace" --clean --allow-unlinked 2 --at-least kernel=50 >"$tmp/chk.log" 2>&1 ||
	{ cat "$tmp/chk.log"; bad "SIGTERM trace"; }
span_check "$tmp/term.pftrace" 2.3 "ring + SIGTERM"

# 9. Slow steps: 30 steps of ~10 ms, the 20th ~60 ms: only it and the step before are written.
"$ct" record --ring 5s --ring-slow 3 --step-range step -o "$tmp/slow-%n.pftrace" -- \
	"$ww" slow 30 20 >"$tmp/slow.log" 2>&1 || bad "ring-slow record"
ls "$tmp"/slow-*.pftrace 2>/dev/null
[ -e "$tmp/slow-1.pftrace" ] && [ ! -e "$tmp/slow-2.pftrace" ] || bad "ring-slow: want exactly one file"
"$chk" "$tmp/slow-1.pftrace" --clean --count kernel:spin_kernel=2 --count nvtx:step=2 >"$tmp/chk.log" 2>&1 ||
	{ cat "$tmp/chk.log"; bad "slow step file"; }

# 10. torchrun, two ranks, --job: one file per rank.
if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null && command -v torchrun >/dev/null; then
	"$ct" record --on-demand -o "$tmp/job-r%r-%n.pftrace" -- torchrun --nproc-per-node 2 \
		"$src/tests/window_torch.py" --spin 25 >"$tmp/job.log" 2>&1 &
	rec=$!
	k=0
	while [ "$(grep -c ready "$tmp/job.log")" -lt 2 ] && [ $k -lt 60 ]; do
		sleep 1
		k=$((k + 1))
	done
	"$ct" trigger --job "$rec" --duration 1s >"$tmp/job.out" 2>"$tmp/job.err" || { cat "$tmp/job.err"; bad "trigger --job torchrun"; }
	cat "$tmp/job.out"
	[ "$(grep -c pftrace "$tmp/job.out")" = 2 ] || bad "trigger --job: want 2 files"
	for r in 0 1; do
		"$chk" "$tmp/job-r$r-1.pftrace" --clean --at-least kernel=10 >"$tmp/chk.log" 2>&1 ||
			{ cat "$tmp/chk.log"; bad "rank $r window"; }
	done
	kill -TERM "$rec" 2>/dev/null
	wait "$rec" 2>/dev/null
else
	say "SKIP torchrun: no PyTorch with CUDA or no torchrun"
fi

# 11. The flight recorder written on trigger, from a running loop and from a process stuck in a
# sync (a hang): the file comes back while the program goes on (or stays stuck).
"$ct" record --ring 3s -o "$tmp/ringt-%n.pftrace" -- "$ww" spin 7 >"$tmp/ringt.log" 2>&1 &
rec=$!
sleep 4
"$ct" trigger --dump "$(pgrep -n -x window_work)" >"$tmp/ringt.out" 2>&1 || { cat "$tmp/ringt.out"; bad "trigger --dump"; }
f=$(grep pftrace "$tmp/ringt.out" | head -1)
say "trigger --dump printed: $f"
[ -n "$f" ] && span_check "$f" 3.3 "ring, trigger --dump"
wait "$rec" || bad "ring record exit"
[ -e "$tmp/ringt-2.pftrace" ] || bad "ring: no dump at the end of the run"
"$ct" record --ring 3s -o "$tmp/hang-%n.pftrace" -- "$ww" hang 12 >"$tmp/hang.log" 2>&1 &
rec=$!
k=0
while ! grep -q hanging "$tmp/hang.log" && [ $k -lt 30 ]; do sleep 1; k=$((k + 1)); done
sleep 1
s0=$(date +%s)
"$ct" trigger --timeout 20s "$(pgrep -n -x window_work)" >"$tmp/hang.out" 2>&1 || { cat "$tmp/hang.out"; bad "trigger on a hung process"; }
say "hung process: trigger answered in $(( $(date +%s) - s0 )) s: $(cat "$tmp/hang.out")"
f=$(grep pftrace "$tmp/hang.out" | head -1)
[ -n "$f" ] && "$chk" "$f" --at-least kernel:step_kernel=20 >"$tmp/chk.log" 2>&1 || { cat "$tmp/chk.log"; bad "hang dump"; }
kill -TERM "$(pgrep -n -x window_work)" 2>/dev/null
wait "$rec" 2>/dev/null

# 12. The C API in a session with windows: cuptrace_start()/cuptrace_stop() are windows.
capi=${CUPTRACE_BUILD_DIR:-$(dirname "$ct")}/tests/window_capi
if env -u CUDA_INJECTION64_PATH CUPTRACE_ON_DEMAND=1 CUPTRACE_OUTPUT="$tmp/capi-%n.pftrace" \
	"$capi" >"$tmp/capi.log" 2>&1; then
	"$chk" "$tmp/capi-1.pftrace" --clean --count kernel:inside_kernel=3 --count kernel:between_kernel=0 >"$tmp/chk.log" 2>&1 &&
		"$chk" "$tmp/capi-2.pftrace" --clean --count kernel:inside_kernel=4 --count kernel:between_kernel=0 >>"$tmp/chk.log" 2>&1 &&
		say "ok C API windows: capi-1 3 kernels, capi-2 4 kernels" || { cat "$tmp/chk.log"; bad "C API windows"; }
else
	cat "$tmp/capi.log"; bad "window_capi"
fi

# 13. CUDA graphs in repeated windows (the kinds go off and on between windows, where CUPTI's
# graph records must keep their correlation ids): graph_replay 10 2000 with each replay in a
# range "replay" (after 200 warm-up replays outside any range); ranges 100-109, 600-609,
# 1100-1109 and 1600-1609 are windows: 10 replays of 10 kernels each, every one with its arrow.
gr=${CUPTRACE_BUILD_DIR:-$(dirname "$ct")}/examples/graph_replay
"$ct" record --capture-range 'range:replay#100,10' --capture-repeat 500 -o "$tmp/gw-%n.pftrace" \
	-- "$gr" 10 2000 5 nvtx >"$tmp/gw.log" 2>&1 || { cat "$tmp/gw.log"; bad "graph windows record"; }
for n in 1 2 3 4; do
	"$chk" "$tmp/gw-$n.pftrace" --clean --count kernel:scale=100 --count nvtx:replay=10 \
		>"$tmp/chk.log" 2>&1 && say "ok graph window $n: 100 kernels, 10 ranges, all linked" ||
		{ cat "$tmp/chk.log"; bad "graph window $n"; }
done
[ ! -e "$tmp/gw-5.pftrace" ] || bad "graph windows: a 5th window"

# 14. The same with --cuda-graphs graph. CUPTI 13.0 crashed the program (SIGSEGV in
# cuGraphLaunch) when its whole-graph records were switched on as a window opened after the
# graphs were made; cuptrace records such windows node by node instead and says so. The program
# must finish, and each window hold its 100 kernels.
"$ct" record --cuda-graphs graph --capture-range 'range:replay#100,10' --capture-repeat 500 \
	-o "$tmp/gg-%n.pftrace" -- "$gr" 10 2000 5 nvtx >"$tmp/gg.log" 2>&1 &&
	grep -q "cuda-graphs graph is not used with capture windows" "$tmp/gg.log" ||
	{ cat "$tmp/gg.log"; bad "graph windows with --cuda-graphs graph: record"; }
for n in 1 2 3 4; do
	"$chk" "$tmp/gg-$n.pftrace" --clean --count kernel:scale=100 --count graph=0 \
		>"$tmp/chk.log" 2>&1 && say "ok --cuda-graphs graph window $n: 100 kernels node by node" ||
		{ cat "$tmp/chk.log"; bad "--cuda-graphs graph window $n"; }
done

# 15. The flight recorder keeps its kinds on from the start, so --cuda-graphs graph works there:
# graph_replay 10 2000 (about 0.2 s of replays) fits the 5 s ring whole, each launch one slice.
"$ct" record --ring 5s --cuda-graphs graph -o "$tmp/rg.pftrace" -- "$gr" 10 2000 5 >"$tmp/rg.log" 2>&1 ||
	{ cat "$tmp/rg.log"; bad "ring with --cuda-graphs graph: record"; }
rgl=$(($(sed -n 's/.*"kernels_launched": \([0-9]*\).*/\1/p' "$tmp/rg.log") / 10))
! grep -q "cuda-graphs graph is not used" "$tmp/rg.log" &&
	"$chk" "$tmp/rg.pftrace" --clean --count graph="$rgl" --count kernel=0 >"$tmp/chk.log" 2>&1 &&
	say "ok ring with --cuda-graphs graph: $rgl launches, each one slice" ||
	{ cat "$tmp/rg.log" "$tmp/chk.log"; bad "ring with --cuda-graphs graph"; }

# 16. Graphs launched from the GPU under a time window, with --cupti-early (CUPTI subscribed from
# the start): without it CUPTI 13.0, first subscribed when the window opens, made the program's
# device launches fail ("unspecified launch failure", H200). The program must run its 500,000
# kernels, the window hold launcher kernels (and none of the launched graphs': CUPTI records
# none node by node), and the summary count the graph made for launch from the GPU.
dg=${CUPTRACE_BUILD_DIR:-$(dirname "$ct")}/examples/device_graph
"$ct" record --cupti-early --delay 100ms --duration 50ms -o "$tmp/dgw-%n.pftrace" -- "$dg" 4 100000 \
	>"$tmp/dgw.log" 2>&1 && grep -q "kernels ran 500000" "$tmp/dgw.log" &&
	grep -q "1 CUDA graphs were instantiated for launch from the GPU" "$tmp/dgw.log" &&
	"$chk" "$tmp/dgw-1.pftrace" --clean --count kernel:work=0 >"$tmp/chk.log" 2>&1 &&
	"$ct" stats "$tmp/dgw-1.pftrace" | grep -E "^launcher" >"$tmp/dgw.stats" &&
	say "ok device graphs in a time window with --cupti-early: $(cat "$tmp/dgw.stats" | cut -c1-60)" ||
	{ cat "$tmp/dgw.log" "$tmp/chk.log"; bad "device graphs in a time window with --cupti-early"; }

# 17. Window files are written aside and renamed into place as each window is written
# (output/recfile.h): over older files of their names, the window written replaces its file and
# a name no window took keeps its older file byte for byte; and no run above left a partial file.
printf 'an older trace' >"$tmp/older"
cp "$tmp/older" "$tmp/ov-1.pftrace"
cp "$tmp/older" "$tmp/ov-2.pftrace"
"$ct" record --capture-range 'range:step#3,2' -o "$tmp/ov-%n.pftrace" -- "$ww" nvtx 12 \
	>"$tmp/ov.log" 2>&1 || bad "windows over older files: record (exit $?)"
set -- $(expect_nvtx 3 4)
check_window "$tmp/ov-1.pftrace" "$1" "$2" "window over an older file"
cmp -s "$tmp/ov-2.pftrace" "$tmp/older" || bad "a name no window took lost its older file"
left=$(ls -a "$tmp" | grep '\.partial$')
[ -z "$left" ] && say "ok no partial file left by any run" || bad "partial files left: $left"

[ $fail = 0 ] && echo "gpu_window: all passed" || echo "gpu_window: FAILED"
exit $fail
