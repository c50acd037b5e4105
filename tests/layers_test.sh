#!/bin/sh
# The code forms layers, checked on the compiled objects' symbol tables (nm):
#  - inside src/ no two files call each other, directly or round a loop, so each can be read with
#    only the ones below it in mind (tools/scripts/check_layers.sh, on the folders listed below);
#  - the directories of src/ (common, output, format, convert, read, the analyses, ...): no two of
#    them use each other, directly or round a cycle (DESIGN.md: format holds writers, the
#    analyses sit on top);
#  - the readers (src/read) use no writer, the writers (src/format) no reader, the converter no
#    reader, and no reader includes a writer's header (nm cannot see headers);
#  - the folders of the analyses use one another only in these directions, by symbol (nm) and by
#    #include (nm cannot see headers), and nothing below them uses any of them:
#      names      (C++ base names, step names)   uses no analysis
#      stats      (stats sink, summaries, busy)  uses no analysis
#      lines      (GPU time by source line)      may use stats
#      compare    (cuptrace diff)                may use stats, lines, names
#      merge      (merge, rank alignment)        may use stats
#      why        (cuptrace analyze)             may use stats, names
#      rewrite    (cuptrace share)               uses no analysis
#      symbolize  (native frames, libdw)         uses no analysis
#      top        (cuptrace top's aggregator)    may use stats
#    So stats never uses why, merge or compare; merge never uses why; rewrite and symbolize only
#    what is below the analyses (format, read, common).
# Builds each graph "A uses a symbol defined in B", prints it, and fails naming a cycle if there
# is one.
set -u
if ! command -v nm >/dev/null 2>&1; then
	echo "SKIP: nm not found"
	exit 77
fi
objs=${CUPTRACE_BUILD_DIR:?}/CMakeFiles/cuptrace_core.dir/src
# src/symbolize is a library of its own (libdw): its objects are under its target's directory.
symobjs=$CUPTRACE_BUILD_DIR/CMakeFiles/cuptrace_symbolize.dir/src
tmp=$(mktemp -d "${CUPTRACE_TMP:-/tmp}/layers.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail=0

# One line per global symbol of a source file: "D node symbol" where it defines it, "U node
# symbol" where it uses one it does not define; node is the file (or its directory, for the
# directory graph). The sources decide which objects count: a build directory may still hold the
# object of a file since removed.
# The object of src/REL: cuptrace_core's, else cuptrace_symbolize's; empty if neither.
obj_of() { # rel
	if [ -f "$objs/$1.o" ]; then
		echo "$objs/$1.o"
	elif [ -f "$symobjs/$1.o" ]; then
		echo "$symobjs/$1.o"
	fi
}
symbols() { # src-file node
	rel=${1#"$CUPTRACE_SRC"/src/}
	o=$(obj_of "$rel")
	if [ -z "$o" ]; then
		echo "FAIL: no object file $objs/$rel.o (is the build directory CUPTRACE_BUILD_DIR?)" >&2
		return 1
	fi
	nm "$o" >"$tmp/nm" || { echo "FAIL: nm $o" >&2; return 1; }
	# Defined: strong global text, data, bss, read-only and common symbols. Weak ones (W, V)
	# are left out: several files may define them.
	awk -v f="$2" 'NF >= 2 && $(NF-1) == "U" {print "U", f, $NF}
		NF >= 3 && $(NF-1) ~ /^[BCDGRST]$/ {print "D", f, $NF}' "$tmp/nm"
}

# Edges between nodes from a symbols file; symbols defined outside the nodes (libc) are not.
edges() {
	awk '$1 == "D" {def[$3] = $2; next}
		{use[++n] = $2 " " $3}
		END {
			for (i = 1; i <= n; i++) {
				split(use[i], a, " ")
				if ((a[2] in def) && def[a[2]] != a[1])
					print a[1], def[a[2]]
			}
		}' "$1" | sort -u
}

# Prints the graph, then searches it depth-first from every node in name order; a node met again
# while still on the path closes a cycle, printed from that node round to itself.
check_graph() { # title edges-file nodes-file
	echo "$1 -> what it uses"
	awk 'FILENAME == ARGV[1] {out[$1] = out[$1] " " $2; next}
		{print "  " $1 " ->" (($1 in out) ? out[$1] : " (nothing)")}' "$2" "$3"
	awk 'FILENAME == ARGV[1] {nout[$1]++; out[$1, nout[$1]] = $2; next}
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
		END {exit found}' "$2" "$3"
}

# The files: no two call each other, in any layer (shared state lives in files of its own:
# collect_state.c, gpumetrics_state.c).
sh "$CUPTRACE_SRC/tools/scripts/check_layers.sh" "$CUPTRACE_BUILD_DIR" src/inject src/window src/control \
	src/preload src/format src/convert src/read src/output src/common src/names src/stats \
	src/lines src/compare src/merge src/why src/rewrite src/symbolize src/top
case $? in
0) ;;
1) fail=1 ;;
*) exit 1 ;;
esac
# src/convert's files do call each other: none found means nm's output is not read right.
if ! sh "$CUPTRACE_SRC/tools/scripts/check_layers.sh" "$CUPTRACE_BUILD_DIR" src/convert |
	grep -q '^  src/convert/convert.c -> .*src/convert/convert_core.c'; then
	echo "FAIL: no calls between the files of src/convert found: is nm's output what this test expects?"
	fail=1
fi

# The analyses' folders, and which of them each may use (the header says why).
analyses="names stats lines compare merge why rewrite symbolize top"
may_use() { # folder: the analyses it may use
	case $1 in
	lines) echo stats ;;
	compare) echo stats lines names ;;
	merge) echo stats ;;
	why) echo stats names ;;
	top) echo stats ;;
	*) echo ;;
	esac
}
is_analysis() { # folder
	case " $analyses " in
	*" $1 "*) return 0 ;;
	esac
	return 1
}

# The directories of src/ whose files go into cuptrace_core (or cuptrace_symbolize).
: >"$tmp/syms"
: >"$tmp/dirs"
for d in "$CUPTRACE_SRC"/src/*/; do
	d=${d%/}
	d=${d##*/}
	n=0
	for src in "$CUPTRACE_SRC/src/$d"/*.c; do
		[ -n "$(obj_of "$d/${src##*/}")" ] || continue
		symbols "$src" "$d" >>"$tmp/syms" || exit 1
		n=1
	done
	[ $n = 1 ] && echo "$d" >>"$tmp/dirs"
done
edges "$tmp/syms" >"$tmp/edges"
for d in $analyses; do
	grep -qx "$d" "$tmp/dirs" || { echo "FAIL: no object of src/$d in $objs or $symobjs"; exit 1; }
done
check_graph "src: directory" "$tmp/edges" "$tmp/dirs" || fail=1
# Calls across layers the wrong way.
for pair in "read format" "format read" "convert read"; do
	if grep -qx "$pair" "$tmp/edges"; then
		echo "FAIL: src/${pair% *} uses src/${pair#* }"
		fail=1
	fi
done
if grep -n '#include "format/\(perfetto_sink\|json_writer\|formats\)\.h"' \
	"$CUPTRACE_SRC"/src/read/*.[ch]; then
	echo "FAIL: src/read includes a writer's header (above)"
	fail=1
fi
# The analyses' directions, by symbol: an edge from an analysis to another that it may not use,
# or from a folder below them (format, read, common, ...) to any analysis.
while read -r a b; do
	is_analysis "$b" || continue
	if is_analysis "$a"; then
		case " $(may_use "$a") " in
		*" $b "*) continue ;;
		esac
		u=$(may_use "$a")
		echo "FAIL: src/$a uses src/$b (src/$a may use: ${u:-no other analysis})"
	else
		echo "FAIL: src/$a uses src/$b (an analysis: only the command line and other analyses may)"
	fi
	fail=1
done <"$tmp/edges"
# ... and by #include, which nm cannot see (a header's types, inline functions, constants).
for d in "$CUPTRACE_SRC"/src/*/; do
	d=${d%/}
	d=${d##*/}
	for b in $analyses; do
		[ "$b" = "$d" ] && continue
		if is_analysis "$d"; then
			case " $(may_use "$d") " in
			*" $b "*) continue ;;
			esac
		fi
		if grep -rn "#include \"$b/" "$CUPTRACE_SRC/src/$d" >"$tmp/inc"; then
			cat "$tmp/inc"
			echo "FAIL: src/$d includes a header of src/$b (above)"
			fail=1
		fi
	done
done
[ $fail = 0 ] && echo "ok: no circle of files or directories, no call across layers the wrong way"
exit $fail
