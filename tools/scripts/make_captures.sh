#!/bin/sh
# Records the raw CUPTI capture of every example (and of a PyTorch training loop) on a GPU
# machine: these are the files in tests/data that CI converts without a GPU.
#   tools/scripts/make_captures.sh BUILD_DIR OUT_DIR
# Captures are made with --driver all so the converter's filter is exercised too.
set -u
build=$(cd "$1" && pwd)
out=$2
src=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
ct="$build/cuptrace"
fail=0
run() { # name, command...
	name=$1
	shift
	if timeout 120 "$ct" record --capture --driver all --no-summary -o "$out/$name.cupti" -- "$@" \
		>"$out/$name.log" 2>&1; then
		echo "captured $name: $(wc -c <"$out/$name.cupti") bytes"
	else
		echo "FAILED $name (exit $?):"
		tail -5 "$out/$name.log"
		fail=1
	fi
}
run vector_add "$build/examples/vector_add"
run multi_stream "$build/examples/multi_stream" 4 250
run driver_api "$build/examples/driver_api"
run graphs "$build/examples/graphs"
run memory "$build/examples/memory"
run peer_copy "$build/examples/peer_copy"
run nvtx "$build/examples/nvtx"
run multi_gpu "$build/examples/multi_gpu"
# Two runs that differ on purpose, and a longer one, for `cuptrace diff`.
run steps_base "$build/examples/steps" --steps 10
run steps_changed "$build/examples/steps" --steps 10 --slow --extra
run steps_long "$build/examples/steps" --steps 20
if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
	run torch_train python3 "$src/examples/torch_train.py" --steps 3
fi
exit $fail
