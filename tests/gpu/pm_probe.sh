#!/bin/sh
# Runs the PM sampling probe (tests/gpu/pm_probe.cu) on GPU 0, from the repository root after
# `cmake --build build`. Writes pm_probe.log and the probe's raw files under $OUT (default
# ./probe_out). Takes about half a minute.
set -u
out=${OUT:-probe_out}
bin=${PM_PROBE_BIN:-build/tests/pm_probe}
mkdir -p "$out"
if [ ! -x "$bin" ]; then
	echo "pm_probe.sh: $bin not built (cmake --build build --target pm_probe)" >&2
	exit 2
fi
{
	echo "== nvidia-smi"
	nvidia-smi --query-gpu=name,driver_version,mig.mode.current,clocks.sm,clocks.mem --format=csv 2>&1
	echo "== pm_probe"
	PM_OUT=$out timeout 300 "$bin"
	echo "pm_probe exit: $?"
	if command -v ncu >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/ncu ]; then
		ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
		echo "== ncu pmsampling metric list (chip gh100) -> ncu_pmsampling.txt"
		"$ncu" --query-metrics-mode suffix --query-metrics-collection pmsampling \
			--chip gh100 >"$out/ncu_pmsampling.txt" 2>&1
		echo "ncu exit: $? ($(wc -l <"$out/ncu_pmsampling.txt") lines)"
	fi
} 2>&1 | tee "$out/pm_probe.log"
ls -l "$out"
