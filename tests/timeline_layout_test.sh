#!/bin/sh
# The timeline as ui.perfetto.dev draws it (src/format/TIMELINE.md), on the captures of
# tests/data and a 2-rank merge: check_trace --layout reads the written .pftrace's descriptors
# and events (no event on a process's own track, no process_labels, no descriptor without
# events, at most one CUPTI overhead track name per process) and --view where the UI opens
# (checked against tests/view_check.py's computation from the capture).
# What the overhead option changes is counted here from the outputs (track names, the "tid"
# args of the Chrome JSON), not taken from the converter.
set -u
ct=$CUPTRACE_BIN
ck=$CHECK_TRACE
data=$CUPTRACE_TEST_DATA
src=${CUPTRACE_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
if ! command -v python3 >/dev/null 2>&1; then
	echo "SKIP: python3 not found"
	exit 77
fi
tmp=$(mktemp -d "${CUPTRACE_TMP:-/tmp}/timeline.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail=0

run() { # what, command...: runs it, says FAIL with its output if it fails
	what=$1
	shift
	if ! "$@" >"$tmp/out" 2>&1; then
		echo "FAIL: $what"
		cat "$tmp/out"
		fail=1
		return 1
	fi
	grep -E "layout|view start" "$tmp/out" | sed "s|^|$what: |"
	return 0
}

for f in ddp2_rank0 ddp2_rank1 torch_train multi_stream nvtx vector_add graphs memory c_api \
	driver_api steps_long multi_gpu_2gpu peer_copy stacks_native; do
	run "convert $f" "$ct" convert "$data/$f.cupti" -o "$tmp/$f.pftrace" || continue
	# One trace opens where its GPU work begins, if start-up took over a fifth of it
	# (TIMELINE.md): where, computed from the capture's records by view_check.py; the
	# trace's end as cuptrace's reader sees it.
	run "$f.pftrace" "$ck" "$tmp/$f.pftrace" --clean --layout --view any || continue
	end=$(sed -n 's/.*view start: .* end \(-*[0-9][0-9]*\) ns.*/\1/p' "$tmp/out")
	if python3 "$src/tests/view_check.py" "$data/$f.cupti" "$tmp/$f.pftrace" "${end:-0}" \
		>"$tmp/vc" 2>&1; then
		echo "$f.pftrace: view start $(head -1 "$tmp/vc" | sed 's/^expect //')"
	else
		echo "FAIL: $f.pftrace: view start"
		cat "$tmp/vc"
		fail=1
	fi
	run "convert $f json" "$ct" convert "$data/$f.cupti" -o "$tmp/$f.json" &&
		run "$f.json" "$ck" "$tmp/$f.json" --layout
done

# --overhead-tracks thread: the per-thread tracks are back, with the same records, and the
# default's one track names each record's thread in its "tid" arg: the same threads.
for f in ddp2_rank0 torch_train multi_stream; do
	run "convert $f thread" "$ct" convert --overhead-tracks thread "$data/$f.cupti" \
		-o "$tmp/$f.thread.json" || continue
	python3 - "$tmp/$f.json" "$tmp/$f.thread.json" "$f" <<'PY' || fail=1
import json, re, sys
def load(p):
    d = json.load(open(p))
    return d["traceEvents"] if isinstance(d, dict) else d
one, per = load(sys.argv[1]), load(sys.argv[2])
name = sys.argv[3]
def tracks(ev):  # (pid, tid) -> thread_name
    return {(e["pid"], e["tid"]): e["args"]["name"] for e in ev
            if e.get("ph") == "M" and e.get("name") == "thread_name"}
def ovh(ev):
    return sorted((e["ts"], e["dur"], e["name"]) for e in ev if e.get("cat") == "cupti_overhead")
t1, t2 = tracks(one), tracks(per)
names1 = {t1[(e["pid"], e["tid"])] for e in one if e.get("cat") == "cupti_overhead"}
names2 = {t2[(e["pid"], e["tid"])] for e in per if e.get("cat") == "cupti_overhead"}
ok = True
if names1 != {"CUPTI overhead"}:
    print("FAIL: %s: overhead tracks by default: %s" % (name, sorted(names1))); ok = False
tids_by_name = set()
for n in names2:
    m = re.match(r"CUPTI overhead: .* \((\d+)\)$", n)
    if m:
        tids_by_name.add(int(m.group(1)))
if len(names2) < 2 or not tids_by_name:
    print("FAIL: %s: --overhead-tracks thread gave %s" % (name, sorted(names2))); ok = False
if ovh(one) != ovh(per):
    print("FAIL: %s: %d overhead records by default, %d per thread" % (name, len(ovh(one)), len(ovh(per)))); ok = False
tids_by_arg = {e["args"]["tid"] for e in one
               if e.get("cat") == "cupti_overhead" and "tid" in e.get("args", {})}
if tids_by_arg != tids_by_name:
    print("FAIL: %s: threads in tid args %s, in per-thread track names %s" % (name, sorted(tids_by_arg), sorted(tids_by_name))); ok = False
print("%s: %d overhead records; 1 track by default, %d per thread (threads %s)" % (name, len(ovh(one)), len(names2), sorted(tids_by_name)))
sys.exit(0 if ok else 1)
PY
done

# A 2-rank merge: the same layout, and the UI opens just before the first kernel (7.1 s into
# 8.2 s: what came before is start-up), not on the whole span.
if run "merge ranks" "$ct" merge --ranks "$tmp/ddp2_rank0.pftrace" "$tmp/ddp2_rank1.pftrace" \
	-o "$tmp/ranks.pftrace"; then
	run "ranks.pftrace" "$ck" "$tmp/ranks.pftrace" --clean --layout --view first-kernel
	# Each rank's own trace info stays readable where analyze looks for it (its first thread):
	# both ranks are named in analyze's step table.
	"$ct" analyze "$tmp/ranks.pftrace" >"$tmp/an" 2>&1 || { echo "FAIL: analyze"; fail=1; }
	for r in 0 1; do
		grep -q "^rank $r @" "$tmp/an" || { echo "FAIL: analyze names no rank $r"; fail=1; }
	done
	# Written again (convert keeps the metadata), the view start is kept.
	run "convert ranks" "$ct" convert "$tmp/ranks.pftrace" -o "$tmp/ranks2.pftrace" &&
		run "ranks2.pftrace" "$ck" "$tmp/ranks2.pftrace" --clean --layout --view first-kernel
fi
if run "merge side by side" "$ct" merge --side-by-side "$tmp/torch_train.pftrace" \
	"$tmp/multi_stream.pftrace" -o "$tmp/sbs.pftrace"; then
	run "sbs.pftrace" "$ck" "$tmp/sbs.pftrace" --clean --layout
fi
# The check can fail: per-thread overhead tracks are more than one per process.
if run "convert thread pftrace" "$ct" convert --overhead-tracks thread \
	"$data/ddp2_rank0.cupti" -o "$tmp/thread.pftrace"; then
	if "$ck" "$tmp/thread.pftrace" --layout >"$tmp/out" 2>&1; then
		echo "FAIL: --layout passed a trace with an overhead track per thread"
		fail=1
	fi
fi
[ $fail = 0 ] && echo "timeline layout: ok"
exit $fail
