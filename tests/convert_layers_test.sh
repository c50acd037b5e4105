#!/bin/sh
# The files of src/convert form layers (src/convert/convert_internal.h): no two of them may call
# each other, directly or round a cycle, so each can be read with only the ones below it in mind.
# Builds the graph "file A uses a symbol defined in file B" from the compiled objects' symbol
# tables (nm), prints it, and fails naming the cycle if there is one.
set -u
if ! command -v nm >/dev/null 2>&1; then
	echo "SKIP: nm not found"
	exit 77
fi
objs=${CUPTRACE_BUILD_DIR:?}/CMakeFiles/cuptrace_core.dir/src/convert
tmp=$(mktemp -d "${CUPTRACE_TMP:-/tmp}/layers.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# One line per global symbol: "D file symbol" where a file defines it, "U file symbol" where it
# uses one it does not define. The sources decide which objects count: a build directory may
# still hold the object of a file since removed.
for src in "$CUPTRACE_SRC"/src/convert/*.c; do
	f=${src##*/}
	if [ ! -f "$objs/$f.o" ]; then
		echo "FAIL: no object file $objs/$f.o (is the build directory CUPTRACE_BUILD_DIR?)"
		exit 1
	fi
	nm "$objs/$f.o" >"$tmp/nm" || { echo "FAIL: nm $objs/$f.o"; exit 1; }
	# Defined: strong global text, data, bss, read-only and common symbols. Weak ones (W, V)
	# are left out: several files may define them.
	awk -v f="$f" 'NF >= 2 && $(NF-1) == "U" {print "U", f, $NF}
		NF >= 3 && $(NF-1) ~ /^[BCDGRST]$/ {print "D", f, $NF}' "$tmp/nm" >>"$tmp/syms"
	echo "$f" >>"$tmp/files"
done

# Edges between files; symbols defined outside src/convert (libc, common/, format/) are not.
awk '$1 == "D" {def[$3] = $2; next}
	{use[++n] = $2 " " $3}
	END {
		for (i = 1; i <= n; i++) {
			split(use[i], a, " ")
			if ((a[2] in def) && def[a[2]] != a[1])
				print a[1], def[a[2]]
		}
	}' "$tmp/syms" | sort -u >"$tmp/edges"
if [ ! -s "$tmp/edges" ]; then
	echo "FAIL: no calls between the files found: is nm's output what this test expects?"
	exit 1
fi

echo "src/convert: file -> the files whose functions or data it uses"
awk 'NR == FNR {out[$1] = out[$1] " " $2; next}
	{print "  " $1 " ->" (($1 in out) ? out[$1] : " (nothing)")}' "$tmp/edges" "$tmp/files"

# Depth-first search from every file in name order; a file met again while still on the path
# closes a cycle, printed from that file round to itself.
awk 'NR == FNR {nout[$1]++; out[$1, nout[$1]] = $2; next}
	function report(v,   k, s, i) {
		for (k = depth; k > 0 && path[k] != v; k--)
			;
		s = path[k]
		for (i = k + 1; i <= depth; i++)
			s = s " -> " path[i]
		print "FAIL: cycle: " s " -> " v
	}
	function visit(u,   i, v) {
		state[u] = 1
		path[++depth] = u
		for (i = 1; i <= nout[u]; i++) {
			v = out[u, i]
			if (state[v] == 1) {
				report(v)
				return 1
			}
			if (state[v] == 0 && visit(v))
				return 1
		}
		depth--
		state[u] = 2
		return 0
	}
	!($1 in state) {state[$1] = 0}
	$1 in state && state[$1] == 0 && visit($1) {found = 1; exit}
	END {exit found}' "$tmp/edges" "$tmp/files" || exit 1
echo "ok: no cycle"
