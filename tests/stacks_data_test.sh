#!/bin/sh
# Native call stacks symbolized on the CPU from a capture recorded on a GPU (H100):
# tests/data/stacks_native.cupti is `record --stacks native --capture` of
# tests/data/stacks_native/stacks_prog.stripped (tests/stacks_prog.c, stripped, with a separate
# debug file found through its debuglink). Copied to a fresh directory first, so the recorded
# paths do not exist and only --symbol-dir finds the files. Each memset and copy must carry
# c <- b <- a <- main at the source lines of tests/stacks_prog.c, found here in its text.
set -eu
ct=${CUPTRACE_BIN:?} src=${CUPTRACE_SRC:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r "$src/tests/data/stacks_native" "$src/tests/data/stacks_native.cupti" "$tmp/"
cd "$tmp"
"$ct" convert --symbol-dir "$tmp/stacks_native" stacks_native.cupti -o out.json 2>conv.err
if grep -q "built without libdw" conv.err; then
	echo "SKIP: this cuptrace was built without libdw (elfutils): no symbolization"
	exit 77
fi
# Without libdw.so.1 at run time (CUPTRACE_LIBDW_NAME, a test hook, names a missing library):
# one warning, the trace written all the same with its native frames as they were, exit 0.
CUPTRACE_LIBDW_NAME=libcuptrace-test-no-libdw.so.1 "$ct" symbolize \
	--symbol-dir "$tmp/stacks_native" stacks_native.cupti -o nolibdw.pftrace 2>nolibdw.err || {
	echo "FAIL: symbolize without libdw.so.1 exited $?"; cat nolibdw.err; exit 1; }
n=$(grep -c "libdw" nolibdw.err || true)
if [ "$n" != 1 ] || ! grep -q "libcuptrace-test-no-libdw.so.1 (elfutils) not found: native frames \
stay unsymbolized" nolibdw.err || [ ! -s nolibdw.pftrace ]; then
	echo "FAIL: symbolize without libdw.so.1: $n warnings (1 expected), output:"
	cat nolibdw.err; ls -l nolibdw.pftrace; exit 1
fi
CUPTRACE_LIBDW_NAME=libcuptrace-test-no-libdw.so.1 "$ct" convert nolibdw.pftrace \
	-o nolibdw.json 2>/dev/null
"$ct" stats --json --group-by line --symbol-dir "$tmp/stacks_native" stacks_native.cupti \
	>stats.json 2>stats.err
python3 - "$src/tests/stacks_prog.c" out.json stats.json nolibdw.json <<'PY'
import json, re, sys
src, trace, stats, nolibdw = sys.argv[1:]
lines = open(src).read().splitlines()
def line_of(pat):
    hits = [i + 1 for i, l in enumerate(lines) if re.search(pat, l)]
    assert len(hits) == 1, (pat, hits)
    return hits[0]
want = {"memset": line_of(r"cudaMemset\("), "memcpy": line_of(r"cudaMemcpy\(")}
outer = [("b", line_of(r"return c\(")), ("a", line_of(r"r \|= b\(")),
         ("main", line_of(r"int r = a\("))]
d = json.load(open(trace))
ev = d["traceEvents"] if isinstance(d, dict) else d
fails = []
seen = {"memset": 0, "memcpy": 0}
for e in ev:
    cat = e.get("cat")
    if e.get("ph") != "X" or cat not in seen:
        continue
    st = e.get("args", {}).get("stack")
    if not st:
        fails.append("%s without a stack" % e["name"]); continue
    fr = [re.fullmatch(r"(\S+) \((.*):(\d+)\)", l) for l in st.splitlines()]
    ours = [(m.group(1), int(m.group(3))) for m in fr if m and m.group(2).endswith("stacks_prog.c")]
    exp = [("c", want[cat])] + outer
    if ours != exp:
        fails.append("%s: frames in stacks_prog.c %s, expected %s" % (e["name"], ours, exp))
    seen[cat] += 1
if seen != {"memset": 3, "memcpy": 3}:
    fails.append("GPU slices with stacks %s, expected 3 memsets and 3 copies" % seen)
rows = {r["line"]: r for r in json.load(open(stats))["lines"]["rows"]}
for cat, ln in want.items():
    key = [k for k in rows if re.match(r".*stacks_prog\.c:%d c$" % ln, k)]
    if len(key) != 1 or rows[key[0]]["count"] != 3:
        fails.append("stats --group-by line: no row of 3 for line %d (rows %s)" % (ln, list(rows)))
# Written without libdw.so.1: the same slices and stacks, each native frame still module+0xPC (one
# frame a line).
raw = 0
d = json.load(open(nolibdw))
for e in d["traceEvents"] if isinstance(d, dict) else d:
    if e.get("ph") != "X" or e.get("cat") not in seen:
        continue
    st = e.get("args", {}).get("stack", "")
    if "stacks_prog.c" in st or not re.search(r"^stacks_prog\.stripped\+0x[0-9a-f]+$", st, re.M):
        fails.append("without libdw.so.1, %s's stack is %r" % (e["name"], st))
    raw += 1
if raw != 6:
    fails.append("without libdw.so.1: %d GPU slices with stacks, expected 6" % raw)
if fails:
    print("FAIL:\n" + "\n".join(fails)); sys.exit(1)
print("stacks_data: 6 GPU slices symbolized to c/b/a/main at lines %s, %s; "
      "without libdw.so.1: one warning, frames left as module+0xPC" % (want, outer))
PY
