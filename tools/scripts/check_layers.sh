#!/bin/sh
# Checks that no two source files call each other, directly or round a loop, on the compiled
# objects' symbol tables (nm): usage `tools/scripts/check_layers.sh BUILD_DIR DIR...`, DIR being folders
# of the repository (src/format src/convert ...). Every .c file of every DIR is one node; file A
# uses file B where A's object has an undefined (U) symbol that B's object defines. The graph
# spans all the DIRs given, so a loop through two folders is found too. Prints the graph, then
# each strongly connected component of more than one file with the symbols of its edges, and
# exits 1 if there is one (0 if none, 2 on a usage or build problem).
set -u
if [ $# -lt 2 ]; then
	echo "usage: $0 BUILD_DIR DIR..." >&2
	exit 2
fi
if ! command -v nm >/dev/null 2>&1; then
	echo "check_layers: nm not found" >&2
	exit 2
fi
build=$1
shift
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/check_layers.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
: >"$tmp/syms"
: >"$tmp/files"

# A source's object: CMake puts src/x/y.c of target T in BUILD/CMakeFiles/T.dir/src/x/y.c.o. A
# file built into several targets (same flags) has the same symbols in each: the first will do.
# The sources decide which objects count: a build directory may still hold a removed file's.
for dir in "$@"; do
	dir=${dir%/}
	if [ ! -d "$root/$dir" ]; then
		echo "check_layers: no folder $root/$dir" >&2
		exit 2
	fi
	for src in "$root/$dir"/*.c; do
		[ -f "$src" ] || continue
		rel=${src#"$root"/}
		obj=$(ls "$build"/CMakeFiles/*.dir/"$rel".o 2>/dev/null | head -n 1)
		if [ -z "$obj" ]; then
			echo "check_layers: no object file of $rel under $build/CMakeFiles (built?)" >&2
			exit 2
		fi
		nm "$obj" >"$tmp/nm" || { echo "check_layers: nm $obj failed" >&2; exit 2; }
		# Defined: strong global text, data, bss, read-only and common symbols. Weak ones (W,
		# V) are left out: several files may define them.
		awk -v f="$rel" 'NF >= 2 && $(NF-1) == "U" {print "U", f, $NF}
			NF >= 3 && $(NF-1) ~ /^[BCDGRST]$/ {print "D", f, $NF}' "$tmp/nm" >>"$tmp/syms"
		echo "$rel" >>"$tmp/files"
	done
done

# "A B symbol" for every use across files; symbols defined outside the nodes (libc) are not.
awk '$1 == "D" {def[$3] = $2; next}
	{use[++n] = $2 " " $3}
	END {
		for (i = 1; i <= n; i++) {
			split(use[i], a, " ")
			if ((a[2] in def) && def[a[2]] != a[1])
				print a[1], def[a[2]], a[2]
		}
	}' "$tmp/syms" | sort -u >"$tmp/uses"

echo "file -> the files it uses"
awk 'FILENAME == ARGV[1] {if (!(($1, $2) in seen)) {seen[$1, $2] = 1; out[$1] = out[$1] " " $2}; next}
	{print "  " $1 " ->" (($1 in out) ? out[$1] : " (nothing)")}' "$tmp/uses" "$tmp/files"

# Tarjan's strongly connected components; a component of more than one file is a circle.
awk 'FILENAME == ARGV[1] {
		if (!(($1, $2) in edge)) {
			edge[$1, $2] = 1
			nout[$1]++
			out[$1, nout[$1]] = $2
		}
		if (($1, $2) in sym)
			sym[$1, $2] = sym[$1, $2] ", " $3
		else
			sym[$1, $2] = $3
		next
	}
	function connect(v,   i, w, k, n, members) {
		index_of[v] = low[v] = ++counter
		stack[++sp] = v
		on_stack[v] = 1
		for (i = 1; i <= nout[v]; i++) {
			w = out[v, i]
			if (!(w in index_of)) {
				connect(w)
				if (low[w] < low[v])
					low[v] = low[w]
			} else if (on_stack[w] && index_of[w] < low[v]) {
				low[v] = index_of[w]
			}
		}
		if (low[v] != index_of[v])
			return
		n = 0
		do {
			w = stack[sp--]
			on_stack[w] = 0
			members[++n] = w
		} while (w != v)
		if (n < 2)
			return
		circles++
		printf "FAIL: circle of %d files:", n
		for (k = n; k >= 1; k--)
			printf " %s", members[k]
		printf "\n"
		for (k = n; k >= 1; k--)
			for (i = 1; i <= n; i++)
				if ((members[k], members[i]) in edge)
					print "  " members[k] " -> " members[i] " (" sym[members[k], members[i]] ")"
	}
	!($1 in index_of) {connect($1)}
	END {
		if (circles)
			exit 1
		print "ok: no two files call each other, directly or round a loop"
	}' "$tmp/uses" "$tmp/files"
