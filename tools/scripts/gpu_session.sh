#!/bin/sh
# Everything that needs the GPU, in one go (the device lease is short): GPU tests, fresh
# captures of the examples, a live trace of a PyTorch training loop, and the benchmark.
#   tools/scripts/gpu_session.sh BUILD_DIR OUT_DIR
set -u
build=$(cd "$1" && pwd)
out=$2
src=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
echo "== GPU tests"
# Run directly (not through ctest) with a time limit each, so a hang shows where it was.
export CUPTRACE_BIN="$build/cuptrace" CUPTRACE_EXAMPLES="$build/examples" \
	CHECK_TRACE="$build/tests/check_trace" CUPTRACE_LIB="$build/libcuptrace.so" CUPTRACE_TMP=/tmp
for t in gpu_record_test gpu_signals_test gpu_pytorch_test gpu_drills_test gpu_otlp_test; do
	timeout "${GPU_TEST_TIMEOUT:-240}" sh -x "$src/tests/$t.sh" 2>&1
	echo "$t: exit $?"
done
echo "== captures"
"$src/tools/scripts/make_captures.sh" "$build" /tmp/cap && tar czf "$out/captures.tgz" -C /tmp/cap .
echo "== PyTorch, live"
"$build/cuptrace" record -o "$out/torch_train.pftrace" -- python3 "$src/examples/torch_train.py" --steps 3 2>&1 | grep -v Warning
"$build/tests/check_trace" "$out/torch_train.pftrace" --clean --at-least kernel=100 --at-least nvtx:step=3
"$build/cuptrace" record -o /tmp/torch_nvtx.pftrace -- python3 "$src/examples/torch_train.py" --steps 2 --emit-nvtx 2>&1 | grep -v Warning
"$build/tests/check_trace" /tmp/torch_nvtx.pftrace --clean --at-least nvtx=50
# A CUDA graph replayed 2,000 times: a million kernels, each with its flow from its replay.
"$build/cuptrace" record -o /tmp/torch_graph.pftrace -- python3 "$src/examples/torch_graph.py" 2>&1 | grep -v Warning
"$build/tests/check_trace" /tmp/torch_graph.pftrace --clean --at-least kernel=1000000
echo "torch_graph: $(wc -c </tmp/torch_graph.pftrace) bytes"
echo "== fidelity"
"$src/tools/scripts/fidelity.sh" "$build" 5
echo "== memory"
python3 "$src/tools/bench/rss_bench.py" "$build" --reps 3
echo "== benchmark"
for ms in ${BENCH_FLUSH_MS:-1000}; do
	echo "-- CUPTRACE_FLUSH_MS=$ms"
	CUPTRACE_FLUSH_MS=$ms "$src/tools/bench/bench.sh" "$build" 4 20000 "${BENCH_REPS:-5}"
done
