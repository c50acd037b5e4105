#!/bin/sh
# The documentation holds together (no GPU needed):
# (a) every relative link of every tracked markdown file resolves: the file is in the repository,
#     the link does not lead out of it, and a #anchor names a heading of the target as GitHub
#     makes anchors (tests/md_links.py);
# (b) README.md has a section per command, a heading naming `cuptrace CMD`, and every option
#     of that command's own help is in its section (the commands from `cuptrace --help`, the
#     options from `cuptrace CMD --help`, so a new command or option is covered);
# (c) README.md stays a front page: at most 600 lines, and the two set-up commands that
#     .ci/run runs are in it as written.
set -u
src=${CUPTRACE_SRC:-$(dirname "$0")/..}
ct=$CUPTRACE_BIN
readme=$src/README.md
fail=0
bad() {
	echo "FAIL: $*"
	fail=1
}

python3 "$src/tests/md_links.py" "$src" || bad "links above do not resolve"

cmds=$("$ct" --help | sed -n '/^commands:/,/^$/p' | awk 'NR > 1 && NF { print $1 }')
nc=$(printf '%s\n' "$cmds" | grep -c .)
[ "$nc" -ge 9 ] || bad "the top-level help lists only $nc commands"
no=0
for c in $cmds; do
	# The section: from its heading to the next heading of the same level or above.
	sec=$(awk -v c="cuptrace $c" '
		/^```/ { code = !code }
		!code && /^#+ / {
			lvl = length($1)
			if (on && lvl <= level) on = 0
			if (!on && index($0, c) && (substr($0, index($0, c) + length(c), 1) ~ /[^a-z_-]|^$/)) {
				on = 1; level = lvl; found = 1
			}
		}
		on { print }
		END { if (!found) exit 1 }' "$readme") || {
		bad "README.md has no heading naming 'cuptrace $c'"
		continue
	}
	opts=$("$ct" "$c" --help | grep -oE '^ +(-[a-zA-Z%], )?--[a-z0-9-]+' | grep -oE -- '--[a-z0-9-]+$')
	for o in $opts; do
		[ "$o" = --help ] && continue
		no=$((no + 1))
		printf '%s\n' "$sec" | grep -qE -- "$o([^a-z0-9-]|\$)" ||
			bad "option $o of 'cuptrace $c' is not in README.md's section for it"
	done
done
[ "$no" -ge 80 ] || bad "only $no command options found in the help; the extraction broke"

lines=$(wc -l <"$readme")
[ "$lines" -le 600 ] || bad "README.md has $lines lines (at most 600: details go beside the code, linked)"
# .ci/run runs these two; README says them the same way.
grep -q '^tools/scripts/setup.sh && tools/scripts/test.sh' "$readme" || bad "README.md lost the test command .ci/run runs"
grep -q 'tools/scripts/setup.sh && tools/scripts/test.sh' "$src/.ci/run" || bad ".ci/run no longer runs setup.sh && test.sh"

[ $fail = 0 ] && echo "readme_links: links resolve; $nc commands with a section, $no options each in its command's section; README.md $lines lines"
exit $fail
