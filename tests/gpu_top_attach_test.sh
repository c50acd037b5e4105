#!/bin/sh
# GPU test of cuptrace top attached to a `record --on-demand` process (src/top/README.md,
# Attaching): launch_storm 1 45 runs under record --on-demand, printing its launches/s every
# second (LAUNCH_STORM_RATE_S=1). After 5 s untraced, `top --json --iterations 6 PID` attaches
# (6: the converter draws GPU work about 3 s of trace time late, as in gpu_top_test.sh). Asserted: some interval shows kernels/s > 0; top leaves with the program running; right after,
# the process's control socket answers a status request with no window open and no watch (the
# window closed when top hung up); the capture top tailed (DIR/pPID.w1.cupti) is complete
# (stats reads it) and holds kernels. Then `top --job RECORD_PID --iterations 6` attaches again
# (a second watch, found through record's descendants), with kernels/s > 0. The program then
# runs to its end and exits 0 (record's status), and record's summary lists the two windows,
# each closed by "cuptrace top left". Printed, not asserted (timing on a shared machine): the
# program's launch rate before the first watch, while watched, and after it (the idle cost is
# the rate before and after; the watched rate is the tracing cost). Skips without a GPU.
set -u
gpu_test=gpu_top_attach
. "$(dirname "$0")/gpu_common.sh"
fail=0
if ! command -v python3 >/dev/null 2>&1; then
	echo "SKIP: python3 not found (needed to parse the JSON)"
	exit 77
fi
mkdir -m 700 "$tmp/xdg"
export XDG_RUNTIME_DIR=$tmp/xdg
export TMPDIR=$tmp
LAUNCH_STORM_RATE_S=1 "$ct" record --on-demand -o "$tmp/od.pftrace" -- "$ex/launch_storm" 1 40 \
	>"$tmp/rec.out" 2>"$tmp/rec.err" &
rpid=$!
# The program's socket comes with its first CUDA call.
i=0
sock=
while [ $i -lt 600 ] && [ -z "$sock" ]; do
	sock=$(ls "$tmp/xdg/cuptrace/j$rpid".p*.sock 2>/dev/null | head -n 1)
	sleep 0.1
	i=$((i + 1))
done
if [ -z "$sock" ]; then
	echo "FAIL: no control socket j$rpid.p*.sock appeared"; cat "$tmp/rec.err"; kill $rpid; exit 1
fi
pid=$(basename "$sock" | sed 's/^j[0-9]*\.p\([0-9]*\)\.sock$/\1/')
rates() { grep -c "launch_storm: rate" "$tmp/rec.err"; }
sleep 5
before=$(rates)
timeout 60 "$ct" top --json --interval 1 --iterations 6 "$pid" >"$tmp/a.jsonl" 2>"$tmp/a.err"
rc=$?
during=$(rates)
cat "$tmp/a.err"
[ $rc = 0 ] || { echo "FAIL: top PID exited $rc"; fail=1; }
# The window closed at the hang-up: the socket says so (a status request, as trigger sends).
python3 - "$sock" >"$tmp/status" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
s.sendall(b"status\n")
out = b""
while True:
    b = s.recv(4096)
    if not b:
        break
    out += b
print(out.decode().strip())
PY
cat "$tmp/status"
if grep -q "^pid $pid: .*1 windows so far$" "$tmp/status"; then
	echo "ok: after top left, window 1 is closed and no watch is held"
else
	echo "FAIL: status after top left: $(cat "$tmp/status")"; fail=1
fi
# Untraced again for 5 s (the rates after); the closed window's capture is finished meanwhile
# (after the 500 ms drain).
sleep 5
after=$(rates)
dir=$(sed -n 's/.*their captures: \(.*\)$/\1/p' "$tmp/a.err")
kern=$("$ct" stats --json "$dir/p$pid.w1.cupti" 2>"$tmp/st.err" | python3 -c '
import json, sys
print(sum(n["count"] for n in json.load(sys.stdin)["names"] if n["category"] == "kernel"))')
if [ -n "$kern" ] && [ "$kern" -gt 0 ]; then
	echo "ok: the watch's capture $dir/p$pid.w1.cupti is complete: $kern kernels"
else
	echo "FAIL: the watch's capture: ${kern:-unreadable}"; cat "$tmp/st.err"; ls -la "$dir"; fail=1
fi
timeout 60 "$ct" top --json --interval 1 --iterations 6 --job "$rpid" >"$tmp/j.jsonl" 2>"$tmp/j.err"
rc=$?
cat "$tmp/j.err"
[ $rc = 0 ] || { echo "FAIL: top --job exited $rc"; fail=1; }
for f in a j; do
	python3 - "$tmp/$f.jsonl" "$f" <<'PY' || fail=1
import json, sys
objs = [json.loads(l) for l in open(sys.argv[1])]
kps = [o["kernels_per_s"] for o in objs]
print(f"top ({'PID' if sys.argv[2] == 'a' else '--job'}): kernels/s per interval {kps}")
if not any(k > 0 for k in kps):
    print("FAIL: kernels/s never above 0")
    sys.exit(1)
PY
done
wait $rpid
rc=$?
[ $rc = 0 ] || { echo "FAIL: record (the program) exited $rc"; fail=1; }
n=$(grep -c "(cuptrace top; cuptrace top left)" "$tmp/rec.err")
if [ "$n" = 2 ]; then
	echo "ok: record's summary: two windows, each closed when top left"
else
	echo "FAIL: record's summary has $n windows closed by top (want 2):"; grep "window" "$tmp/rec.err"; fail=1
fi
# The launch rates (per second of the first thread) before, while and after the first watch.
python3 - "$tmp/rec.err" "$before" "$during" "$after" <<'PY'
import re, sys
r = [float(m.group(1)) for m in re.finditer(r"launch_storm: rate [0-9.]+ s ([0-9.]+) launches/s", open(sys.argv[1]).read())]
b, d, a = (int(x) for x in sys.argv[2:5])
def avg(x):
    return f"{sum(x) / len(x):.0f}/s over {len(x)} s" if x else "none"
# The second before a watch starts and after it ends is mixed: left out.
print(f"launch rate: before the watch {avg(r[1:b - 1])}; watched {avg(r[b + 1:d - 1])}; "
      f"after it {avg(r[d + 1:a - 1])}")
PY
rm -rf "$tmp"
[ $fail = 0 ] && echo "gpu_top_attach: passed"
exit $fail
