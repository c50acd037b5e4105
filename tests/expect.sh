# Sourced by the script tests (not a test itself): expect WANT-EXIT WANT-OUTPUT COMMAND...
# runs COMMAND, and counts a pass in $n if it exits WANT-EXIT and prints WANT-OUTPUT (a grep
# pattern; empty: anything) on stdout or stderr; else prints what it did and sets fail=1.
# Needs $tmp (a scratch directory), $n and $fail.
expect() {
	want=$1 msg=$2
	shift 2
	"$@" >"$tmp/out" 2>"$tmp/err"
	got=$?
	if [ "$got" != "$want" ] || { [ -n "$msg" ] && ! grep -q -- "$msg" "$tmp/err" "$tmp/out"; }; then
		echo "FAIL: $* -> exit $got (want $want, and \"$msg\"), output:"
		head -20 "$tmp/err" "$tmp/out"
		fail=1
	else
		n=$((n + 1))
	fi
}
