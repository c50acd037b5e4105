#!/bin/sh
# GPU metrics without a GPU: the record options (bad values refused before anything runs,
# --list-gpu-metrics failing clearly where there is no GPU), the synthetic capture of tests/data
# (written by tests/test_gpumetrics.c: exact values) and the one recorded on an H100 (known
# answers of the workload) through stats, Chrome JSON and Perfetto.
set -u
ct=${CUPTRACE_BIN:?}
data=${CUPTRACE_TEST_DATA:?}
tmp=$(mktemp -d "${CUPTRACE_TMP:-/tmp}/gmcli.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
n=0 fail=0
. "$(dirname "$0")/expect.sh"
cap=$data/gpumetrics_synthetic.cupti

expect 2 "bad value for --gpu-metrics-rate" "$ct" record --gpu-metrics-rate 0 -- true
expect 2 "bad value for --gpu-metrics-rate" "$ct" record --gpu-metrics-rate 10k -- true
expect 2 "needs metric names" "$ct" record --gpu-metrics= -- true
# "--gpu-metrics LIST": a word with "__" is the list (the option after it is still read); a
# path is the command (what follows it is the command's).
expect 2 "bad value for --gpu-metrics-rate" "$ct" record --gpu-metrics sm__a.sum,dram__b.sum --gpu-metrics-rate 0 -- true
expect 2 "bad value for --gpu-metrics-rate" "$ct" record --gpu-metrics=sm__a.sum --gpu-metrics-rate x -- true
expect 0 "gpu-metrics-rate HZ" "$ct" record --help
if [ ! -e /dev/nvidia0 ] && [ ! -e /dev/nvidiactl ]; then
	expect 1 "no CUDA GPU found" "$ct" record --list-gpu-metrics
fi

# stats: the per-kernel table, with the averages the synthetic samples give.
expect 0 "GPU metrics per kernel" "$ct" stats "$cap"
grep -Eq "^mm_bf16 +1 +500\.0 us +90\.00 +10\.00" "$tmp/out" ||
	{ echo "FAIL: stats per-kernel row:"; cat "$tmp/out"; fail=1; }
expect 0 "" "$ct" stats --markdown "$cap"
grep -q "| mm_bf16 | 1 | 500.0 us | 90.00 | 10.00 |" "$tmp/out" ||
	{ echo "FAIL: markdown row:"; cat "$tmp/out"; fail=1; }
# stats --json: the same averages under "gpu_metrics"; none in a trace without GPU metrics.
if command -v python3 >/dev/null 2>&1; then
	expect 0 "" "$ct" stats --json "$cap"
	PYTHONPATH="$(dirname "$0")" python3 -c 'import sys, strict_json; strict_json.load(sys.argv[1])' "$tmp/out" ||
		{ echo "FAIL: stats --json is not one strict JSON object on one line"; fail=1; }
	python3 -c 'import json,sys; g=json.load(open(sys.argv[1]))["gpu_metrics"]; r=g["rows"][0]
assert g["metrics"] == ["SM active %", "DRAM read GB/s"], g
assert (r["name"], r["count"], r["total_ns"], r["avg"], r["covered_ns"]) == ("mm_bf16", 1, 500000, [90, 10], [500000, 500000]), r' "$tmp/out" ||
		{ echo "FAIL: stats --json gpu_metrics"; fail=1; }
	expect 0 "" "$ct" stats --json "$data/vector_add.cupti"
	grep -q gpu_metrics "$tmp/out" && { echo "FAIL: gpu_metrics in a trace without them"; fail=1; }
fi
# Metadata: sample and gap counts.
expect 0 "gpu0_metrics_gaps" "$ct" stats "$cap"

# Chrome JSON: one 'C' event per sample, gap and end, on each of the two tracks.
expect 0 "" "$ct" convert "$cap" -o "$tmp/gm.json"
c=$(grep -o '"name":"SM active %","args"' "$tmp/gm.json" | wc -l)
d=$(grep -o '"name":"DRAM read GB/s","args"' "$tmp/gm.json" | wc -l)
[ "$c" -eq 21 ] && [ "$d" -eq 21 ] || { echo "FAIL: JSON counter events $c, $d (want 21, 21)"; fail=1; }
# Perfetto and back: the same per-kernel table.
expect 0 "" "$ct" convert "$cap" -o "$tmp/gm.pftrace"
expect 0 "GPU metrics per kernel" "$ct" stats "$tmp/gm.pftrace"
grep -Eq "^mm_bf16 +1 +500\.0 us +90\.00 +10\.00" "$tmp/out" ||
	{ echo "FAIL: stats of the Perfetto trace:"; cat "$tmp/out"; fail=1; }
expect 0 "GPU metrics per kernel" "$ct" stats "$tmp/gm.json"

# The capture recorded on an H100 (`record --gpu-metrics --capture -- tests/gpumetrics_work
# 1024`, driver 580): the known answers of tests/gpu/check_gpumetrics.py hold in its Chrome
# JSON (tensor activity in the bf16 matmul and none in saxpy, DRAM read + write = 2 x bytes /
# time for each device-to-device copy, SM activity ~0 in the idle gap), in its Perfetto file
# read back, and stats' per-kernel table has the matmul with its tensor activity.
h100=$data/gm_h100.cupti
expect 0 "gpu0_metrics_samples: *6810" "$ct" stats "$h100"
# (the metrics come a few per table: count, time and SM active in the first, tensor active and
# DRAM read in the next)
grep -Eq "^mm_bf16.* 8 +154\.[0-9] ms +9[0-9]\.[0-9]+ " "$tmp/out" &&
	grep -Eq "^mm_bf16.* +[5-9]\.[0-9]+ +1[0-9]{3}\.[0-9]+ " "$tmp/out" ||
	{ echo "FAIL: stats of the H100 capture: mm_bf16 row:"; grep -A9 "GPU metrics per kernel" "$tmp/out"; fail=1; }
if command -v python3 >/dev/null 2>&1; then
	expect 0 "" "$ct" convert "$h100" -o "$tmp/h100.json"
	python3 "$(dirname "$0")/gpu/check_gpumetrics.py" "$tmp/h100.json" >"$tmp/check.txt" ||
		{ echo "FAIL: known answers in the H100 capture's JSON:"; cat "$tmp/check.txt"; fail=1; }
	expect 0 "" "$ct" convert "$h100" -o "$tmp/h100.pftrace"
	expect 0 "" "$ct" convert "$tmp/h100.pftrace" -o "$tmp/h100-back.json"
	python3 "$(dirname "$0")/gpu/check_gpumetrics.py" "$tmp/h100-back.json" >"$tmp/check.txt" ||
		{ echo "FAIL: known answers after Perfetto and back:"; cat "$tmp/check.txt"; fail=1; }
fi
[ $fail -eq 0 ] && echo "PASS gpumetrics_cli ($n commands)"
exit $fail
