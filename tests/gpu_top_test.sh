#!/bin/sh
# GPU test of cuptrace top: `top --iterations 8 --json -- launch_storm 1 14` watches a program
# that launches kernels back to back for 14 s (the converter releases GPU work up to 3 s of
# trace time late: 8 intervals leave room for it). Asserts: some interval shows kernels/s > 0 and a
# GPU busy above 0; every kernel name top shows is one that `record` of the same program
# records (stats --json of that trace); top quits after its 8 intervals while the program goes
# on (the message names the record pid), the program then finishes on its own, and the capture
# top left has exactly as many kernels as the program says it launched (its own count, on
# stderr in the run's output.log). The --json intervals carry idle by cause (five keys, none
# negative) and the tracer's CPU (top_cpu_pct a number from the second interval on, and the
# process's cuptrace-* threads: tracer_threads >= 1). The t key, in a tmux pane (a terminal:
# skipped without tmux): pressed 4 s into `top --t-duration 2s -- launch_storm 1 14`, it writes
# a trace whose kernels all overlap the span the status line names, and are exactly the
# kernels of the program's complete capture (read after it ended) that overlap that span.
# Skips without a GPU.
set -u
gpu_test=gpu_top
. "$(dirname "$0")/gpu_common.sh"
fail=0
if ! command -v python3 >/dev/null 2>&1; then
	echo "SKIP: python3 not found (needed to parse the JSON)"
	exit 77
fi
# The names a plain record of the program has.
if ! timeout 120 "$ct" record -o "$tmp/ref.pftrace" -- "$ex/launch_storm" 1 2 >"$tmp/rec.log" 2>&1 ||
	! "$ct" stats --json "$tmp/ref.pftrace" >"$tmp/ref.json"; then
	echo "FAIL: record of launch_storm"; cat "$tmp/rec.log"; exit 1
fi
timeout 120 "$ct" top --iterations 8 --json -- "$ex/launch_storm" 1 14 >"$tmp/top.jsonl" 2>"$tmp/top.err"
rc=$?
cat "$tmp/top.err"
[ $rc = 0 ] || { echo "FAIL: top exited $rc"; fail=1; }
python3 - "$tmp/top.jsonl" "$tmp/ref.json" <<'PY' || fail=1
import json, sys
objs = [json.loads(l) for l in open(sys.argv[1])]
ref = {n["name"] for n in json.load(open(sys.argv[2]))["names"] if n["category"] == "kernel"}
bad = []
if len(objs) != 8:
    bad.append(f"{len(objs)} intervals, want 8")
kps = [o["kernels_per_s"] for o in objs]
if not any(k > 0 for k in kps):
    bad.append(f"kernels/s never above 0: {kps}")
busy = [g["busy_pct"] for o in objs for g in o["gpus"]]
if not any(b > 0 for b in busy):
    bad.append(f"GPU busy never above 0: {busy}")
names = {k["name"] for o in objs for k in o["kernels"]}
if not names or not names <= ref:
    bad.append(f"kernel names {sorted(names)} not among record's {sorted(ref)}")
for o in objs:
    for g in o["gpus"]:
        c = g["idle_by_cause_ns"]
        if sorted(c) != sorted(["host_wait", "launch_latency", "other_stream", "host_sync", "other"]) \
                or min(c.values()) < 0:
            bad.append(f"idle_by_cause_ns {c}")
cpu = [o["top_cpu_pct"] for o in objs]
if any(c is None for c in cpu[1:]):
    bad.append(f"top_cpu_pct {cpu}")
thr = [p["tracer_threads"] for o in objs for p in o["procs"] if not p["ended"]]
if not thr or max(thr) < 1:
    bad.append(f"no cuptrace-* thread seen in the program: {thr}")
tcpu = [p["tracer_cpu_pct"] for o in objs for p in o["procs"]]
idle = [g["idle_by_cause_total_ns"] for g in objs[-1]["gpus"]] if objs else []
print(f"top: kernels/s per interval {kps}, busy % {busy}, names {sorted(names)}")
print(f"top: tracer CPU % {tcpu}, top CPU % {cpu}, idle by cause since start {idle}")
for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)
PY
# top left the program running: wait for `record` to finish, then count the capture.
rpid=$(sed -n 's/.*goes on (record pid \([0-9]*\)).*/\1/p' "$tmp/top.err")
dir=$(sed -n 's/.*its captures: \([^,]*\), its output.*/\1/p' "$tmp/top.err")
if [ -z "$rpid" ] || [ -z "$dir" ]; then
	echo "FAIL: top did not say that the program goes on, or where its capture is"
	fail=1
else
	i=0
	while kill -0 "$rpid" 2>/dev/null && [ $i -lt 600 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	launched=$(sed -n 's/.*launch_storm: \([0-9]*\) kernels launched.*/\1/p' "$dir/output.log")
	got=$("$ct" stats --json "$dir/top.cupti" 2>/dev/null | python3 -c '
import json, sys
print(sum(n["count"] for n in json.load(sys.stdin)["names"] if n["category"] == "kernel"))')
	if [ -n "$launched" ] && [ "$got" = "$launched" ]; then
		echo "ok: the program went on after top quit; its capture holds all $got kernels"
	else
		echo "FAIL: capture $dir/top.cupti has ${got:-?} kernels, the program launched ${launched:-?}"
		cat "$dir/output.log"
		fail=1
	fi
	rm -rf "$dir"
fi
# The t key, in a terminal (tmux).
if ! command -v tmux >/dev/null 2>&1; then
	echo "SKIP (part): tmux not installed: the t key is not checked"
else
	sock=$tmp/tmux
	tmux -S "$sock" new-session -d -x 100 -y 30 \
		"cd '$tmp' && TMPDIR='$tmp' '$ct' top --t-duration 2s -- '$ex/launch_storm' 1 14 2>'$tmp/t.err'; sleep 60"
	i=0
	pressed=0
	while [ $i -lt 600 ]; do
		tmux -S "$sock" capture-pane -p >"$tmp/pane" 2>/dev/null
		if [ $pressed = 0 ] && awk '/cuptrace top  t / {v = $4; sub("s", "", v); f = v + 0 >= 4} END {exit !f}' "$tmp/pane"; then
			tmux -S "$sock" send-keys t
			pressed=1
		fi
		grep -q "t: wrote\|t: writing .* failed" "$tmp/pane" && break
		sleep 0.1
		i=$((i + 1))
	done
	tmux -S "$sock" send-keys q
	sleep 1
	tmux -S "$sock" kill-server 2>/dev/null
	cat "$tmp/pane"
	shot=$(sed -n 's/.*t: wrote \([^ ]*\) (\([0-9.]*\) s to \([0-9.]*\) s).*/\1 \2 \3/p' "$tmp/pane")
	rpid=$(sed -n 's/.*goes on (record pid \([0-9]*\)).*/\1/p' "$tmp/t.err")
	dir=$(sed -n 's/.*its captures: \([^,]*\), its output.*/\1/p' "$tmp/t.err")
	i=0
	while [ -n "$rpid" ] && kill -0 "$rpid" 2>/dev/null && [ $i -lt 600 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	set -- $shot
	if [ $# != 3 ] || [ -z "$dir" ] || ! "$ct" convert "$tmp/$1" -o "$tmp/shot.json" ||
		! "$ct" convert "$dir/top.cupti" -o "$tmp/whole.json"; then
		echo "FAIL: t wrote no readable trace, or the capture is missing"; cat "$tmp/t.err"; fail=1
	else
		python3 - "$tmp/shot.json" "$tmp/whole.json" "$2" "$3" <<'PY' || fail=1
import json, sys
def kernels(p):
    d = json.load(open(p))
    ev = d["traceEvents"] if isinstance(d, dict) else d
    return sorted((e["ts"], e.get("dur", 0), e["name"]) for e in ev
                  if e.get("ph") == "X" and e.get("cat") == "kernel")
got, whole = kernels(sys.argv[1]), kernels(sys.argv[2])
t0, t1 = float(sys.argv[3]) * 1e6, float(sys.argv[4]) * 1e6
want = [k for k in whole if k[0] < t1 and k[0] + k[1] > t0]
out = [k for k in got if not (k[0] < t1 and k[0] + k[1] > t0)]
print(f"t: {len(got)} kernels in the trace, span {t0:.0f}..{t1:.0f} us ({(t1 - t0) / 1e6:.3f} s); "
      f"the whole capture has {len(want)} there of {len(whole)}; outside the span: {len(out)}")
ok = want and not out and got == want
print("ok: t's trace holds exactly the span's kernels" if ok else "FAIL: t's trace")
sys.exit(0 if ok else 1)
PY
	fi
	[ -n "$dir" ] && rm -rf "$dir"
fi
rm -rf "$tmp"
[ $fail = 0 ] && echo "gpu_top: passed"
exit $fail
