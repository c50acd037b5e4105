#!/bin/sh
# Every command's help and its usage errors (no GPU needed):
# - `cuptrace CMD --help` exits 0 with one layout: "usage: cuptrace CMD", then the sections
#   "options:", any option groups, and "exit codes:" last, with codes in it;
# - `cuptrace help CMD` prints the same bytes;
# - a bad option, an option without its value and a bad number each give exit 2 and exactly one
#   line on stderr, "cuptrace CMD: ..." naming the option;
# - a file that is not there gives exit 1 and one line naming the file;
# - a wrong number of arguments says how many it got.
# The commands are taken from the top-level help, so a new command is covered.
set -u
ct=$CUPTRACE_BIN
tmp=$(mktemp -d "${CUPTRACE_TMP:-/tmp}/clihelp.XXXXXX")
fail=0 n=0
bad() {
	echo "FAIL: $*"
	fail=1
}

cmds=$("$ct" --help | sed -n '/^commands:/,/^$/p' | awk 'NR > 1 && NF { print $1 }')
[ "$(printf '%s\n' "$cmds" | grep -c .)" -ge 9 ] || bad "the top-level help lists too few commands: $cmds"

# one_line WANT_RC WORD CMD ARGS...: exit WANT_RC, no stdout, one stderr line that starts with
# "cuptrace CMD:" and holds WORD.
one_line() {
	want=$1 word=$2 cmd=$3
	shift 3
	n=$((n + 1))
	"$ct" "$cmd" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
	rc=$?
	lines=$(grep -c '' "$tmp/err")
	if [ $rc != "$want" ] || [ "$lines" != 1 ] || [ -s "$tmp/out" ] ||
		! head -n1 "$tmp/err" | grep -q "^cuptrace $cmd: " ||
		! grep -qF -- "$word" "$tmp/err"; then
		bad "cuptrace $cmd $* -> exit $rc (want $want), $lines stderr lines (want 1 with 'cuptrace $cmd:' and '$word'):"
		cat "$tmp/err"
	fi
}

for c in $cmds; do
	n=$((n + 1))
	"$ct" "$c" --help >"$tmp/h1" 2>"$tmp/e1"
	rc=$?
	[ $rc = 0 ] && [ ! -s "$tmp/e1" ] || bad "$c --help: exit $rc, stderr: $(cat "$tmp/e1")"
	"$ct" help "$c" >"$tmp/h2" 2>&1 || bad "help $c failed"
	cmp -s "$tmp/h1" "$tmp/h2" || bad "'cuptrace help $c' differs from 'cuptrace $c --help'"
	head -n1 "$tmp/h1" | grep -q "^usage: cuptrace $c " || bad "$c --help: first line $(head -n1 "$tmp/h1")"
	# The headings: lines at column 0 ending in ':' after the usage and its paragraph.
	heads=$(grep -E '^[a-zA-Z].*:$' "$tmp/h1" | grep -v '^usage:' | tr '\n' '|')
	case "$heads" in
	options:\|*exit\ codes:\|) ;;
	*) bad "$c --help: headings '$heads' (want options: first, exit codes: last)" ;;
	esac
	sed -n '/^exit codes:$/,$p' "$tmp/h1" | grep -qE '^  ([0-9]+|N) ' ||
		bad "$c --help: no exit code listed"
	grep -qE '^  2 +bad usage' "$tmp/h1" || bad "$c --help: exit code 2 (bad usage) not listed"
	# Each option line of the help: "  -x, --name ARG  text" or "      --name ARG  text".
	grep -qE '^  -h, --help +this help$' "$tmp/h1" || bad "$c --help: no -h, --help line"
	one_line 2 "--no-such-option" "$c" --no-such-option
	one_line 2 "-%" "$c" -%
done

# An option that needs a value, given none (at the end of the command line).
one_line 2 "--output" record --output
one_line 2 "-o" convert -o
one_line 2 "--top" diff --top
one_line 2 "--duration" trigger --duration
one_line 2 "--help" stats --help=yes

# A bad number, named with its option.
one_line 2 "--buffer-size" record --buffer-size abc -- true
one_line 2 "--compress-level" convert --compress-level abc in.cupti -o "$tmp/o.pftrace"
one_line 2 "--top" diff --top abc a b
one_line 2 "--steps" trigger --steps abc 1
one_line 2 "--gap-us" analyze --gap-us abc a
one_line 2 "--tiny-us" analyze -t abc a
one_line 2 "--top" analyze -n -3 a
one_line 2 "--max-size" share --max-size abc a -o "$tmp/o.pftrace"
one_line 2 "--fail-above" diff --fail-above abc a b

# A file that is not there: one line naming it.
nf=$tmp/not-there.pftrace
one_line 1 "$nf" stats "$nf"
one_line 1 "$nf" stats --json "$nf"
one_line 1 "$nf" analyze "$nf"
one_line 1 "$nf" diff "$nf" "$nf"
one_line 1 "$nf" convert "$nf" -o "$tmp/o.pftrace"
one_line 1 "$nf" symbolize "$nf" -o "$tmp/o.pftrace"
one_line 1 "$nf" share "$nf" -o "$tmp/o.pftrace"
one_line 1 "$nf" merge --side-by-side "$nf" "$nf" -o "$tmp/o.pftrace"
# A file that is no trace: one line naming it, with the reader's reason.
printf 'not a trace at all' >"$tmp/junk.bin"
one_line 1 "$tmp/junk.bin: not a trace" stats "$tmp/junk.bin"
one_line 1 "$tmp/junk.bin: not a trace" analyze "$tmp/junk.bin"

# A wrong number of arguments says what is wrong.
one_line 2 "needs at least two traces (got 0)" merge
one_line 2 "needs at least two traces (got 1)" merge --side-by-side a -o "$tmp/o.pftrace"
one_line 2 "needs at least one trace (got 0)" merge --ranks -o "$tmp/o.pftrace"
one_line 2 "needs the processes' PIDs or --job" trigger
one_line 2 "takes one of --duration, --steps, --stop, --dump (got 2)" trigger --stop --dump 1
one_line 2 "takes one TRACE (got 0)" stats
one_line 2 "takes one TRACE (got 2)" stats a b
one_line 2 "needs two traces, BASE and NEW (got 0)" diff
one_line 2 "needs at least one TRACE (got 0)" analyze
one_line 2 "takes one INPUT (got 0)" convert
one_line 2 "takes one INPUT (got 0)" symbolize -o "$tmp/o.pftrace"
one_line 2 "takes one TRACE (got 0)" share -o "$tmp/o.pftrace"
one_line 2 "no command given" record
one_line 2 "takes one command (got 2)" help stats diff
one_line 2 "unknown command 'frobnicate'" help frobnicate

rm -rf "$tmp"
[ $fail = 0 ] && echo "cli_help: $n checks passed"
exit $fail
