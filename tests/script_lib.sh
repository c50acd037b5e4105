# Sourced by the script tests of stats, diff and merge (after they set $tmp): counts checks and
# failures, and checks a command's exit status and message.
fail=0 n=0
ok() { n=$((n + 1)); }
bad() {
	echo "FAIL: $*"
	fail=1
}
# expect WANT-EXIT STDERR-SUBSTRING COMMAND...: stdout goes to $tmp/out, stderr to $tmp/err.
expect() {
	want=$1 msg=$2
	shift 2
	"$@" >"$tmp/out" 2>"$tmp/err"
	got=$?
	if [ "$got" != "$want" ] || ! grep -q -- "$msg" "$tmp/err"; then
		bad "$* -> exit $got (want $want, '$msg'):"
		cat "$tmp/err"
	else
		ok
	fi
}
