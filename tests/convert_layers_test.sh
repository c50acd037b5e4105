#!/bin/sh
# The files of each layer form layers of their own (src/convert/convert_internal.h): no two of
# them may call each other, directly or round a cycle, so each can be read with only the ones
# below it in mind. And the layers call each other one way (shared/DESIGN.md): the readers
# (src/read) use no writer, the writers (src/format) no reader, the converter no reader.
# Builds the graph "file A uses a symbol defined in file B" from the compiled objects' symbol
# tables (nm), prints it per layer, and fails naming the cycle or the call across layers.
set -u
if ! command -v nm >/dev/null 2>&1; then
	echo "SKIP: nm not found"
	exit 77
fi
objs=${CUPTRACE_BUILD_DIR:?}/CMakeFiles/cuptrace_core.dir/src
tmp=$(mktemp -d "${CUPTRACE_TMP:-/tmp}/layers.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# The layers whose files are checked for cycles among themselves; common/ and output/ are
# leaves that every layer may use. format/ is read for the calls across layers only: its
# Perfetto writer and encoder still call each other.
layers="convert read"
# Calls that must not exist: "FROM TO" where each is a layer or layer/file.c (one a line).
forbidden="read format/perfetto_writer.c
read format/perfetto_encode.c
read format/chrome_writer.c
read format/json_writer.c
read format/sink_open.c
format read
convert read"

# One line per global symbol: "D file symbol" where a file defines it, "U file symbol" where it
# uses one it does not define; file is layer/name.c. The sources decide which objects count: a
# build directory may still hold the object of a file since removed.
for layer in $layers format common output; do
	for src in "$CUPTRACE_SRC"/src/$layer/*.c; do
		f=$layer/${src##*/}
		if [ ! -f "$objs/$f.o" ]; then
			echo "FAIL: no object file $objs/$f.o (is the build directory CUPTRACE_BUILD_DIR?)"
			exit 1
		fi
		nm "$objs/$f.o" >"$tmp/nm" || { echo "FAIL: nm $objs/$f.o"; exit 1; }
		# Defined: strong global text, data, bss, read-only and common symbols. Weak ones (W,
		# V) are left out: several files may define them.
		awk -v f="$f" 'NF >= 2 && $(NF-1) == "U" {print "U", f, $NF}
			NF >= 3 && $(NF-1) ~ /^[BCDGRST]$/ {print "D", f, $NF}' "$tmp/nm" >>"$tmp/syms"
		echo "$f" >>"$tmp/files"
	done
done

# Edges between files; symbols defined outside src (libc, zlib, protobuf-c) are not.
awk '$1 == "D" {def[$3] = $2; next}
	{use[++n] = $2 " " $3}
	END {
		for (i = 1; i <= n; i++) {
			split(use[i], a, " ")
			if ((a[2] in def) && def[a[2]] != a[1])
				print a[1], def[a[2]]
		}
	}' "$tmp/syms" | sort -u >"$tmp/edges"
if ! grep -q '^convert/[^ ]* convert/' "$tmp/edges"; then
	echo "FAIL: no calls between the converter's files found: is nm's output what this test expects?"
	exit 1
fi

fail=0
echo "$forbidden" | while read -r from to; do
	awk -v from="$from" -v to="$to" '
		function in_(file, what) { return file == what || index(file, what "/") == 1 }
		in_($1, from) && in_($2, to) { print "FAIL: " $1 " uses " $2 " (" from " must not use " to ")"; bad = 1 }
		END { exit bad }' "$tmp/edges" || echo x >>"$tmp/bad"
done
[ -s "$tmp/bad" ] && fail=1

for layer in $layers; do
	grep "^$layer/" "$tmp/files" >"$tmp/lfiles"
	awk -v l="$layer/" 'index($1, l) == 1 && index($2, l) == 1' "$tmp/edges" >"$tmp/ledges"
	echo "src/$layer: file -> the files of src/$layer whose functions or data it uses"
	awk 'NR == FNR {out[$1] = out[$1] " " $2; next}
		{print "  " $1 " ->" (($1 in out) ? out[$1] : " (nothing)")}' "$tmp/ledges" "$tmp/lfiles"

	# Depth-first search from every file in name order; a file met again while still on the
	# path closes a cycle, printed from that file round to itself.
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
		END {exit found}' "$tmp/ledges" "$tmp/lfiles" || fail=1
done

# The same rule for headers, which nm cannot see: no reader includes a writer's header.
if grep -n '#include "format/\(perfetto_writer_internal\|json_writer\|formats\)\.h"' \
	"$CUPTRACE_SRC"/src/read/*.[ch]; then
	echo "FAIL: src/read includes a writer's header (above)"
	fail=1
fi
[ $fail = 0 ] && echo "ok: no cycle in $layers, no call across layers the wrong way"
exit $fail
