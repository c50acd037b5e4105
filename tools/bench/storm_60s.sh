#!/bin/sh
# The launch storm under `cuptrace record` (run on a GPU machine): examples/launch_storm, 4 threads
# launching tiny kernels back to back for 60 s (issue 24: no record dropped, memory bounded, the
# tracer's CPU known). Prints the kernels launched (the program's count), the kernels in the
# trace (slices of category "kernel", from `cuptrace stats --json`), the records dropped, and the
# summary's lines on the tracer's CPU and the CUPTI buffers, with the peak RSS of the process.
#   tools/bench/storm_60s.sh BUILD_DIR [seconds] [threads] [trace path]
# Exits 1 if the counts differ or a record was dropped.
set -eu
build=$(cd "${1:?build dir}" && pwd)
secs=${2:-60}
threads=${3:-4}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trace=${4:-$tmp/storm.pftrace}
ex="$build/examples/launch_storm"
[ -x "$ex" ] || { echo "storm_60s: $ex not built (needs nvcc: CUPTRACE_EXAMPLES)" >&2; exit 2; }
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
	echo "storm_60s: no GPU here: skipped"
	exit 0
fi
# /usr/bin/time -v gives the peak RSS where it exists; the storm runs the same without it.
timev=""
[ -x /usr/bin/time ] && timev="/usr/bin/time -v -o $tmp/time.txt"
$timev "$build/cuptrace" record -o "$trace" -- "$ex" "$threads" "$secs" "$tmp/count" \
	>/dev/null 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
launched=$(cat "$tmp/count")
"$build/cuptrace" stats --json "$trace" >"$tmp/stats.json"
read -r in_trace cupti_drop our_drop <<EOT
$(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
k = sum(c["slices"] for c in d["categories"] if c["category"] == "kernel")
m = d["metadata"]
print(k, m.get("dropped_records_cupti", "?"), m.get("dropped_records_cuptrace", "?"))
' "$tmp/stats.json")
EOT
echo "launch_storm: $threads threads, $secs s"
echo "kernels launched:   $launched"
echo "kernels in trace:   $in_trace"
echo "dropped records:    $cupti_drop by CUPTI, $our_drop by cuptrace"
grep -E "tracer CPU|CUPTI buffers|dropped records" "$tmp/err" | sed 's/^/summary: /'
[ -f "$tmp/time.txt" ] && grep -E "Maximum resident|Elapsed|User time|System time" "$tmp/time.txt" |
	sed 's/^[[:space:]]*/time: /'
echo "trace: $(wc -c <"$trace") bytes, $(awk -v b="$(wc -c <"$trace")" -v k="$in_trace" \
	'BEGIN { if (k > 0) printf "%.2f", b / k; else print "?" }') bytes per kernel"
[ "$launched" = "$in_trace" ] && [ "$cupti_drop" = 0 ] && [ "$our_drop" = 0 ] || {
	echo "storm_60s: FAILED: counts differ or records were dropped"
	exit 1
}
