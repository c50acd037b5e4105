#!/bin/sh
# Fuzzes the readers of untrusted input with libFuzzer (clang), under ASan and UBSan: the
# capture reader with the converter behind it, the Perfetto reader and the JSON reader. Seeds:
# tests/data's captures, .pftrace files converted from them in every compression, their Chrome
# JSON (plain and gzip), and tests/data's JSON traces (torch.profiler's), plain and gzip; the
# JSON target also gets a dictionary of JSON and trace-event tokens. First replays every
# input in tests/fuzz/regressions (inputs that once crashed), then fuzzes each target for
# SECONDS (default 60). Any crash, hang, leak or sanitizer report fails (exit 1); the input is
# left in BUILD/fuzz-artifacts, to be added to tests/fuzz/regressions with the fix.
#   tools/scripts/fuzz.sh [SECONDS] [BUILD_DIR]
set -u
cd "$(dirname "$0")/../.."
secs=${1:-60}
build=${2:-build-fuzz}
export PATH="$PATH:/usr/local/cuda/bin"
cc=$(command -v clang || command -v clang-14 || true)
if [ -z "$cc" ]; then
	echo "fuzz: SKIP: clang not found (tools/scripts/setup.sh installs it)"
	exit 0
fi
cmake -S . -B "$build" -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	-DCUPTRACE_FUZZ=ON -DCUPTRACE_WERROR=OFF -DCUPTRACE_EXAMPLES=OFF >/dev/null || exit 1
cmake --build "$build" -j "$(nproc)" --target fuzz_capture fuzz_perfetto fuzz_json cuptrace_cli \
	>/dev/null || exit 1
seeds=$(mktemp -d)
mkdir -p "$seeds/capture" "$seeds/perfetto" "$seeds/json" "$build/fuzz-artifacts"
cp tests/data/*.cupti "$seeds/capture/"
for c in tests/data/vector_add.cupti tests/data/nvtx.cupti tests/data/graphs.cupti; do
	n=$(basename "$c" .cupti)
	for z in chunks gzip none; do
		ASAN_OPTIONS=detect_leaks=0 "$build/cuptrace" convert "$c" --compress $z \
			-o "$seeds/perfetto/$n-$z.pftrace" 2>/dev/null
	done
	for e in json json.gz; do
		ASAN_OPTIONS=detect_leaks=0 "$build/cuptrace" convert "$c" -o "$seeds/json/$n.$e" \
			2>/dev/null
	done
done
for j in tests/data/*.json*; do
	[ -e "$j" ] || continue
	n=$(basename "$j")
	cp "$j" "$seeds/json/$n"
	case $n in
	*.gz) gzip -dc "$j" >"$seeds/json/${n%.gz}" ;;
	*) gzip -c "$j" >"$seeds/json/$n.gz" ;;
	esac
done
# Seeds kept in the repository (a Chrome JSON trace with call stacks in "stack" args).
for t in perfetto json; do
	for f in tests/fuzz/seeds/$t/*; do
		[ -e "$f" ] && cp "$f" "$seeds/$t/seed-$(basename "$f")"
	done
done
# The real torch.profiler traces of the shared folder, where it is present (the size limit
# below keeps the small ones).
ext=../shared/external-traces
for j in "$ext"/*.json "$ext"/*.json.gz; do
	[ -e "$j" ] && cp "$j" "$seeds/json/ext-$(basename "$j")"
done
# Large seeds (torch_stack inflates to 1.6 MB) would spend the budget on a few slow runs and
# raise libFuzzer's input size: only those up to 256 KiB.
find "$seeds/json" -type f -size +256k -delete
passed=0 failed=0
for t in capture perfetto json; do
	bin="$build/fuzz_$t"
	regs=$(ls tests/fuzz/regressions/$t-* 2>/dev/null)
	if [ -n "$regs" ] && ! "$bin" $regs >"$seeds/$t-reg.log" 2>&1; then
		echo "FAIL fuzz_$t: a regression input fails again"; tail -30 "$seeds/$t-reg.log"
		failed=$((failed + 1)); continue
	fi
	mkdir -p "$seeds/corpus-$t"
	dict=""
	[ -f "tests/fuzz/$t.dict" ] && dict="-dict=tests/fuzz/$t.dict"
	if "$bin" $dict -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="$build/fuzz-artifacts/$t-" "$seeds/corpus-$t" "$seeds/$t" \
		>"$seeds/$t.log" 2>&1; then
		echo "ok fuzz_$t: $(grep -o 'stat::number_of_executed_units: *[0-9]*' "$seeds/$t.log" |
			grep -o '[0-9]*$') inputs in ${secs}s, no finding"
		passed=$((passed + 1))
	else
		echo "FAIL fuzz_$t:"; grep -A25 "ERROR\|==ERROR\|runtime error\|Timeout\|leak" \
			"$seeds/$t.log" | head -60
		ls "$build/fuzz-artifacts/"
		failed=$((failed + 1))
	fi
done
rm -rf "$seeds"
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
