#!/bin/sh
# The documentation keeps up with the code (no GPU needed):
# (a) every CUPTRACE_* variable the code reads is in include/cuptrace.h (the one list, with what
#     each means) and in README.md. The names are taken from the sources, not from a list kept
#     by hand: every string literal that is exactly a CUPTRACE_* name, in C and Python, which is
#     how each way of reading one names it: getenv("CUPTRACE_X"), a row of the settings table
#     (src/common/options.c, read through getenv(s->env)), and
#     os.environ.get("CUPTRACE_X") in the Python hook. tools/bench is left out: its
#     CUPTRACE_FLOOR_* knobs belong to the benchmark's own CUPTI floor library, not to cuptrace.
# (b) every option of the command line's option table is in README.md, the list coming from
#     the binary itself (`cuptrace help --options`, made from the table).
set -u
src=${CUPTRACE_SRC:-$(dirname "$0")/..}
ct=$CUPTRACE_BIN
fail=0
bad() {
	echo "FAIL: $*"
	fail=1
}

names=$(find "$src/src" "$src/tools/cli" \( -name '*.c' -o -name '*.h' -o -name '*.py' \) \
	-exec grep -ohE "[\"']CUPTRACE_[A-Z0-9_]*[A-Z0-9][\"']" {} + | tr -d "\"'" | sort -u)
n=$(printf '%s\n' "$names" | grep -c .)
# A floor: an extraction that finds nothing (sources moved, quoting changed) must not pass.
[ "$n" -ge 50 ] || bad "only $n CUPTRACE_* names found in the sources; the extraction broke"
# Every way the code reads a variable by a name it computes must use a name found above: a
# getenv of anything but a literal or a settings row is flagged, so a new way is looked at.
odd=$(grep -rnE '(secure_)?getenv\(' "$src/src" "$src/tools/cli" --include='*.c' |
	grep -vE 'getenv\("[A-Z0-9_]+"\)|getenv\(s->env\)|getenv\(name\)|getenv\(vars\[i\]\[1\]\)' |
	grep -v '^[^:]*:[0-9]*: *\*' || true)
[ -z "$odd" ] || bad "getenv of a computed name the test does not know (extend its extraction):
$odd"
for v in $names; do
	grep -qw "$v" "$src/include/cuptrace.h" || bad "$v is read by the code but not in include/cuptrace.h"
	grep -qw "$v" "$src/README.md" || bad "$v is read by the code but not in README.md"
done
opts=$("$ct" help --options) || bad "cuptrace help --options failed"
m=$(printf '%s\n' "$opts" | grep -c '^--')
[ "$m" -ge 60 ] || bad "only $m options listed by 'cuptrace help --options'"
for o in $opts; do
	grep -qE -- "$o([^a-z0-9-]|\$)" "$src/README.md" || bad "option $o is not in README.md"
done
[ $fail = 0 ] && echo "cli_docs: $n variables in include/cuptrace.h and README.md, $m options in README.md"
exit $fail
