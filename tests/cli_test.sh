#!/bin/sh
# The command line's errors and exit codes (no GPU needed): bad options, missing command,
# unwritable output, corrupt and foreign input, truncated captures. Never a crash.
set -u
ct=$CUPTRACE_BIN
tmp=$(mktemp -d "${CUPTRACE_TMP:-/tmp}/cli.XXXXXX")
fail=0 n=0
. "$(dirname "$0")/expect.sh"
expect 0 "usage: cuptrace" "$ct" --help
expect 0 "cuptrace 0" "$ct" --version
expect 2 "unknown command" "$ct" frobnicate
expect 2 "no command given" "$ct" record
expect 2 "bad value for --format: 'xml' (takes perfetto, chrome or capture)" "$ct" record -f xml -- true
expect 2 "bad value for --compress: 'lz4' (takes chunks, gzip or none)" "$ct" record --compress lz4 -- true
expect 2 "bad value for --buffer-size" "$ct" record --buffer-size 12 -- true
expect 2 "bad value for --compress-level: '13' (1 (least CPU) to 12 (smallest); zlib stops at 9)" "$ct" record --compress-level 13 -- true
expect 2 "bad value for CUPTRACE_COMPRESS_LEVEL: '0'" env CUPTRACE_COMPRESS_LEVEL=0 "$ct" record --no-check -o "$tmp/x.pftrace" -- true
expect 2 "bad value for --compress-level: 'x'" "$ct" convert --compress-level x "$CUPTRACE_TEST_DATA/vector_add.cupti" -o "$tmp/o.pftrace"
expect 2 "bad value for --driver: 'some' (takes work, user or all)" "$ct" record --driver some -- true
expect 2 "bad value for --cuda-graphs: 'kernels' (takes node or graph)" "$ct" record --cuda-graphs kernels -- true
expect 2 "bad value for CUPTRACE_CUDA_GRAPHS: 'x'" env CUPTRACE_CUDA_GRAPHS=x "$ct" record --no-check -o "$tmp/x.pftrace" -- true
expect 2 "bad value for --runtime: 'some' (takes filtered, watch or all)" "$ct" record --runtime some -- true
expect 2 "bad value for --stacks-every: '0' (a count from 1 to 1000000)" "$ct" record --stacks native --stacks-every 0 -- true
expect 2 "--stacks-every samples the stacks of --stacks" "$ct" record --stacks-every 4 -- true
expect 0 "no trace was written" env CUPTRACE_STACKS=native "$ct" record --stacks-every 4 --no-check -o "$tmp/x.pftrace" -- true
expect 2 "bad value for --driver: 'some' (takes work, user or all)" "$ct" convert --driver some "$CUPTRACE_TEST_DATA/vector_add.cupti" -o "$tmp/o.pftrace"
expect 2 "bad value for --runtime: 'some' (takes filtered, watch or all)" "$ct" convert --runtime some "$CUPTRACE_TEST_DATA/vector_add.cupti" -o "$tmp/o.pftrace"
expect 2 "takes filtered or all" "$ct" convert --runtime watch "$CUPTRACE_TEST_DATA/vector_add.cupti" -o "$tmp/o.pftrace"
expect 2 "work applies to record" "$ct" convert --driver work "$CUPTRACE_TEST_DATA/vector_add.cupti" -o "$tmp/o.pftrace"
expect 2 "bad value for --sync-records: 'x' (takes callback or cupti)" "$ct" record --sync-records x -- true
expect 2 "bad value for CUPTRACE_SYNC_RECORDS: 'x'" env CUPTRACE_SYNC_RECORDS=x "$ct" record --no-check -o "$tmp/x.pftrace" -- true
# The same settings through the variables the library reads: record refuses a bad one it would
# hand on (one parser, common/options.h; the library itself warns once and takes the default,
# tests/test_options.c). An option given wins over the variable.
expect 2 "bad value for CUPTRACE_DRIVER: 'some' (takes work, user or all)" env CUPTRACE_DRIVER=some "$ct" record --no-check -o "$tmp/x.pftrace" -- true
expect 2 "bad value for CUPTRACE_RUNTIME: 'some' (takes filtered, watch or all)" env CUPTRACE_RUNTIME=some "$ct" record --no-check -o "$tmp/x.pftrace" -- true
expect 2 "bad value for CUPTRACE_BUFFER_SIZE: '12'" env CUPTRACE_BUFFER_SIZE=12 "$ct" record --no-check -o "$tmp/x.pftrace" -- true
expect 0 "no trace was written" env CUPTRACE_DRIVER=some "$ct" record --driver all --no-check -o "$tmp/x.pftrace" -- true
expect 0 "no trace was written" env CUPTRACE_RUNTIME=watch CUPTRACE_DRIVER=all "$ct" record --no-check -o "$tmp/x.pftrace" -- true
expect 1 "cannot write" "$ct" record -o /nonexistent-dir/x.pftrace -- true
# --cuda-graphs graph with capture windows: said once by record, and the program's processes get
# node (CUPTI 13.0 crashes on whole-graph records switched on after graphs exist); the flight
# recorder keeps it.
expect 0 "cuda-graphs graph is not used with capture windows" "$ct" record --cuda-graphs graph \
	--steps 5 --no-check -o "$tmp/x.pftrace" -- sh -c 'echo "graphs=$CUPTRACE_CUDA_GRAPHS"'
grep -q "^graphs=node$" "$tmp/out" || { echo "FAIL: windows: CUPTRACE_CUDA_GRAPHS not node"; cat "$tmp/out"; fail=1; }
expect 0 "graphs=graph" env CUPTRACE_CUDA_GRAPHS=graph "$ct" record --ring 5s --no-check \
	-o "$tmp/x.pftrace" -- sh -c 'echo "graphs=$CUPTRACE_CUDA_GRAPHS"'
! grep -q "is not used" "$tmp/err" || { echo "FAIL: the ring: --cuda-graphs graph refused"; fail=1; }
expect 0 "early=1" "$ct" record --cupti-early --steps 5 --no-check -o "$tmp/x.pftrace" -- \
	sh -c 'echo "early=$CUPTRACE_CUPTI_EARLY"'
expect 1 "not found" "$ct" record --lib /nonexistent/libcuptrace.so -- true
# A library that does not load (here: not an ELF file) is a clear error, not an untraced run.
printf 'not a library' >"$tmp/libbad.so"
expect 1 "cannot load" "$ct" record --no-check --lib "$tmp/libbad.so" -o "$tmp/x.pftrace" -- true
expect 127 "command not found" "$ct" record --no-check -o "$tmp/x.pftrace" -- /nonexistent/command
# A program that never uses CUDA: it runs, there is no trace to show, and the exit status is
# the program's own (record is a prefix to a command line; scripts test that status).
expect 0 "no trace was written" "$ct" record --no-check -o "$tmp/x.pftrace" -- true
# Capture windows that never opened, whether set by an option or a variable; --step-range alone
# only says what a step is (the whole run is traced), so it is not a window.
expect 0 "no capture window opened" "$ct" record --steps 5 --no-check -o "$tmp/x.pftrace" -- true
expect 0 "no capture window opened" env CUPTRACE_STEPS=5 "$ct" record --no-check -o "$tmp/x.pftrace" -- true
expect 0 "no trace was written" "$ct" record --step-range step --no-check -o "$tmp/x.pftrace" -- true
expect 3 "no trace was written" "$ct" record --no-check -o "$tmp/x.pftrace" -- sh -c 'exit 3'
# libcuptrace_preload.so goes first in the program's LD_PRELOAD, before the program's own.
expect 0 "libcuptrace_preload.so:/x.so" env LD_PRELOAD=/x.so "$ct" record --no-check \
	-o "$tmp/x.pftrace" -- sh -c 'echo "$LD_PRELOAD"' 2>/dev/null
# Unknown options and impossible values: usage errors (2), said in one line.
expect 2 "unrecognized option" "$ct" record --bogus -- true
expect 2 "bad value for --buffer-size" "$ct" record --buffer-size 0 -- true
expect 2 "bad value for --buffer-size" "$ct" record --buffer-size 2G -- true
expect 2 "bad value for --flush-ms" "$ct" record --flush-ms -5 -- true
expect 2 "unrecognized option" "$ct" convert --bogus "$CUPTRACE_TEST_DATA/vector_add.cupti"
expect 2 "unrecognized option" "$ct" stats --bogus "$CUPTRACE_TEST_DATA/vector_add.cupti"
# CUPTI missing, or too old (a stand-in libcupti.so.13 that says it is 12.0), found first on
# LD_LIBRARY_PATH: record says so, and what to do, before running anything.
if command -v cc >/dev/null 2>&1; then
	mkdir -p "$tmp/nocupti" "$tmp/oldcupti"
	: >"$tmp/nocupti/libcupti.so.13"
	expect 1 "is CUPTI installed" env LD_LIBRARY_PATH="$tmp/nocupti" "$ct" record --no-check \
		-o "$tmp/x.pftrace" -- true
	echo 'int cuptiGetVersion(unsigned *v) { *v = 120000; return 0; }' >"$tmp/oldcupti/old.c"
	if cc -shared -fPIC -Wl,-soname,libcupti.so.13 -o "$tmp/oldcupti/libcupti.so.13" \
		"$tmp/oldcupti/old.c" 2>/dev/null; then
		expect 1 "version 12.0 (120000); cuptrace needs CUPTI 13.0 or newer" \
			env LD_LIBRARY_PATH="$tmp/oldcupti" "$ct" record --no-check -o "$tmp/x.pftrace" -- true
	fi
	[ -e "$tmp/x.pftrace" ] && { echo "FAIL: a failed record left a file"; fail=1; }
fi
expect 2 "takes one INPUT (got 0)" "$ct" convert
expect 1 "cannot read" "$ct" convert /nonexistent.cupti -o "$tmp/o.pftrace"
head -c 5000 /dev/urandom >"$tmp/garbage.bin"
expect 1 "cannot read $tmp/garbage.bin: not a trace" "$ct" convert "$tmp/garbage.bin" -o "$tmp/o.pftrace"
[ -e "$tmp/o.pftrace" ] && { echo "FAIL: a failed convert left its output"; fail=1; }
printf 'CUPTCAP\000\001\000\000\000\001\374\001\000' >"$tmp/short.cupti"
head -c 3000 /dev/urandom >>"$tmp/short.cupti"
expect 1 "corrupt capture" "$ct" convert "$tmp/short.cupti" -o "$tmp/o.json"
expect 2 "unknown format 'xml'" "$ct" convert "$CUPTRACE_TEST_DATA/vector_add.cupti" -o "$tmp/o.x" -f xml
expect 1 "cannot write" "$ct" convert "$CUPTRACE_TEST_DATA/vector_add.cupti" -o /nonexistent-dir/o.pftrace
# A capture cut short (the traced program was killed) converts up to where it ends.
full=$(wc -c <"$CUPTRACE_TEST_DATA/multi_stream.cupti")
head -c $((full / 2)) "$CUPTRACE_TEST_DATA/multi_stream.cupti" >"$tmp/cut.cupti"
expect 0 "ends early" "$ct" convert "$tmp/cut.cupti" -o "$tmp/cut.pftrace"
expect 0 "Kernels\|kernel" "$ct" stats "$tmp/cut.pftrace"
# stats reads every format it writes, and reports a foreign file clearly.
"$ct" convert "$CUPTRACE_TEST_DATA/vector_add.cupti" -o "$tmp/va.pftrace.gz" 2>/dev/null
expect 0 "vector_add" "$ct" stats --markdown "$tmp/va.pftrace.gz"
expect 1 "cannot read" "$ct" stats "$tmp/garbage.bin"
echo "$n passed, $fail failed"
rm -rf "$tmp"
exit $fail
