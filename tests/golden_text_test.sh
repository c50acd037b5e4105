#!/bin/sh
# The text output of every command that prints a report (stats, analyze, diff, merge, lines) on
# tests/data, compared byte for byte with tests/golden/text/*.txt, and checked for how it reads
# (tests/text_check.py): every table's columns at the same offsets in every row, lines within
# 100 columns (legend lines of full names aside), no share above 100%, no "?" placeholder.
# Regenerate the golden files after an intended change (then read the diff before committing):
#   UPDATE_GOLDEN=1 ctest --test-dir build -R golden_text
set -u
ct=$CUPTRACE_BIN
src=${CUPTRACE_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
gold=$src/tests/golden/text
tmp=$(mktemp -d "${CUPTRACE_TMP:-/tmp}/golden.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
n=0
fail=0
# Relative paths: the outputs name their inputs, and must not depend on where the tree is.
cd "$CUPTRACE_TEST_DATA" || exit 1

run() { # name command...: stdout and stderr of the command into $tmp/name.txt
	name=$1
	shift
	"$@" >"$tmp/$name.txt" 2>&1
	echo "exit $?" >>"$tmp/$name.txt"
}
for f in vector_add.cupti multi_stream.cupti graphs.cupti memory.cupti multi_gpu_2gpu.cupti \
	handmade.kineto.json torch_small.kineto.json.gz; do
	run "stats-$f" "$ct" stats "$f"
done
run stats-md-multi_stream "$ct" stats --markdown multi_stream.cupti
for f in multi_stream.cupti steps_long.cupti torch_train.cupti graphs.cupti; do
	run "analyze-$f" "$ct" analyze "$f"
done
run analyze-ddp2 "$ct" analyze ddp2_rank0.cupti ddp2_rank1.cupti
run analyze-md-steps_long "$ct" analyze --markdown steps_long.cupti
run diff-steps "$ct" diff steps_base.cupti steps_changed.cupti
run diff-md-steps "$ct" diff --markdown steps_base.cupti steps_changed.cupti
run diff-torch "$ct" diff torch_small.kineto.json.gz torch_stack.kineto.json.gz
run lines-stacks "$ct" stats --group-by line stacks_native.cupti
run merge-ranks "$ct" merge --ranks -o "$tmp/m.pftrace" ddp2_rank0.cupti ddp2_rank1.cupti
sed -i "s|$tmp/||g" "$tmp/merge-ranks.txt"
run stats-merged "$ct" stats "$tmp/m.pftrace"
run merge-side "$ct" merge --side-by-side -o "$tmp/s.pftrace" steps_base.cupti steps_changed.cupti
sed -i "s|$tmp/||g" "$tmp/merge-side.txt"

for f in "$tmp"/*.txt; do
	name=$(basename "$f")
	if [ "${UPDATE_GOLDEN:-}" = 1 ]; then
		mkdir -p "$gold" && cp "$f" "$gold/$name"
	elif ! cmp -s "$f" "$gold/$name"; then
		echo "FAIL: $name differs from tests/golden/text/$name (UPDATE_GOLDEN=1 to regenerate):"
		diff "$gold/$name" "$f" | head -20
		fail=$((fail + 1))
		continue
	fi
	n=$((n + 1))
done
if command -v python3 >/dev/null 2>&1; then
	# Markdown is reflowed by its reader: only text output is held to the width.
	python3 "$src/tests/text_check.py" $(ls "$tmp"/*.txt | grep -v -- '-md-') && n=$((n + 1)) ||
		fail=$((fail + 1))
else
	echo "note: python3 not found: layout checks skipped"
fi
echo "golden text: $n passed, $fail failed"
[ "$fail" = 0 ]
