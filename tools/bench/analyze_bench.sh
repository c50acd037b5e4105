#!/bin/sh
# Speed and memory of the trace readers and `cuptrace analyze` (README "Why is it slow: analyze").
#   tools/bench/analyze_bench.sh BUILD_DIR [kernels] [json MB] [repetitions]
# Generates a cuptrace trace of N kernels (tests/test_analyze --gen: one stream, a launch per
# kernel with its flow, an op range per 100 launches, a ProfilerStep per 10,000) and a
# torch.profiler-like JSON of about M megabytes (tools/bench/gen_torch_json.py), then runs
# `stats` and `analyze` on each and prints the median wall time, user+sys CPU time and the peak
# RSS (GNU time's maximum resident set size). Build in Release for numbers worth quoting.
set -eu
build=$(cd "$1" && pwd)
kernels=${2:-1000000}
mb=${3:-100}
reps=${4:-3}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ -x /usr/bin/time ] || { echo "needs GNU time (/usr/bin/time)" >&2; exit 1; }

"$build/tests/test_analyze" --gen "$tmp/k.pftrace" "$kernels"
python3 "$here/gen_torch_json.py" "$tmp/t.json" "$mb"
printf '%-34s %8s %10s %10s %9s\n' input command "wall s" "cpu s" "peak MB"
for input in k.pftrace t.json; do
	size=$(wc -c <"$tmp/$input")
	for cmd in stats analyze; do
		: >"$tmp/runs"
		for r in $(seq "$reps"); do
			/usr/bin/time -f '%e %U %S %M' -o "$tmp/one" \
				"$build/cuptrace" "$cmd" "$tmp/$input" >/dev/null
			cat "$tmp/one" >>"$tmp/runs"
		done
		# median by wall time
		sort -n "$tmp/runs" | awk -v n="$reps" -v inp="$input" -v c="$cmd" -v sz="$size" '
			{ w[NR] = $1; cpu[NR] = $2 + $3; rss[NR] = $4 }
			END { m = int((n + 1) / 2);
			      printf "%-34s %8s %10.2f %10.2f %9.0f\n",
			             sprintf("%s (%.1f MB)", inp, sz / 1e6), c, w[m], cpu[m],
			             rss[m] / 1024 }'
	done
done
echo "(kernels: $kernels; JSON: $(grep -c '"cat": "kernel"' "$tmp/t.json") kernels)"
