#!/bin/sh
# `cuptrace share` end to end, no GPU needed. A real capture (torch_train) given a known host
# name, home paths, a secret-looking argument, a URL, a boot id and a GPU UUID in its metadata,
# and the user's name in its thread names (tests/capture_edit.py), shared from every input format
# into .pftrace and .json.gz: none of those strings is anywhere in the decompressed bytes of the
# output (tests/trace_bytes.py), while they are in a plain conversion; slices, instants, counter
# values, flows and tracks equal the input's; OUT.md is `stats --markdown` of the output.
# --redact-names: equal tokens for equal names across two runs with one salt (and diff pairs
# them), other tokens with another salt, no original kernel name left. --window: the exact
# counts an independent reading of the JSON gives, no dangling flow. --max-size: under the size,
# and it loads. Perfetto's trace_processor loads the outputs where ../shared has it. Bad options
# exit 2, bad input 1, with one line.
set -u
ct=$CUPTRACE_BIN
src=${CUPTRACE_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
data=$CUPTRACE_TEST_DATA
tp=${TRACE_PROCESSOR_SHELL:-$src/../shared/tools/trace_processor_shell}
if ! command -v python3 >/dev/null 2>&1; then
	echo "SKIP: python3 not found (needed to edit captures and read outputs)"
	exit 77
fi
tmp=$(mktemp -d "${CUPTRACE_TMP:-/tmp}/share.XXXXXX")
. "$src/tests/script_lib.sh"
have_tp=0
[ -x "$tp" ] && have_tp=1 || echo "SKIP (part): $tp not found: outputs not loaded in trace_processor"
bytes() { python3 "$src/tests/trace_bytes.py" "$1"; }

# What must not survive, one a line (grep -F -i -f).
cat >"$tmp/secrets" <<'EOF'
secrethost
corp.example
alice
sk-SECRET
9f8e7d
0c6f1b6c
deadbeef
/home/
2026-11-21
EOF
python3 "$src/tests/capture_edit.py" "$data/torch_train.cupti" "$tmp/secret.cupti" \
	--meta hostname=secrethost-42.corp.example \
	--meta "cmdline=/home/alice/venv/bin/python /home/alice/proj/train.py --api-token=sk-SECRET-9f8e7d --url https://internal.corp.example/x" \
	--meta "record_cmdline=cuptrace record -o /home/alice/runs/r1.pftrace -- python train.py --api-token=sk-SECRET-9f8e7d" \
	--meta boot_id=0c6f1b6c-1111-2222-3333-444455556666 \
	--meta gpu0_uuid=GPU-deadbeef-0000-1111-2222-333344445555 \
	--meta data_dir=/home/alice/datasets/imagenet \
	--thread-prefix alice- || { echo "FAIL: capture_edit.py"; exit 1; }
"$ct" convert "$tmp/secret.cupti" -o "$tmp/secret.pftrace" &&
	"$ct" convert "$tmp/secret.cupti" -o "$tmp/secret.json.gz" || { echo "FAIL: convert"; exit 1; }
# The control: a plain conversion holds every secret (so the checks below can fail).
for f in secret.pftrace secret.json.gz; do
	bytes "$tmp/$f" >"$tmp/plain.bytes" || bad "trace_bytes.py $f"
	while read -r w; do
		grep -a -q -i -F -- "$w" "$tmp/plain.bytes" && ok || bad "control: '$w' not in $f"
	done <"$tmp/secrets"
done

# "slices instants counter_values flows_complete flows_one_end tracks" of a trace.
counts() {
	"$ct" stats --json "$1" | python3 -c '
import json, sys
j = json.load(sys.stdin)
e = j["events"]
print(e["slices"], e["instants"], e["counter_values"], j["flows"]["complete"],
      j["flows"]["one_end_only"], e["tracks"])'
}
want=$(counts "$tmp/secret.cupti")
# 11 tracks: CUPTI's overhead of its three threads is one track (two lanes), src/format/TIMELINE.md
[ "$want" = "676 21 18 183 0 11" ] && ok || bad "torch_train holds $want"

# Every input format into both output formats.
for in in secret.cupti secret.pftrace secret.json.gz; do
	for ext in pftrace json.gz; do
		out="$tmp/shared-${in%%.*}-${in#*.}.$ext"
		if ! "$ct" share "$tmp/$in" -o "$out" 2>"$tmp/err"; then
			bad "share $in -> $ext"
			cat "$tmp/err"
			continue
		fi
		bytes "$out" >"$tmp/out.bytes" || bad "trace_bytes.py $out"
		if grep -a -i -F -f "$tmp/secrets" "$tmp/out.bytes" >"$tmp/leak"; then
			bad "$in -> $ext leaks: $(grep -a -o -i -F -f "$tmp/secrets" "$tmp/out.bytes" | sort -u | tr '\n' ' ')"
		else
			ok
		fi
		got=$(counts "$out")
		[ "$got" = "$want" ] && ok || bad "$in -> $ext holds $got, input $want"
		# The report names what went.
		for line in "hostname: removed" "boot_id: removed" "gpu0_uuid: removed" \
			"cmdline: 4 arguments removed (program \"python\" kept)" \
			"record_cmdline: 7 arguments removed (program \"cuptrace\" kept)" \
			"start time: removed" "user names: replaced in" "wrote $out"; do
			grep -q -F "cuptrace share: $line" "$tmp/err" && ok || { bad "$in -> $ext: no '$line' on stderr"; cat "$tmp/err"; }
		done
		# OUT.md is the summary of what was written.
		"$ct" stats --markdown "$out" >"$tmp/want.md"
		cmp -s "$out.md" "$tmp/want.md" && ok || bad "$out.md is not stats --markdown of $out"
		grep -q "Host:\*\* not recorded" "$out.md" && grep -q 'Command line:\*\* `python`' "$out.md" &&
			ok || bad "$out.md: host or command line not as removed"
		if [ $have_tp = 1 ]; then
			set -- $want
			python3 "$src/tests/tp_check.py" --tp "$tp" "$out" --slices "$1" --instants $(($2 + 2)) \
				--counters "$3" --flows "$4" --process python3 >"$tmp/tp.out" && ok ||
				{ bad "trace_processor on $out"; cat "$tmp/tp.out"; }
		fi
	done
done

# A shared copy shared again: nothing left to remove, and it says so by saying nothing.
"$ct" share "$tmp/shared-secret-cupti.json.gz" -o "$tmp/again.pftrace" 2>"$tmp/err" &&
	! grep -q "removed\|replaced\|reduced" "$tmp/err" && ok || { bad "sharing a shared copy again changed:"; cat "$tmp/err"; }
[ "$(counts "$tmp/again.pftrace")" = "$want" ] && ok || bad "sharing again lost events"

# --keep-time keeps the start; the default removes it (no Start line in the summary).
"$ct" share "$tmp/secret.cupti" -o "$tmp/kt.pftrace" --keep-time 2>"$tmp/err" && ok || bad "--keep-time"
grep -q "Start:\*\* 2026-11-21" "$tmp/kt.pftrace.md" && ok || bad "--keep-time lost the start"
grep -q "Start:" "$tmp/shared-secret-cupti.pftrace.md" && bad "the start time was kept" || ok
grep -q "start time" "$tmp/err" && bad "--keep-time still reports the start time removed" || ok

# --redact-names: two runs of one program, one salt: the names they share get equal tokens.
names() { # trace category: the names of its slices of that category, sorted, unique
	"$ct" convert "$1" -o "$tmp/names.json" 2>/dev/null &&
		python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
print("\n".join(sorted({e["name"] for e in d if e.get("ph") == "X" and e.get("cat") == sys.argv[2]})))' \
			"$tmp/names.json" "$2"
}
for run in base changed; do
	for salt in A B; do
		"$ct" share --redact-names --salt "$salt" "$data/steps_$run.cupti" \
			-o "$tmp/r-$run-$salt.pftrace" 2>"$tmp/err" || { bad "share --redact-names $run"; cat "$tmp/err"; }
	done
	grep -q "cuptrace share: names: [1-9][0-9]* replaced by tokens (salt from --salt)" "$tmp/err" &&
		ok || { bad "no names line for $run"; cat "$tmp/err"; }
done
names "$tmp/r-base-A.pftrace" kernel >"$tmp/kA1"
names "$tmp/r-changed-A.pftrace" kernel >"$tmp/kA2"
names "$tmp/r-base-B.pftrace" kernel >"$tmp/kB1"
names "$data/steps_base.cupti" kernel >"$tmp/k0"
n0=$(wc -l <"$tmp/k0")
[ "$n0" -ge 3 ] && [ "$(wc -l <"$tmp/kA1")" = "$n0" ] && ok || bad "kernel names: $n0 in, $(wc -l <"$tmp/kA1") out"
grep -q -v '^kernel_[0-9a-f]\{12\}$' "$tmp/kA1" && bad "kernel names not tokens: $(head -3 "$tmp/kA1")" || ok
common=$(comm -12 "$tmp/kA1" "$tmp/kA2" | wc -l)
[ "$common" -ge 3 ] && ok || bad "one salt: only $common kernel tokens common to both runs"
[ "$(comm -12 "$tmp/kA1" "$tmp/kB1" | wc -l)" = 0 ] && ok || bad "salts A and B gave equal tokens"
bytes "$tmp/r-base-A.pftrace" >"$tmp/r.bytes"
while read -r k; do
	grep -a -q -F -- "$k" "$tmp/r.bytes" && bad "kernel name '$k' left in the redacted trace"
done <"$tmp/k0"
ok
# API names are public vocabulary and stay; diff pairs the two redacted runs by token.
names "$tmp/r-base-A.pftrace" cuda_runtime >"$tmp/api"
grep -q '^cudaLaunchKernel$' "$tmp/api" && ok || bad "API names redacted"
"$ct" diff "$tmp/r-base-A.pftrace" "$tmp/r-changed-A.pftrace" >"$tmp/diff.out" 2>&1 || true
paired=$(grep -c 'kernel_[0-9a-f]\{12\}' "$tmp/diff.out")
[ "$paired" -ge 3 ] && ok || { bad "diff of redacted runs shows $paired kernel tokens"; head -30 "$tmp/diff.out"; }

# --window: counts as an independent reading of the JSON says (slices that overlap, instants
# and counter values inside, each counter's last value before; flows with both ends kept).
expect_window() { # json from to -> "slices instants counters flows"
	python3 - "$@" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
lo, hi = int(sys.argv[2]), int(sys.argv[3])
ns = lambda us: round(us * 1000)
sl = ins = 0
before, inside, ends, last = {}, 0, {}, None
for e in d:
    ph = e.get("ph")
    if ph == "X":
        ts, dur = ns(e["ts"]), ns(e.get("dur", 0))
        last = ts <= hi and ts + dur >= lo
        sl += last
    elif ph in ("s", "f"):
        ends.setdefault(e["id"], []).append(last)
    elif ph in ("i", "I") and e.get("cat") != "cuptrace":
        ins += lo <= ns(e["ts"]) <= hi
    elif ph == "C":
        ts, key = ns(e["ts"]), (e["pid"], e["name"])
        if ts < lo:
            before[key] = max(before.get(key, ts), ts)
        inside += lo <= ts <= hi
for e in d:
    if e.get("ph") == "C" and before.get((e["pid"], e["name"])) == ns(e["ts"]):
        inside += 1
print(sl, ins, inside, sum(all(v) for v in ends.values()))
EOF
}
kept() { # stderr of share -> "slices instants counters flows"
	sed -n 's/^cuptrace share: kept \([0-9]*\) of [0-9]* slices, \([0-9]*\) of [0-9]* instants, \([0-9]*\) of [0-9]* counter values, \([0-9]*\) of [0-9]* flows$/\1 \2 \3 \4/p' "$1"
}
window_range() { # json name k -> "from to" in ns
	python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
r = sorted((round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000)) for e in d
           if e.get("ph") == "X" and e["name"] == sys.argv[2])[int(sys.argv[3]) - 1]
print(*r)' "$@"
}
"$ct" convert "$tmp/secret.cupti" -o "$tmp/all.json"
check_window() { # label from to share-args...
	label=$1 from=$2 to=$3
	shift 3
	want_w=$(expect_window "$tmp/all.json" "$from" "$to")
	"$ct" share "$tmp/secret.cupti" -o "$tmp/w.pftrace" "$@" 2>"$tmp/err" || { bad "share $*"; cat "$tmp/err"; return; }
	got_w=$(kept "$tmp/err")
	[ "$got_w" = "$want_w" ] && ok || bad "$label: kept $got_w, expected $want_w"
	# What the file holds: the same, with no flow left with one end.
	set -- $want_w $(counts "$tmp/w.pftrace")
	[ "$1 $2 $3 $4 0" = "$5 $6 $7 $8 $9" ] && ok || bad "$label: file holds $5 $6 $7 $8 $9, expected $1 $2 $3 $4 0"
	[ "$(shift 9; echo "$1")" = 11 ] && ok || bad "$label: tracks lost"
	bytes "$tmp/w.pftrace" | grep -a -i -F -f "$tmp/secrets" >/dev/null && bad "$label leaks" || ok
}
set -- $(window_range "$tmp/all.json" "step 1" 1)
check_window "step 1#1" "$1" "$2" --window "step 1#1"
check_window "1s:3.64s" 1000000000 3640000000 --window 1s:3.64s
check_window ":250ms" 0 250000000 --window :250ms
set -- $(window_range "$tmp/all.json" "step 0" 1) $(window_range "$tmp/all.json" "step 2" 1)
check_window "step 0#1:step 2#1" "$1" "$4" --window "step 0#1:step 2#1"
grep -q "cuptrace share: window: " "$tmp/err" && ok || bad "the window is not reported"

# --max-size: under the size, the busiest window, and it loads.
for spec in "100k 100000 pftrace" "60k 60000 json.gz"; do
	set -- $spec
	out="$tmp/max.$3"
	"$ct" share "$data/torch_stack.kineto.json.gz" -o "$out" --max-size "$1" 2>"$tmp/err" ||
		{ bad "--max-size $1"; cat "$tmp/err"; continue; }
	size=$(wc -c <"$out")
	[ "$size" -le "$2" ] && [ "$size" -ge $(($2 / 2)) ] && ok || bad "--max-size $1 wrote $size bytes"
	grep -q "the busiest that fits" "$tmp/err" && ok || { bad "--max-size $1: window not reported"; cat "$tmp/err"; }
	set -- $(counts "$out")
	[ "$5" = 0 ] && [ "$1" -gt 100 ] && ok || bad "--max-size: $* in the output"
	[ -e "$tmp/.partial-max.$3" ] && bad "--max-size left its candidate file" || ok
	if [ $have_tp = 1 ]; then
		python3 "$src/tests/tp_check.py" --tp "$tp" "$out" --slices "$1" --flows "$4" >"$tmp/tp.out" &&
			ok || { bad "trace_processor on $out"; cat "$tmp/tp.out"; }
	fi
done
"$ct" share "$data/vector_add.cupti" -o "$tmp/fits.pftrace" --max-size 25M 2>"$tmp/err" &&
	grep -q "window: the whole trace fits" "$tmp/err" && ok || bad "--max-size 25M of a small trace"
[ "$(counts "$tmp/fits.pftrace")" = "$(counts "$data/vector_add.cupti")" ] && ok || bad "a trace that fits lost events"

# A merged trace of ranks (merge --ranks): each rank's host is in its label, in metadata keys
# ("rank 2 @ node1: hostname") and in process names; none may survive.
if [ -x "${RANKS_TRACE:-}" ]; then
	for r in 0 1; do "$RANKS_TRACE" "$tmp/rk-$r.pftrace" --rank $r || bad "ranks_trace"; done
	"$ct" merge --ranks "$tmp"/rk-[01].pftrace -o "$tmp/rk.pftrace" 2>/dev/null || bad "merge --ranks"
	bytes "$tmp/rk.pftrace" | grep -q node1 || bad "the merged ranks trace holds no host name to remove"
	"$ct" share "$tmp/rk.pftrace" -o "$tmp/rk-shared.pftrace" 2>"$tmp/err" && ok || { bad "share of merged ranks"; cat "$tmp/err"; }
	bytes "$tmp/rk-shared.pftrace" | grep -q "node[01]" && bad "a rank's host survives share" || ok
	[ "$(counts "$tmp/rk-shared.pftrace")" = "$(counts "$tmp/rk.pftrace")" ] && ok || bad "share of merged ranks changed the counts"
fi

# Bad options and input.
expect 2 "needs -o OUTPUT" "$ct" share "$tmp/secret.cupti"
expect 2 "unrecognized option" "$ct" share --bogus "$tmp/secret.cupti" -o "$tmp/x.pftrace"
expect 2 "bad value for --window" "$ct" share "$tmp/secret.cupti" -o "$tmp/x.pftrace" --window 5parsecs
expect 2 "bad value for --window" "$ct" share "$tmp/secret.cupti" -o "$tmp/x.pftrace" --window "step#0"
expect 2 "ends before it starts" "$ct" share "$tmp/secret.cupti" -o "$tmp/x.pftrace" --window 2s:1s
expect 2 "bad value for --max-size" "$ct" share "$tmp/secret.cupti" -o "$tmp/x.pftrace" --max-size 10X
expect 2 "--salt needs --redact-names" "$ct" share "$tmp/secret.cupti" -o "$tmp/x.pftrace" --salt s
expect 2 "is also an input" "$ct" share "$tmp/secret.pftrace" -o "$tmp/secret.pftrace"
expect 1 "no range #9 named 'step 1'" "$ct" share "$tmp/secret.cupti" -o "$tmp/x.pftrace" --window "step 1#9"
expect 1 "cannot read" "$ct" share /nonexistent.cupti -o "$tmp/x.pftrace"
expect 1 "cannot write" "$ct" share "$tmp/secret.cupti" -o /nonexistent-dir/x.pftrace
expect 1 "no window of" "$ct" share "$tmp/secret.cupti" -o "$tmp/x.pftrace" --max-size 100
head -c 5000 /dev/urandom >"$tmp/garbage.bin"
expect 1 "cannot read" "$ct" share "$tmp/garbage.bin" -o "$tmp/x.pftrace"
[ -e "$tmp/x.pftrace" ] && bad "a failed share left its output" || ok

echo "$n checks, $([ $fail = 0 ] && echo all passed || echo FAILED)"
[ $fail = 0 ] && rm -rf "$tmp"
exit $fail
