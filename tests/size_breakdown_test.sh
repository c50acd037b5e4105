#!/bin/sh
# tools/bench/size_breakdown.py measures what each part of a trace costs by writing the packets
# again as cuptrace does: on a real capture it must find every kernel, reproduce the trace's own
# size byte for byte before it changes anything, and show that each stripped field shrinks it.
set -u
if ! command -v python3 >/dev/null 2>&1; then
	echo "SKIP: python3 not found"
	exit 77
fi
tmp=$(mktemp -d "${CUPTRACE_TMP:-/tmp}/size.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
tool=$CUPTRACE_SRC/tools/bench/size_breakdown.py
fail=0
check() { # what, expected, actual
	if [ "$2" = "$3" ]; then echo "ok   $1: $3"; else echo "FAIL $1: expected $2, got $3"; fail=1; fi
}
# multi_stream: 4 threads x 250 launches (tools/scripts/make_captures.sh), so 1000 kernels.
"$CUPTRACE_BIN" convert "$CUPTRACE_TEST_DATA/multi_stream.cupti" -o "$tmp/ms.pftrace" 2>/dev/null
python3 "$tool" "$tmp/ms.pftrace" >"$tmp/out" 2>&1 || { cat "$tmp/out"; echo "FAIL: size_breakdown exit"; exit 1; }
cat "$tmp/out"
check "kernels" 1000 "$(sed -n 's/.* packets, \([0-9]*\) kernels,.*/\1/p' "$tmp/out")"
check "as written = file size" "$(wc -c <"$tmp/ms.pftrace" | tr -d ' ')" \
	"$(awk '/^  as written/ {print $(NF-5)}' "$tmp/out")"
# Every variant but the first is smaller than the trace.
bad=$(awk '/ per kernel / && !/as written/ && $(NF) + 0 >= 0 {print}' "$tmp/out")
check "every variant smaller" "" "$bad"
# The same trace, gzip'ed whole and written plain, reads the same.
"$CUPTRACE_BIN" convert "$CUPTRACE_TEST_DATA/multi_stream.cupti" -o "$tmp/ms.pftrace.gz" 2>/dev/null
"$CUPTRACE_BIN" convert "$CUPTRACE_TEST_DATA/multi_stream.cupti" -o "$tmp/plain.pftrace" --compress none 2>/dev/null
for f in ms.pftrace.gz plain.pftrace; do
	check "$f: same packets" "$(sed -n 1p "$tmp/out" | sed 's/^[^:]*: //')" \
		"$(python3 "$tool" "$tmp/$f" 2>&1 | sed -n 1p | sed 's/^[^:]*: //')"
done
# --compress-level: the same packets at every level; level 1 spends less CPU on a larger file.
for l in 1 12; do
	"$CUPTRACE_BIN" convert "$CUPTRACE_TEST_DATA/multi_stream.cupti" -o "$tmp/l$l.pftrace" \
		--compress-level $l 2>/dev/null
	check "level $l: same packets" "$(sed -n 1p "$tmp/out" | sed 's/^[^:]*: //')" \
		"$(python3 "$tool" "$tmp/l$l.pftrace" 2>&1 | sed -n 1p | sed 's/^[^:]*: //')"
done
check "level 1 larger than the default 5" 1 \
	"$([ "$(wc -c <"$tmp/l1.pftrace")" -gt "$(wc -c <"$tmp/ms.pftrace")" ] && echo 1 || echo 0)"
# Bad input: a clear message and a non-zero exit.
printf 'not a trace' >"$tmp/bad.pftrace"
if python3 "$tool" "$tmp/bad.pftrace" >"$tmp/err" 2>&1; then
	echo "FAIL bad input: exit 0"; fail=1
else
	check "bad input message" 1 "$(grep -c '^size_breakdown: ' "$tmp/err")"
fi
exit $fail
