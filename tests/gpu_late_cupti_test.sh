#!/bin/sh
# GPU test: what CUPTI 13.0 started in the middle of a run does to launches made by the GPU
# (tests/late_cupti.cu, no cuptrace), and what that means for capture windows, which start
# CUPTI when the first one opens (README "Tracing part of a run", Limits). Graphs instantiated
# for device launch before CUPTI started fail to launch from the GPU afterwards, whatever CUPTI
# was asked to do; kernels launched from kernels and conditional nodes do not care. If a CUPTI
# release stops breaking them, this test fails so that the README and --cupti-early's default
# get another look.
set -u
# shellcheck source=tests/gpu_common.sh
gpu_test=late
. "$(dirname "$0")/gpu_common.sh"
lc=${CUPTRACE_BUILD_DIR:-$(dirname "$ct")}/tests/late_cupti
dg=${CUPTRACE_BUILD_DIR:-$(dirname "$ct")}/examples/device_graph
fail=0
bad() {
	echo "FAIL: $*"
	fail=1
}
# runs WORK WHEN CALLS: the program must finish with every kernel run
runs() {
	out=$(timeout 120 "$lc" "$@" 2>&1)
	case $out in
	ok*) echo "ok $*: $out" ;;
	*) bad "$*: $out" ;;
	esac
}
# fails WORK WHEN CALLS: CUPTI 13.0 makes a launch fail after the late start
fails() {
	out=$(timeout 120 "$lc" "$@" 2>&1)
	st=$?
	case $out in
	*"failed at replay"*"launch failure"*)
		r=$(echo "$out" | sed -n 's/.*failed at replay \([0-9]*\).*/\1/p')
		if [ "$r" -ge 10000 ]; then
			echo "ok $*: fails as CUPTI 13.0 does ($out)"
		else
			bad "$*: failed before CUPTI started: $out"
		fi
		;;
	*) bad "$*: exit $st, expected CUPTI 13.0's launch failure after replay 10000: $out" ;;
	esac
}
runs graph never version
runs graph late version # starts nothing
runs graph early subscribe
fails graph late subscribe
fails graph late unsubscribe
fails graph late buffers
runs cdp late subscribe
runs cdp late kernels
runs while late subscribe
runs while late kernels
# Kernel records after an early start: 5 kernels a replay, the 4 launched from the GPU included
# or not (node by node CUPTI reports the launcher's only); at least the launchers' 20,000.
out=$("$lc" graph early kernels 2>&1)
recs=$(echo "$out" | sed -n 's/.*ran of [0-9]*, \([0-9]*\) CUPTI records.*/\1/p')
[ "${recs:-0}" -ge 20000 ] && echo "ok early start records: $recs" ||
	bad "early start recorded ${recs:-no} records: $out"

# What CUPTI records after an early start: a kernel launched from a kernel, not at all (the
# parents only); a WHILE body, every iteration (1 + 3 kernels a replay).
out=$("$lc" cdp early kernels 1000 2>&1)
echo "$out" | grep -q "2000 kernels ran of 2000, 1000 CUPTI records" &&
	echo "ok dynamic parallelism, early start: $out" ||
	bad "dynamic parallelism, early start: expected 1000 records (the parents): $out"
out=$("$lc" while early kernels 1000 2>&1)
echo "$out" | grep -q "4000 kernels ran of 4000, 4000 CUPTI records" &&
	echo "ok WHILE node, early start: $out" ||
	bad "WHILE node, early start: expected 4000 records: $out"

# The same through cuptrace: a time window opening after device_graph made its graphs fails
# the program by default (CUPTI starts then), and --cupti-early (gpu_window_test case 16)
# does not.
"$ct" record --delay 100ms --duration 50ms -o "$tmp/dg.pftrace" -- "$dg" 4 100000 >"$tmp/dg.log" 2>&1
st=$?
if [ $st != 0 ] && grep -q "unspecified launch failure" "$tmp/dg.log"; then
	echo "ok default time window over device_graph: exit $st, launch failure (documented)"
else
	bad "default time window over device_graph: exit $st, expected CUPTI 13.0's launch failure"
	cat "$tmp/dg.log"
fi
rm -rf "$tmp"
[ $fail = 0 ] && echo "gpu_late_cupti: all passed" || echo "gpu_late_cupti: FAILED"
exit $fail
