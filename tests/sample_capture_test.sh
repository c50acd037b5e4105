#!/bin/sh
# Host stack samples through the converter without a GPU (issue 46): a capture recorded on a GPU
# with sampler records added (tests/sample_capture.py), converted to Perfetto and checked there;
# Chrome JSON, stats and analyze take it as before (samples dropped from JSON, said in
# src/inject/SAMPLING.md).
set -eu
ct=${CUPTRACE_BIN:?} src=${CUPTRACE_SRC:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 "$src/tests/sample_capture.py" make "$src/tests/data/torch_train.cupti" "$tmp/s.cupti"
"$ct" convert "$tmp/s.cupti" -o "$tmp/s.pftrace"
python3 "$src/tests/sample_capture.py" check "$tmp/s.cupti" "$tmp/s.pftrace"
# Read back and written again (the reader's path: convert, merge, analyze --annotate): the same
# samples at the same times.
"$ct" convert "$tmp/s.pftrace" -o "$tmp/again.pftrace"
python3 "$src/tests/sample_capture.py" check "$tmp/s.cupti" "$tmp/again.pftrace"
# The same trace without samples: the slices are the same.
"$ct" convert "$src/tests/data/torch_train.cupti" -o "$tmp/plain.pftrace"
a=$(python3 "$src/tests/pf_times.py" "$tmp/s.pftrace" | python3 -c 'import json,sys; print(json.load(sys.stdin)["total_slices"])')
b=$(python3 "$src/tests/pf_times.py" "$tmp/plain.pftrace" | python3 -c 'import json,sys; print(json.load(sys.stdin)["total_slices"])')
if [ "$a" != "$b" ] || [ "$a" = 0 ]; then
	echo "FAIL: $a slices with samples, $b without"; exit 1
fi
"$ct" convert "$tmp/s.cupti" -o "$tmp/s.json"
"$ct" stats "$tmp/s.pftrace" >/dev/null
"$ct" analyze "$tmp/s.pftrace" >/dev/null
echo "ok: $a slices either way"
