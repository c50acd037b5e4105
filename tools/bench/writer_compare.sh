#!/bin/sh
# Checks that a change to the writer kept the meaning of its output and did not grow it: every
# input in tests/data is converted to .pftrace by two builds (before, after); the two traces must
# give the same `cuptrace stats --json` and the same events (each converted to Chrome JSON by the
# after build), and the after trace must not be larger. Prints one line per input.
#   tools/bench/writer_compare.sh BEFORE_BUILD AFTER_BUILD [DATA_DIR]
# Exits 1 if any input differs or grew.
set -u
before=${1:?before build dir}
after=${2:?after build dir}
data=${3:-$(dirname "$0")/../../tests/data}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bad=0
tb=0
ta=0
printf '%-32s %10s %10s %s\n' input before after result
for in in "$data"/*.cupti "$data"/*.json "$data"/*.json.gz; do
	[ -f "$in" ] || continue
	n=$(basename "$in")
	"$before/cuptrace" convert "$in" -o "$tmp/b.pftrace" >/dev/null 2>"$tmp/b.err" ||
		{ printf '%-32s not a trace (before build refuses it): skipped\n' "$n"; continue; }
	"$after/cuptrace" convert "$in" -o "$tmp/a.pftrace" >/dev/null 2>"$tmp/a.err" ||
		{ printf '%-32s after build failed to convert\n' "$n"; bad=1; continue; }
	res=same
	"$after/cuptrace" stats --json "$tmp/b.pftrace" >"$tmp/b.stats" 2>/dev/null
	"$after/cuptrace" stats --json "$tmp/a.pftrace" >"$tmp/a.stats" 2>/dev/null
	cmp -s "$tmp/b.stats" "$tmp/a.stats" || res="STATS DIFFER"
	"$after/cuptrace" convert "$tmp/b.pftrace" -o "$tmp/b.json" >/dev/null 2>&1
	"$after/cuptrace" convert "$tmp/a.pftrace" -o "$tmp/a.json" >/dev/null 2>&1
	cmp -s "$tmp/b.json" "$tmp/a.json" || res="$res, EVENTS DIFFER"
	sb=$(wc -c <"$tmp/b.pftrace")
	sa=$(wc -c <"$tmp/a.pftrace")
	[ "$sa" -le "$sb" ] || res="$res, LARGER"
	[ "$res" = same ] || bad=1
	tb=$((tb + sb))
	ta=$((ta + sa))
	printf '%-32s %10d %10d %s\n' "$n" "$sb" "$sa" "$res"
done
printf '%-32s %10d %10d\n' total "$tb" "$ta"
exit $bad
