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
"$ct" stats --json --group-by line --symbol-dir "$tmp/stacks_native" stacks_native.cupti \
	>stats.json 2>stats.err
python3 - "$src/tests/stacks_prog.c" out.json stats.json <<'PY'
import json, re, sys
src, trace, stats = sys.argv[1:]
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
if fails:
    print("FAIL:\n" + "\n".join(fails)); sys.exit(1)
print("stacks_data: 6 GPU slices symbolized to c/b/a/main at lines %s, %s" % (want, outer))
PY
