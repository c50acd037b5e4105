#!/bin/sh
# GPU test of `record --gpu-metrics` (issue 15, item 3): records tests/gpumetrics_work.cu
# (a bf16 tensor-core matmul, an idle gap, an elementwise kernel, device-to-device copies of
# 4 GiB) and checks the metrics against what the workload must give (check_gpumetrics.py);
# `stats` prints per-kernel averages; a metric list the GPU does not have fails soft (one line,
# the trace unchanged); a cudaDeviceReset of the sampled context mid-run ends sampling with one
# line and the program goes on. Skips without a GPU.
set -u
gpu_test=gpumetrics
. "$(dirname "$0")/gpu_common.sh"
fail=0
work=${CUPTRACE_BUILD_DIR:-build}/tests/gpumetrics_work
if [ ! -x "$work" ]; then
	echo "SKIP: $work not built (nvcc missing?)"
	exit 77
fi
src=${CUPTRACE_SRC:-$(dirname "$0")/..}

# 1. The metrics, checked against known answers.
if ! timeout 300 "$ct" record --gpu-metrics -o "$tmp/gm.json" -- "$work" >"$tmp/gm.log" 2>&1; then
	echo "FAIL: record --gpu-metrics failed"; cat "$tmp/gm.log"; exit 1
fi
cat "$tmp/gm.log"
if grep -q "GPU metrics off" "$tmp/gm.log"; then
	echo "FAIL: GPU metrics were not collected on this GPU (see above)"; exit 1
fi
python3 "$src/tests/gpu/check_gpumetrics.py" "$tmp/gm.json" || fail=1

# 2. stats: per-kernel averages.
"$ct" stats "$tmp/gm.json" >"$tmp/stats.txt" || fail=1
sed -n '/GPU metrics per kernel/,$p' "$tmp/stats.txt"
grep -q "GPU metrics per kernel" "$tmp/stats.txt" && grep -q "mm_bf16" "$tmp/stats.txt" || {
	echo "FAIL: stats shows no per-kernel GPU metrics"; fail=1; }

# 3. Fails soft: a metric the GPU does not have -> one line saying so, the kernels all there.
timeout 300 "$ct" record --gpu-metrics=no_such__metric.sum -o "$tmp/bad.json" -- "$work" \
	>"$tmp/bad.log" 2>&1 || { echo "FAIL: record with a bad metric list failed"; fail=1; }
n=$(grep -c "GPU metrics off" "$tmp/bad.log")
[ "$n" -eq 1 ] || { echo "FAIL: expected one 'GPU metrics off' line, got $n"; cat "$tmp/bad.log"; fail=1; }
k1=$(grep -o '"cat":"kernel"' "$tmp/gm.json" | wc -l)
k2=$(grep -o '"cat":"kernel"' "$tmp/bad.json" | wc -l)
[ "$k1" -eq "$k2" ] && [ "$k1" -gt 0 ] || { echo "FAIL: kernels with metrics $k1, without $k2"; fail=1; }
grep -q '"name":"SM active %"' "$tmp/bad.json" && { echo "FAIL: metrics in the failed run"; fail=1; }

# 4. Perfetto: the counters load in trace_processor where it is available.
timeout 300 "$ct" record --gpu-metrics -o "$tmp/gm.pftrace" -- "$work" >/dev/null 2>&1 || fail=1
tp_check "$tmp/gm.pftrace" || fail=1

# 5. The sampled context destroyed mid-run (cudaDeviceReset): one line, sampling ends there,
# the program goes on and its later kernels are traced; nothing dies at exit.
timeout 300 "$ct" record --gpu-metrics -o "$tmp/reset.json" -- "$work" 64 reset \
	>"$tmp/reset.log" 2>&1 || { echo "FAIL: record with cudaDeviceReset failed"; cat "$tmp/reset.log"; fail=1; }
n=$(grep -c "last context was destroyed" "$tmp/reset.log")
[ "$n" -eq 1 ] || { echo "FAIL: expected one 'last context was destroyed' line, got $n"; cat "$tmp/reset.log"; fail=1; }
grep -qiE "abort|corruption|core dumped|did not stop" "$tmp/reset.log" && { echo "FAIL: see the log"; cat "$tmp/reset.log"; fail=1; }
python3 "$src/tests/gpu/check_gpumetrics.py" --reset "$tmp/reset.json" || fail=1
[ $fail -eq 0 ] && echo "PASS gpu_metrics" && rm -rf "$tmp"
exit $fail
