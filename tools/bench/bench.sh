#!/bin/sh
# Overhead and size benchmark (run on a GPU machine; README "Benchmarks" has the numbers).
#   tools/bench/bench.sh BUILD_DIR [threads] [launches per thread] [repetitions]
# Runs examples/multi_stream (launch-bound: tiny kernels, back to back) untraced, under the
# CUPTI floor (a minimal CUPTI client enabling the same activity kinds and discarding every
# buffer), under cuptrace writing the default .pftrace, and under cuptrace --capture;
# interleaved, repeated, median wall time. Also the trace size per kernel, and (with python3)
# tools/bench/size_breakdown.py on the .pftrace: what each part of it costs.
set -eu
build=$(cd "$1" && pwd)
threads=${2:-4}
launches=${3:-20000}
reps=${4:-7}
tmp=$(mktemp -d)
ex="$build/examples/multi_stream"
kernels=$((threads * launches))
now() { date +%s%N; }
run_mode() { # mode -> prints ns
	t0=$(now)
	case $1 in
	plain) "$ex" "$threads" "$launches" >/dev/null ;;
	floor) CUDA_INJECTION64_PATH="$build/libcupti_floor.so" "$ex" "$threads" "$launches" >/dev/null ;;
	# Injected the way `cuptrace record` does it, without its one-off device check.
	cuptrace) CUDA_INJECTION64_PATH="$build/libcuptrace.so" CUPTRACE_SUMMARY=0 \
		CUPTRACE_OUTPUT="$tmp/t.pftrace" "$ex" "$threads" "$launches" >/dev/null ;;
	capture) CUDA_INJECTION64_PATH="$build/libcuptrace.so" CUPTRACE_SUMMARY=0 \
		CUPTRACE_OUTPUT="$tmp/t.cupti" "$ex" "$threads" "$launches" >/dev/null ;;
	# the native call stack at every launch (issue 27)
	stacks) CUDA_INJECTION64_PATH="$build/libcuptrace.so" CUPTRACE_SUMMARY=0 CUPTRACE_STACKS=native \
		CUPTRACE_OUTPUT="$tmp/t.pftrace" "$ex" "$threads" "$launches" >/dev/null ;;
	# the same with glibc's backtrace() where libunwind is installed too (the unwinder used
	# where libunwind.so.8 is not)
	stacks_glibc) CUDA_INJECTION64_PATH="$build/libcuptrace.so" CUPTRACE_SUMMARY=0 \
		CUPTRACE_STACKS=native CUPTRACE_UNWINDER=glibc \
		CUPTRACE_OUTPUT="$tmp/t.pftrace" "$ex" "$threads" "$launches" >/dev/null ;;
	# a stack at one launch in 2 or 4 on average (--stacks-every)
	stacks_e2 | stacks_e4) CUDA_INJECTION64_PATH="$build/libcuptrace.so" CUPTRACE_SUMMARY=0 \
		CUPTRACE_STACKS=native CUPTRACE_STACKS_EVERY=${1#stacks_e} \
		CUPTRACE_OUTPUT="$tmp/t.pftrace" "$ex" "$threads" "$launches" >/dev/null ;;
	# host stack samples (issue 46) at HZ, and with native frames: sampleHZ, sample_nativeHZ
	sample_native*) CUDA_INJECTION64_PATH="$build/libcuptrace.so" CUPTRACE_SUMMARY=0 \
		CUPTRACE_SAMPLE=${1#sample_native} CUPTRACE_SAMPLE_NATIVE=1 \
		CUPTRACE_OUTPUT="$tmp/t.pftrace" "$ex" "$threads" "$launches" >/dev/null ;;
	sample*) CUDA_INJECTION64_PATH="$build/libcuptrace.so" CUPTRACE_SUMMARY=0 \
		CUPTRACE_SAMPLE=${1#sample} \
		CUPTRACE_OUTPUT="$tmp/t.pftrace" "$ex" "$threads" "$launches" >/dev/null ;;
	esac
	t1=$(now)
	echo $((t1 - t0))
}
modes=${BENCH_MODES:-"plain floor cuptrace capture"}
for m in $modes; do : >"$tmp/$m.times"; done
run_mode plain >/dev/null # warm-up: driver and page cache
for r in $(seq "$reps"); do
	for m in $modes; do run_mode "$m" >>"$tmp/$m.times"; done
done
median() { sort -n "$1" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
floor_ns=$(median "$tmp/floor.times")
plain_ns=$(median "$tmp/plain.times")
echo "multi_stream: $threads threads x $launches launches = $kernels kernels, median of $reps runs"
printf "%-10s %10s %14s %10s %10s\n" mode "wall ms" "us/launch" "x plain" "x floor"
for m in $modes; do
	ns=$(median "$tmp/$m.times")
	awk -v m="$m" -v ns="$ns" -v k="$kernels" -v p="$plain_ns" -v f="$floor_ns" -v t="$threads" \
		'BEGIN {printf "%-10s %10.1f %14.3f %10.2f %10.2f\n", m, ns/1e6, ns/1e3/k*t, ns/p, ns/f}'
done
# Each mode's added time over plain against cuptrace's, paired by repetition (the modes of one
# repetition ran back to back): median ratio and a 95% bootstrap interval over repetitions.
if command -v python3 >/dev/null 2>&1 && [ -f "$tmp/cuptrace.times" ]; then
	python3 - "$tmp" $modes <<'PY'
import os, random, statistics, sys
tmp, modes = sys.argv[1], sys.argv[2:]
t = {m: [int(x) for x in open(os.path.join(tmp, m + ".times"))] for m in modes}
def ratio(reps, m):
    return statistics.median((t[m][i] - t["plain"][i]) / (t["cuptrace"][i] - t["plain"][i])
                             for i in reps)
n = len(t["plain"])
reps = [i for i in range(n) if t["cuptrace"][i] > t["plain"][i]]
rng = random.Random(1)
for m in modes:
    if m in ("plain", "cuptrace") or not reps:
        continue
    b = sorted(ratio([rng.choice(reps) for _ in reps], m) for _ in range(4000))
    print("added time %s / cuptrace, paired by repetition (%d): %.2f [%.2f, %.2f]"
          % (m, len(reps), ratio(reps, m), b[100], b[3899]))
PY
fi
# How long finishing the trace took at exit (the summary line), for one run.
CUDA_INJECTION64_PATH="$build/libcuptrace.so" CUPTRACE_OUTPUT="$tmp/s.pftrace" \
	"$ex" "$threads" "$launches" 2>&1 >/dev/null | grep "at exit" | sed 's/^/summary: /'
"$build/cuptrace" convert "$tmp/t.cupti" -o "$tmp/t.json" >/dev/null 2>&1 || true
"$build/cuptrace" convert "$tmp/t.cupti" -o "$tmp/t.json.gz" >/dev/null 2>&1 || true
"$build/cuptrace" convert "$tmp/t.cupti" -o "$tmp/t.pftrace.gz" >/dev/null 2>&1 || true
echo "trace size for $kernels kernels (each with its launch call and flow):"
for f in t.pftrace t.pftrace.gz t.json t.json.gz t.cupti; do
	[ -f "$tmp/$f" ] || continue
	b=$(wc -c <"$tmp/$f")
	awk -v f="$f" -v b="$b" -v k="$kernels" 'BEGIN {printf "  %-14s %12d bytes %8.2f bytes/kernel\n", f, b, b/k}'
done
if command -v python3 >/dev/null 2>&1; then
	python3 "$(dirname "$0")/size_breakdown.py" "$tmp/t.pftrace"
fi
rm -rf "$tmp"
