#!/bin/sh
# `cuptrace merge` keeps every input's host stack samples (issue 46): captures of GPU runs with
# samples planted by tests/sample_capture.py (A and B: two of one run, two threads each, one pid
# that the merge gives B anew, a sample of A's before its first event; C: another run), merged
# side by side (auto-aligned, --align-on, --no-align; into one .pftrace and into the .tar of one
# file per input) and as ranks, from the captures (the converter's path) and from their .pftrace
# conversions (the reader's), and checked by tests/merge_samples_check.py against the plans, on
# its own: every sample once, on its input's thread, with its frames, moved exactly as its
# input's slices.
set -u
ct=${CUPTRACE_BIN:?} src=${CUPTRACE_SRC:?}
if ! command -v python3 >/dev/null 2>&1; then
	echo "SKIP: python3 not found (needed to plant and decode the samples)"
	exit 77
fi
tmp=$(mktemp -d "${CUPTRACE_TMP:-/tmp}/merge_samples.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
. "$src/tests/script_lib.sh"
cap=$src/tests/data/torch_train.cupti
pid() {
	python3 -c "import sys; sys.path.insert(0, '$src/tests'); from sample_capture import meta; print(meta(open('$1', 'rb').read())['pid'])"
}
# Plans: [ns after the capture's start, tid, stack]; A's first sample at 1 us, before any event.
python3 - "$(pid "$cap")" "$(pid "$src/tests/data/steps_base.cupti")" "$tmp" <<'EOF'
import json, sys
pid, pidc, tmp = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
a = [[1000, pid, 1]] + [[5_000_000 + i * 700_000, pid if i % 3 else pid + 7, 1 + i % 2]
                        for i in range(60)]
b = [[9_000_000 + i * 1_300_000, pid + 3 if i % 4 == 0 else pid, 2 - i % 3 % 2]
     for i in range(45)]
c = [[3_000_000_000 + i * 2_100_000, pidc, 1 + i % 5 % 2] for i in range(30)]
for k, v in (("a", a), ("b", b), ("c", c)):
    json.dump(v, open(f"{tmp}/{k}.json", "w"))
EOF
for x in a b c; do
	in=$cap
	[ $x = c ] && in=$src/tests/data/steps_base.cupti
	python3 "$src/tests/sample_capture.py" make "$in" "$tmp/$x.cupti" "$tmp/$x.json" &&
		"$ct" convert "$tmp/$x.cupti" -o "$tmp/$x.pftrace" ||
		{ bad "making input $x"; exit 1; }
done
# check WHAT OUT MERGE-ARGS...: merge A, B and C into OUT and check its samples.
check() {
	what=$1 out=$2
	shift 2
	if ! "$ct" merge --label A --label B --label C "$@" -o "$out" 2>"$tmp/err"; then
		bad "$what: merge failed: $(cat "$tmp/err")"
		return
	fi
	if python3 "$src/tests/merge_samples_check.py" "$out" "$tmp/err" \
		"A:$tmp/a.cupti:$tmp/a.json:$tmp/a.pftrace" \
		"B:$tmp/b.cupti:$tmp/b.json:$tmp/b.pftrace" \
		"C:$tmp/c.cupti:$tmp/c.json:$tmp/c.pftrace" >"$tmp/check" 2>&1; then
		ok
		echo "ok: $what: $(cat "$tmp/check")"
	else
		bad "$what: $(cat "$tmp/check")"
	fi
}
check "captures, auto-aligned" "$tmp/m1.pftrace" --side-by-side "$tmp/a.cupti" "$tmp/b.cupti" "$tmp/c.cupti"
check "captures, --align-on" "$tmp/m2.pftrace" --side-by-side --align-on 'cudaLaunchKernel#3' \
	"$tmp/a.cupti" "$tmp/b.cupti" "$tmp/c.cupti"
check "traces, --no-align" "$tmp/m3.pftrace" --side-by-side --no-align "$tmp/a.pftrace" "$tmp/b.pftrace" "$tmp/c.pftrace"
check "traces, --align-on, .tar" "$tmp/m4.tar" --side-by-side --align-on 'cudaLaunchKernel#3' \
	"$tmp/a.pftrace" "$tmp/b.pftrace" "$tmp/c.pftrace"
check "captures, --ranks" "$tmp/m5.pftrace" --ranks "$tmp/a.cupti" "$tmp/b.cupti" "$tmp/c.cupti"
# The merged trace read again (stats and analyze take it; the samples survive a convert).
"$ct" convert "$tmp/m2.pftrace" -o "$tmp/again.pftrace" 2>"$tmp/err" &&
	python3 "$src/tests/pf_samples.py" "$tmp/again.pftrace" >"$tmp/again.txt" &&
	[ "$(python3 -c "import sys; sys.path.insert(0, '$src/tests'); from pf_samples import samples; print(len(samples('$tmp/again.pftrace')))")" = 136 ] &&
	ok || bad "the merged trace converted again: not 136 samples ($(cat "$tmp/err"))"
"$ct" analyze "$tmp/m2.pftrace" >/dev/null 2>"$tmp/err" && ok || bad "analyze: $(cat "$tmp/err")"
echo "$n checks"
exit $fail
