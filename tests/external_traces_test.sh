#!/bin/sh
# Real torch.profiler / Chrome JSON traces from other projects (../shared/external-traces, see
# its SOURCES.md; never copied into the repository): stats, convert, diff, merge and share run
# over every one of them (under ASan and UBSan in the sanitized build), and stats --json is
# checked against an independent reading of the JSON (tests/kineto_check.py): kernel count,
# GPU busy time (union of kernels, copies and memsets per device) and flow arrows as Perfetto
# draws them. A file that is no trace (PyTorch's execution graph) must be refused.
set -u
ct=$CUPTRACE_BIN
src=${CUPTRACE_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
ext=${CUPTRACE_EXTERNAL_TRACES:-$src/../shared/external-traces}
if [ ! -d "$ext" ]; then
	echo "SKIP: $ext is absent (the shared folder of real traces)"
	exit 77
fi
if ! command -v python3 >/dev/null 2>&1; then
	echo "SKIP: python3 not found (needed for the independent reading)"
	exit 77
fi
tmp=$(mktemp -d "${CUPTRACE_TMP:-/tmp}/external.XXXXXX")
. "$src/tests/script_lib.sh"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}

# What stats --json says, in the checker's terms.
summary() {
	python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
print(json.dumps({"kernels": sum(n["count"] for n in d["names"] if n["category"] == "kernel"),
                  "busy_ns": d["gpu_busy_ns"], "flows": d["flows"]["complete"]}, sort_keys=True))
' "$1"
}

for f in "$ext"/*.json "$ext"/*.json.gz; do
	[ -e "$f" ] || continue
	b=$(basename "$f")
	case $b in
	hta_execution_trace_et.*)
		# Not a trace at all: refused, with a message naming what it was taken for.
		expect 1 "JSON" "$ct" stats "$f"
		continue
		;;
	esac
	if ! "$ct" stats --json "$f" >"$tmp/s.json" 2>"$tmp/err"; then
		bad "stats $b"; cat "$tmp/err"; continue
	fi
	want=$(python3 "$src/tests/kineto_check.py" "$f" | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(json.dumps({k: d[k] for k in ("kernels", "busy_ns", "flows")}, sort_keys=True))')
	got=$(summary "$tmp/s.json")
	if [ "$got" != "$want" ]; then bad "$b: stats $got, independent reading $want"; else ok; fi
	# The same numbers after a round trip through Perfetto's format.
	if ! "$ct" convert "$f" -o "$tmp/c.pftrace" 2>"$tmp/err" ||
		! "$ct" stats --json "$tmp/c.pftrace" >"$tmp/c.json" 2>>"$tmp/err"; then
		bad "convert $b"; cat "$tmp/err"; continue
	fi
	got=$(summary "$tmp/c.json")
	if [ "$got" != "$want" ]; then bad "$b: converted $got, independent reading $want"; else ok; fi
	# diff against itself: nothing changed, nothing fails.
	if ! "$ct" diff --fail-above 1 "$f" "$f" >"$tmp/d.txt" 2>"$tmp/err"; then
		bad "diff $b with itself"; cat "$tmp/err"
	else
		ok
	fi
	if ! "$ct" share "$f" -o "$tmp/sh.json" >/dev/null 2>"$tmp/err"; then
		bad "share $b"; cat "$tmp/err"
	else
		ok
	fi
	if ! "$ct" merge --side-by-side "$f" "$tmp/c.pftrace" -o "$tmp/m.pftrace" 2>"$tmp/err"; then
		bad "merge $b"; cat "$tmp/err"
	else
		ok
	fi
done
echo "$n checks over $ext"
[ $fail = 0 ] && rm -rf "$tmp"
exit $fail
