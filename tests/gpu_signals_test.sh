#!/bin/sh
# GPU test: a traced program stopped by SIGTERM/SIGINT finishes its trace and still dies of
# the signal; one killed by SIGKILL leaves a .pftrace that loads up to its last chunk. Each
# replaces an older trace of its name: the library writes a partial file beside it and renames
# it at the finish; after a SIGKILL, `record` renames what the program wrote (output/recfile.h),
# and a flight recorder killed before it wrote anything leaves the older trace as it was.
set -u
# shellcheck source=tests/gpu_common.sh
gpu_test=sig
. "$(dirname "$0")/gpu_common.sh"
# Job control on: a non-interactive shell otherwise starts background jobs with SIGINT ignored.
set -m
fail=0
partials() { ls -a "$tmp" | grep '\.partial$'; }
printf 'an older trace' >"$tmp/older"
for sig in TERM INT KILL; do
	cp "$tmp/older" "$tmp/$sig.pftrace"
	# CUPTRACE_LOG=info: the finish's phases and the converter's correlation counts, in the log
	CUPTRACE_LOG=info timeout 90 "$ct" record -o "$tmp/$sig.pftrace" -- "$ex/multi_stream" 2 100000000 >"$tmp/$sig.log" 2>&1 &
	rec=$!
	sleep 4
	# The traced program is the tool's child.
	victim=$(pgrep -n -x multi_stream)
	kill -s "$sig" "$victim"
	wait "$rec"
	st=$?
	case $sig in TERM) want=143 ;; INT) want=130 ;; KILL) want=137 ;; esac
	echo "SIG$sig: exit status $st (want $want)"
	[ "$st" = "$want" ] || { echo "FAIL: SIG$sig exit status"; fail=1; }
	f=$(ls "$tmp"/$sig.pftrace 2>/dev/null)
	if [ -z "$f" ]; then
		echo "FAIL: SIG$sig left no trace"; fail=1; continue
	fi
	cmp -s "$f" "$tmp/older" && { echo "FAIL: SIG$sig: the older trace is still there"; fail=1; }
	[ -z "$(partials)" ] || { echo "FAIL: SIG$sig: partial files left: $(partials)"; fail=1; }
	if [ "$sig" = KILL ]; then
		# Cut short: whatever was flushed (once a second) loads, with kernels in it; record
		# put it in place and said so.
		grep "did not finish its trace" "$tmp/$sig.log"
		grep -q "did not finish its trace (killed, or crashed): $tmp/KILL.pftrace holds it as far as it was written" "$tmp/$sig.log" ||
			{ echo "FAIL: SIGKILL: record did not say it put the cut trace in place"; fail=1; }
		"$chk" "$f" --at-least kernel=1000 || { echo "FAIL: SIGKILL trace"; fail=1; }
	else
		grep -q "trace written" "$tmp/$sig.log" || { echo "FAIL: no summary after SIG$sig"; fail=1; }
		# The launching threads run on while the trace is finished: the last launch of each
		# may have its kernel recorded but not its API call. And while the finish turns
		# CUPTI's kinds off under them, CUPTI now and then stamps a few kernels with the id
		# of a later launch (H100: 3 kernels with one id, over 96 us before that launch
		# began, in 1 of 14 and 1 of 36 finishes): the converter leaves such work unlinked
		# and counts it (tests/test_convert.c test_gpu_before_its_call checks the rule).
		grep "correlation:" "$tmp/$sig.log"
		# (one traced process, so one such line; the last one counts if there were more)
		early=$(sed -n 's/.* \([0-9][0-9]*\) over before their call began.*/\1/p' "$tmp/$sig.log" |
			tail -n 1)
		if [ -z "$early" ]; then
			echo "FAIL: SIG$sig: no correlation counts in the log"; fail=1; early=0
		fi
		if ! "$chk" "$f" --clean --allow-unlinked $((2 + early)) --at-least kernel=1000; then
			# What the next look needs (once seen in 2 of 6 runs on an H200, SIGINT,
			# 2,395 unlinked, cause not found): the summary and the converter's own counts.
			echo "FAIL: SIG$sig trace"; fail=1
			cat "$tmp/$sig.log"
			"$ct" stats "$f" | grep -E "without_api|dropped|unlinked|no_timestamp|flows"
		fi
	fi
done
# Chrome JSON killed with SIGKILL: '[' then whole events, one per line; only the last line may
# be cut. That is the form trace_processor loads without the closing bracket.
timeout 90 "$ct" record -o "$tmp/kill.json" -- "$ex/multi_stream" 2 100000000 >"$tmp/json.log" 2>&1 &
sleep 4
kill -s KILL "$(pgrep -n -x multi_stream)"
wait
if python3 - "$tmp/kill.json" <<'PY'
import json, sys
lines = open(sys.argv[1], encoding="utf-8").read().split("\n")
assert lines[0].startswith("[{"), lines[0][:20]
lines[0] = lines[0][1:]
whole = 0
for i, l in enumerate(lines):
    l = l.lstrip(",")
    try:
        json.loads(l)
        whole += 1
    except ValueError:
        assert i >= len(lines) - 2, f"line {i + 1} of {len(lines)} is not a whole event"
kernels = sum(1 for l in lines if '"cat":"kernel"' in l)
print(f"killed JSON: {whole} whole events, {kernels} kernels")
assert kernels > 1000
PY
then echo "ok SIGKILL json"; else echo "FAIL: SIGKILL json"; fail=1; fi
[ -z "$(partials)" ] || { echo "FAIL: SIGKILL json: partial files left: $(partials)"; fail=1; }
# The flight recorder killed by SIGKILL before it wrote anything (it writes at exit, on
# SIGINT/SIGTERM, a crash or a trigger): its partial file holds no event, so the older trace
# (a real one, converted from tests/data) stays byte for byte and record says why.
ww=$(dirname "$chk")/window_work
"$ct" convert "${CUPTRACE_TEST_DATA:-$(dirname "$0")/data}/vector_add.cupti" -o "$tmp/keep.pftrace" 2>/dev/null
cp "$tmp/keep.pftrace" "$tmp/ring.pftrace"
timeout 90 "$ct" record --ring 2s -o "$tmp/ring.pftrace" -- "$ww" spin 60 >"$tmp/ring.log" 2>&1 &
rec=$!
k=0
while ! grep -q ready "$tmp/ring.log" && [ $k -lt 60 ]; do sleep 1; k=$((k + 1)); done
sleep 3
kill -s KILL "$(pgrep -n -x window_work)"
wait "$rec"
st=$?
if [ "$st" = 137 ] && cmp -s "$tmp/ring.pftrace" "$tmp/keep.pftrace" && [ -z "$(partials)" ] &&
	grep -q "ended before its trace recorded anything (killed, or crashed): $tmp/ring.pftrace, from before, is kept as it was" "$tmp/ring.log"; then
	echo "ok ring + SIGKILL: the older trace kept: $(grep "from before" "$tmp/ring.log")"
else
	echo "FAIL: ring + SIGKILL (exit $st)"; cat "$tmp/ring.log"; ls -la "$tmp"; fail=1
fi
rm -rf "$tmp"
exit $fail
