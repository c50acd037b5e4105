#!/bin/sh
# GPU test: call stacks (issue 27). (a) `record --stacks python` on tests/stacks_torch.py: every
# launch from a marked line has that file:line innermost (also through a helper and a lambda);
# (b) `record --stacks native` on tests/stacks_prog.c, direct (.json) and through a capture
# (`--capture`, then `convert`), as built and stripped: the memset/memcpy slices' frames in the
# program fall in c(), b() and a(). Skips without a GPU (and (a) without PyTorch).
set -u
gpu_test=gpu_stacks
. "$(dirname "$0")/gpu_common.sh"
src=$(cd "$(dirname "$0")" && pwd)
fail=0
rec() { # log out [options] -- command...
	log=$1 out=$2
	shift 2
	if ! timeout 180 "$ct" record -o "$tmp/$out" "$@" >"$tmp/$log" 2>&1; then
		echo "FAIL: cuptrace record $*"; cat "$tmp/$log"; fail=1; return 1
	fi
}
if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
	rec py.log py.json --stacks python -- python3 "$src/stacks_torch.py" &&
		{ python3 "$src/stacks_check.py" python "$tmp/py.json" "$src/stacks_torch.py" || fail=1; }
	rec pyf.log py.pftrace --stacks python -- python3 "$src/stacks_torch.py" || true
	tp_check "$tmp/py.pftrace" || fail=1
else
	echo "SKIP (a): PyTorch with CUDA is not installed here"
fi
# (b) the C program, built as the capture script builds it
sh "$src/stacks_build.sh" "$src/stacks_prog.c" "$tmp" || { echo "FAIL: cannot build stacks_prog"; exit 1; }
for p in stacks_prog stacks_prog.stripped; do
	rec "$p.log" "$p.json" --stacks native -- "$tmp/$p" &&
		{ python3 "$src/stacks_check.py" native "$tmp/$p.json" "$tmp/stacks_prog" "$p" || fail=1; }
	rec "$p.cap.log" "$p.cupti" --stacks native --capture -- "$tmp/$p" &&
		"$ct" convert "$tmp/$p.cupti" -o "$tmp/$p.cap.json" &&
		{ python3 "$src/stacks_check.py" native "$tmp/$p.cap.json" "$tmp/stacks_prog" "$p" || fail=1; }
done
# Without --stacks: no stack anywhere.
rec none.log none.json -- "$tmp/stacks_prog" && grep -q '"stack"' "$tmp/none.json" &&
	{ echo "FAIL: a trace without --stacks has stacks"; fail=1; }
[ $fail = 0 ] && echo "PASS: call stacks" && rm -rf "$tmp"
exit $fail
