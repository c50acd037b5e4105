#!/bin/sh
# No user data is lost, nothing is silently misread (issue 41):
#  - an output that is an input (same path, symbolic link, hard link) is refused by every command
#    that writes one, before anything is opened, and the input stays byte for byte;
#  - a write that fails half way (a file-size limit, as a full disk would) leaves the old file;
#  - output names: the format comes from -f or the extension, unknown extensions are refused,
#    '-' is standard output for writers and standard input for readers, or refused clearly;
#  - every trace of tests/data cut at every 5% of its length, and with a flipped byte in the
#    middle, is read up to the damage with one warning naming the file and the byte (the
#    packets kept counted independently by tests/damage_check.py), or refused non-zero when
#    nothing is readable; never a crash (this runs under ASan and UBSan in tools/scripts/test.sh);
#  - analyze and diff of a trace with no GPU work say so;
#  - record never destroys the trace it replaces: a command that fails before CUDA starts leaves
#    it byte for byte, and `record` puts in place what a process killed mid-run left in its
#    partial file (output/recfile.h; here a fake child leaves one as the library does, then dies
#    of SIGKILL) only where that holds events (gpu_record_test.sh does it with real programs).
set -u
ct=$CUPTRACE_BIN
data=$CUPTRACE_TEST_DATA
src=$(dirname "$0")
tmp=$(mktemp -d "${CUPTRACE_TMP:-/tmp}/nothing_lost.XXXXXX")
. "$src/script_lib.sh"

# ---- 1. an output is never an input
"$ct" convert "$data/steps_base.cupti" -o "$tmp/in.pftrace" || bad "convert steps_base"
"$ct" convert "$data/steps_changed.cupti" -o "$tmp/other.pftrace" || bad "convert steps_changed"
cp "$tmp/in.pftrace" "$tmp/keep.pftrace"
ln -s in.pftrace "$tmp/link.pftrace"
ln "$tmp/in.pftrace" "$tmp/hard.pftrace"
for o in in link hard; do
	out="$tmp/$o.pftrace"
	expect 2 "nothing was written" "$ct" convert "$tmp/in.pftrace" -o "$out"
	expect 2 "nothing was written" "$ct" symbolize "$tmp/in.pftrace" -o "$out"
	expect 2 "nothing was written" "$ct" analyze "$tmp/in.pftrace" --annotate "$out"
	expect 2 "nothing was written" "$ct" merge --side-by-side "$tmp/in.pftrace" "$tmp/other.pftrace" -o "$out"
	expect 2 "nothing was written" "$ct" share "$tmp/in.pftrace" -o "$out"
	cmp -s "$tmp/in.pftrace" "$tmp/keep.pftrace" || bad "$o: the input changed"
done
[ -L "$tmp/link.pftrace" ] || bad "the symbolic link was replaced"

# ---- 2. a failed write leaves what was there; a good one goes through a link
cp "$tmp/other.pftrace" "$tmp/old.pftrace"
# Writes past 8 KiB fail with EFBIG (SIGXFSZ ignored), as on a full disk.
(
	trap '' XFSZ
	ulimit -f 16
	"$ct" convert "$data/gm_h100.cupti" -o "$tmp/old.pftrace"
) >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc = 1 ] || bad "convert past the file-size limit: exit $rc, want 1"
grep -q "nothing was written" "$tmp/err" || { bad "no 'nothing was written'"; cat "$tmp/err"; }
cmp -s "$tmp/old.pftrace" "$tmp/other.pftrace" || bad "a failed convert changed the old file"
ls -a "$tmp" | grep -q "cuptrace-" && bad "a temporary file was left: $(ls -a "$tmp")"
ln -s old.pftrace "$tmp/to_old.pftrace"
"$ct" convert "$tmp/in.pftrace" -o "$tmp/to_old.pftrace" 2>"$tmp/err" || bad "convert through a link"
[ -L "$tmp/to_old.pftrace" ] || bad "writing through a symbolic link replaced the link"
cmp -s "$tmp/old.pftrace" "$tmp/in.pftrace" && bad "the link's target should hold the new trace"
"$ct" stats "$tmp/old.pftrace" >/dev/null || bad "the link's target does not read back"
ok

# ---- 3. names mean what they say
expect 2 "unknown extension" "$ct" convert "$tmp/in.pftrace" -o "$tmp/out.xyz"
expect 2 "cannot write that format here" "$ct" convert "$tmp/in.pftrace" -o "$tmp/x.cupti"
expect 2 "cannot write the format 'capture'" "$ct" convert "$tmp/in.pftrace" -f capture -o "$tmp/x.pftrace"
expect 2 "unknown format 'bogus'" "$ct" convert "$tmp/in.pftrace" -f bogus -o "$tmp/x.pftrace"
expect 2 "named like another format" "$ct" convert "$tmp/in.pftrace" -f chrome -o "$tmp/x.pftrace"
[ -e "$tmp/out.xyz" ] || [ -e "$tmp/x.cupti" ] || [ -e "$tmp/x.pftrace" ] && bad "a refused output was written"
[ -e "$tmp/-" ] && bad "a file named '-' was written"
"$ct" convert "$tmp/in.pftrace" -f perfetto -o "$tmp/out.xyz" 2>"$tmp/err" || bad "-f perfetto -o out.xyz"
# '-' both ways: a Perfetto stream through a pipe, and JSON to standard output
"$ct" convert "$tmp/in.pftrace" -o - | "$ct" stats --json - >"$tmp/pipe.json" || bad "convert -o - | stats -"
"$ct" stats --json "$tmp/in.pftrace" >"$tmp/file.json"
python3 - "$tmp/pipe.json" "$tmp/file.json" <<'PY' || bad "stats of the pipe differs from stats of the file"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
assert a["events"] == b["events"], (a["events"], b["events"])
PY
"$ct" convert "$tmp/in.pftrace" -f chrome -o - | python3 -c "import json,sys; d=json.load(sys.stdin); assert d" ||
	bad "convert -f chrome -o - is not JSON"
cat "$data/steps_base.cupti" | "$ct" stats - >"$tmp/out" 2>"$tmp/err" && grep -q "step" "$tmp/out" || bad "stats - of a capture"
expect 2 "cannot be used here" "$ct" merge --side-by-side - "$tmp/other.pftrace" -o "$tmp/m.pftrace"
expect 2 "needs a file" "$ct" share "$tmp/in.pftrace" -o -
expect 2 "needs a file named" "$ct" merge --side-by-side "$tmp/in.pftrace" "$tmp/other.pftrace" -o - -f tar

# ---- 4. no false all-clear
python3 - "$tmp/cpu.json" <<'PY'
import json, sys
ev = [{"ph": "X", "name": "cpu_op", "pid": 1, "tid": 1, "ts": 10 * i, "dur": 5, "cat": "cpu_op"}
      for i in range(20)]
json.dump({"traceEvents": ev}, open(sys.argv[1], "w"))
PY
expect 1 "no GPU work in $tmp/cpu.json: nothing to analyze" "$ct" analyze "$tmp/cpu.json"
grep -q "clean bill" "$tmp/out" && bad "analyze of a CPU-only trace says 'a clean bill'"
expect 0 "no GPU work in $tmp/cpu.json" "$ct" diff "$tmp/cpu.json" "$tmp/in.pftrace"

# ---- 4b. every JSON output carries the damage: analyze and diff of a cut trace
"$ct" convert "$data/ddp2_rank0.cupti" -o "$tmp/r0.pftrace" 2>/dev/null || bad "convert ddp2_rank0"
size=$(wc -c <"$tmp/r0.pftrace")
head -c $((size * 9 / 10)) "$tmp/r0.pftrace" >"$tmp/r0cut.pftrace"
"$ct" analyze --json "$tmp/r0cut.pftrace" >"$tmp/out" 2>"$tmp/err" || bad "analyze of a cut trace failed"
grep -q '"damage":"[^"]*r0cut.pftrace: cut at byte' "$tmp/out" && ok || bad "analyze --json: no damage"
"$ct" analyze "$tmp/r0cut.pftrace" 2>/dev/null | grep -q "Damaged input, analyzed up to the damage" && ok ||
	bad "analyze: no damage line"
"$ct" diff --json "$tmp/r0cut.pftrace" "$tmp/r0.pftrace" >"$tmp/out" 2>"$tmp/err" || bad "diff of a cut trace failed"
grep -q '"base_damage":"[^"]*cut at byte[^"]*","new_damage":null' "$tmp/out" && ok || bad "diff --json: no damage"

# ---- 5. damage: every file of tests/data cut at every 5%, and with a flipped byte
mkdir -p "$tmp/cut"
for f in "$data"/*.cupti "$data"/*.json "$data"/*.json.gz "$tmp/in.pftrace"; do
	b=$(basename "$f")
	files="$f"
	case "$f" in *.cupti)
		"$ct" convert "$f" -o "$tmp/cut/$b.pftrace" 2>/dev/null && files="$f $tmp/cut/$b.pftrace" ;;
	esac
	for g in $files; do
		size=$(wc -c <"$g")
		for pct in 5 10 15 20 25 30 35 40 45 50 55 60 65 70 75 80 85 90 95; do
			at=$((size * pct / 100))
			c="$tmp/cut/c.$(basename "$g")"
			head -c $at "$g" >"$c"
			"$ct" stats --json "$c" >"$tmp/out" 2>"$tmp/err"
			rc=$?
			grep -q "AddressSanitizer\|runtime error" "$tmp/err" && { bad "$g cut at $at: sanitizer"; cat "$tmp/err"; }
			if [ $rc -gt 1 ]; then
				bad "$g cut at $at: exit $rc"
				continue
			fi
			if [ $rc = 1 ]; then
				grep -q "$c" "$tmp/err" || bad "$g cut at $at: the error does not name the file"
				ok
				continue
			fi
			# Read: the one warning names the file (and, for traces, the byte).
			if [ "$(grep -c "warning: $c" "$tmp/err")" != 1 ]; then
				bad "$g cut at $at: want one warning naming it, got:"
				cat "$tmp/err"
				continue
			fi
			case "$g" in *.pftrace)
				grep -q "cut at byte" "$tmp/err" || bad "$g cut at $at: no byte offset"
				want=$(python3 "$src/damage_check.py" "$g" "$at")
				grep -q "the $want packets before it were" "$tmp/err" ||
					{ bad "$g cut at $at: want $want packets read"; cat "$tmp/err"; } ;;
			esac
			grep -q '"damage": *"' "$tmp/out" || bad "$g cut at $at: stats --json does not carry the damage"
			ok
		done
		# One byte flipped in the middle.
		c="$tmp/cut/f.$(basename "$g")"
		cp "$g" "$c"
		printf '\125' | dd of="$c" bs=1 seek=$((size / 2)) conv=notrunc 2>/dev/null
		"$ct" stats "$c" >"$tmp/out" 2>"$tmp/err"
		rc=$?
		grep -q "AddressSanitizer\|runtime error" "$tmp/err" && { bad "$g flipped: sanitizer"; cat "$tmp/err"; }
		[ $rc -le 1 ] || bad "$g flipped: exit $rc"
		ok
	done
done

# ---- 6. record: the partial files a killed process leaves (output/recfile.h), as the library
# writes and notes them; fake.sh SRC DIR NAME leaves SRC ("-": nothing) as the partial trace of
# DIR/NAME and dies of SIGKILL, as a traced program killed mid-run does.
rd="$tmp/rec"
mkdir -p "$rd/t"
cat >"$tmp/fake.sh" <<'EOF'
part="$2/.$3.cuptrace-$$.partial"
if [ "$1" = - ]; then : >"$part"; else cp "$1" "$part"; fi
printf '%s\0%s\0\0' "$part" "$2/$3" >"$CUPTRACE_CLAIMS/partial-$$-1"
kill -KILL $$
EOF
rec() { env TMPDIR="$rd/t" "$ct" record --no-check "$@"; }
left() { # what record must not leave: partial files, its run directory
	ls -a "$rd" | grep -q "partial" && bad "$1: a partial file was left: $(ls -a "$rd")"
	[ -z "$(ls -A "$rd/t")" ] || bad "$1: record left $(ls -A "$rd/t")"
}
"$ct" convert "$data/gm_h100.cupti" -o "$tmp/ms.pftrace" 2>/dev/null || bad "convert gm_h100"
# gm_h100: many chunks (a one-chunk trace cut anywhere holds nothing readable).
size=$(($(wc -c <"$tmp/ms.pftrace") * 6 / 10))
head -c $size "$tmp/ms.pftrace" >"$tmp/ms_cut.pftrace"
# A trace of metadata alone (what a process killed before its first records leaves): the
# capture's leading META items, converted.
python3 - "$data/vector_add.cupti" "$tmp/meta.cupti" <<'PY'
import struct, sys
b = open(sys.argv[1], "rb").read()
at = 16  # header; then items: u32 type, u32 0, u64 length, the payload padded to 8
while at + 16 <= len(b) and struct.unpack_from("<I", b, at)[0] == 1:
    at += 16 + (struct.unpack_from("<Q", b, at + 8)[0] + 7) // 8 * 8
open(sys.argv[2], "wb").write(b[:at])
PY
"$ct" convert "$tmp/meta.cupti" -o "$tmp/meta.pftrace" 2>/dev/null || bad "convert the metadata"
"$ct" stats --json "$tmp/meta.pftrace" 2>/dev/null | python3 -c "
import json, sys
d = json.load(sys.stdin)
assert not d['categories'], d['categories']" || bad "meta.pftrace should hold no events"
cp "$tmp/in.pftrace" "$tmp/keep.pftrace"
# The old trace is an hour old, as an earlier run's would be (record takes a file written since
# it started for this run's).
old() { cp "$tmp/in.pftrace" "$rd/run.pftrace" && touch -d "@$(($(date +%s) - 3600))" "$rd/run.pftrace"; }
old
# 6a. A command that fails before CUDA starts: the old trace byte for byte.
expect 3 "no trace was written" rec -o "$rd/run.pftrace" -- sh -c 'exit 3'
cmp -s "$rd/run.pftrace" "$tmp/keep.pftrace" || bad "record of a failing command changed the old trace"
left "failing command"
# 6b. Killed mid-run: what it wrote replaces the old trace, cut, and reads up to the cut (the
# packets before it counted by damage_check.py).
want=$(python3 "$src/damage_check.py" "$tmp/ms.pftrace" "$size")
expect 137 "pid [0-9]* did not finish its trace (killed, or crashed): $rd/run.pftrace holds it as far as it was written ([0-9]* events readable): cut at byte [0-9]* of $size: .* the $want packets before it were" \
	rec -o "$rd/run.pftrace" -- sh "$tmp/fake.sh" "$tmp/ms_cut.pftrace" "$rd" run.pftrace
cmp -s "$rd/run.pftrace" "$tmp/ms_cut.pftrace" || bad "the killed run's trace is not what it wrote"
left "killed"
expect 0 "warning: $rd/run.pftrace: cut at byte" "$ct" stats "$rd/run.pftrace"
grep -q "cudaMalloc" "$tmp/out" || bad "the killed run's trace holds no cudaMalloc"
# 6c. Killed before it recorded anything (an empty partial file, or metadata alone): the old
# trace stays; with none, no file.
for what in - "$tmp/meta.pftrace"; do
	old
	expect 137 "ended before its trace recorded anything (killed, or crashed): $rd/run.pftrace, from before, is kept as it was" \
		rec -o "$rd/run.pftrace" -- sh "$tmp/fake.sh" "$what" "$rd" run.pftrace
	cmp -s "$rd/run.pftrace" "$tmp/keep.pftrace" || bad "$what: a run that recorded nothing replaced the old trace"
	left "nothing recorded ($what)"
	expect 137 "ended before its trace recorded anything (killed, or crashed): no trace written to $rd/new.pftrace" \
		rec -o "$rd/new.pftrace" -- sh "$tmp/fake.sh" "$what" "$rd" new.pftrace
	[ -e "$rd/new.pftrace" ] && bad "$what: a run that recorded nothing left new.pftrace"
	left "nothing recorded, no old trace ($what)"
done
# 6d. What no reader can read: left under its partial name, named; the old trace stays.
printf 'not a trace at all' >"$tmp/junk"
expect 137 "what it wrote cannot be read (.*): left as $rd/.run.pftrace.cuptrace-[0-9]*.partial; $rd/run.pftrace is as it was" \
	rec -o "$rd/run.pftrace" -- sh "$tmp/fake.sh" "$tmp/junk" "$rd" run.pftrace
cmp -s "$rd/run.pftrace" "$tmp/keep.pftrace" || bad "an unreadable partial trace replaced the old one"
[ "$(cat "$rd"/.run.pftrace.cuptrace-*.partial)" = "not a trace at all" ] || bad "the unreadable partial trace was not kept"
rm -f "$rd"/.run.pftrace.cuptrace-*.partial
left "unreadable"
# 6e. A process that outlives the command (here a sleep the command started): its partial file
# is still its own, not touched.
cat >"$tmp/outlive.sh" <<'EOF'
sleep 30 &
part="$1/.$2.cuptrace-$!.partial"
printf 'still writing' >"$part"
printf '%s\0%s\0\0' "$part" "$1/$2" >"$CUPTRACE_CLAIMS/partial-$!-1"
echo $! >"$1/sleeper"
EOF
expect 0 "pid [0-9]* outlived the command and is still writing its trace ($rd/.run.pftrace.cuptrace-[0-9]*.partial): it goes in place as $rd/run.pftrace when that process finishes it" \
	rec -o "$rd/run.pftrace" -- sh "$tmp/outlive.sh" "$rd" run.pftrace
kill "$(cat "$rd/sleeper")" 2>/dev/null
cmp -s "$rd/run.pftrace" "$tmp/keep.pftrace" || bad "a trace still being written replaced the old one"
[ "$(cat "$rd"/.run.pftrace.cuptrace-*.partial)" = "still writing" ] || bad "a trace still being written was touched"
rm -f "$rd"/.run.pftrace.cuptrace-*.partial "$rd/sleeper"
left "outlived"

echo "nothing lost: $n checks"
[ $fail = 0 ] && echo "ok: outputs never destroy inputs, damage is reported" && rm -rf "$tmp"
exit $fail
