#!/bin/sh
# `cuptrace diff` end to end, no GPU needed:
#  - a capture or trace diffed against itself shows no change anywhere (text, markdown, JSON)
#    and exits 0, even with --fail-above 0;
#  - every pair of captures in tests/data: the JSON's per-name counts and totals, GPU busy time,
#    span and kernel count equal what `cuptrace stats --json` says of each capture;
#  - synthetic runs of a loop (tests/steps_trace.c): one kernel made slower and one added shows
#    exactly those changes, with their numbers, and --fail-above exits 3 naming them; a run with
#    more steps compares equal per step (--per step); --group-by base;
#  - two ranks of one job (tests/ranks_trace.c), rank 0 on GPU 0 and rank 1 on GPU 1: the GPUs
#    are compared with each other (by position), each side's busy time that of `cuptrace stats`;
#  - usage and input errors: exit 2 and 1 with a message naming the problem.
set -u
ct=$CUPTRACE_BIN
if ! command -v python3 >/dev/null 2>&1; then
	echo "SKIP: python3 not found (needed to parse the JSON)"
	exit 77
fi
src=${CUPTRACE_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
tmp=$(mktemp -d "${CUPTRACE_TMP:-/tmp}/diff.XXXXXX")
. "$src/tests/script_lib.sh"

"$STEPS_TRACE" "$tmp/base.pftrace" && "$STEPS_TRACE" "$tmp/slow.pftrace" --gemm 4500 --softmax &&
	"$STEPS_TRACE" "$tmp/long.pftrace" --steps 7 || { echo "FAIL: steps_trace"; exit 1; }

# 1. Each against itself.
for t in "$CUPTRACE_TEST_DATA/vector_add.cupti" "$CUPTRACE_TEST_DATA/torch_train.cupti" \
	"$CUPTRACE_TEST_DATA/nvtx.cupti" "$tmp/base.pftrace"; do
	name=$(basename "$t")
	for fmt in text markdown json; do
		opt=; [ $fmt != text ] && opt=--$fmt
		"$ct" diff $opt --fail-above 0 "$t" "$t" >"$tmp/self.$fmt" 2>"$tmp/err"
		rc=$?
		[ $rc = 0 ] || { bad "$name against itself ($fmt): exit $rc"; cat "$tmp/err"; continue; }
		[ -s "$tmp/err" ] && { bad "$name against itself ($fmt) wrote to stderr:"; cat "$tmp/err"; }
	done
	# No sign anywhere in text or markdown: every change is 0, nothing added or removed.
	if grep -E '(^|[ |])[-+][0-9]|added[^,]|removed[^,]|grew by more' "$tmp/self.text" "$tmp/self.markdown" |
		grep -v ' (0 added, 0 removed)' | grep -v 'Nothing grew' | grep -q .; then
		bad "$name against itself shows a change:"
		grep -E '(^|[ |])[-+][0-9]|added|removed' "$tmp/self.text" | grep -v '(0 added, 0 removed)' | head -5
	fi
	grep -q 'Nothing grew by more than 0%' "$tmp/self.text" || bad "$name: no fail-above verdict"
	grep -q '^| Wall span | ' "$tmp/self.markdown" || bad "$name: markdown header table"
	python3 - "$tmp/self.json" "$src/tests" <<'PY' && ok || bad "$name against itself (JSON)"
import sys
sys.path.insert(0, sys.argv[2])
from strict_json import load
j = load(sys.argv[1])
assert j["schema"] == "cuptrace-diff/1" and j["group_by"] == "name" and j["per"] is None
def zero(c, what):
    assert c["base"] == c["new"] and c["delta"] == 0, (what, c)
    assert c["delta_pct"] in (0, None), (what, c)
    assert c["delta_pct"] is None or c["base"] != 0, (what, c)
for k, c in j["summary"].items():
    zero(c, k)
for d in j["devices"]:
    zero(d["busy_ns"], d["name"])
    assert d["new_name"] is None
rows = 0
for fam, rs in j["families"].items():
    for r in rs:
        rows += 1
        assert r["status"] == "common", r
        for k in ("count", "total_ns", "mean_ns"):
            zero(r[k], (fam, r["name"], k))
assert rows > 0
assert j["fail_above"] == {"pct": 0, "failed": False, "reasons": []}, j["fail_above"]
PY
done

# 2. Pairs of captures: the diff's numbers are the stats' numbers.
set -- "$CUPTRACE_TEST_DATA"/*.cupti
prev=$1
shift
for cur in "$@"; do
	a=$(basename "$prev") b=$(basename "$cur")
	if ! "$ct" diff --json "$prev" "$cur" >"$tmp/pair.json" 2>"$tmp/err" ||
		! "$ct" stats --json "$prev" >"$tmp/a.json" || ! "$ct" stats --json "$cur" >"$tmp/b.json"; then
		bad "diff or stats of $a and $b"; cat "$tmp/err"; prev=$cur; continue
	fi
	python3 - "$tmp/pair.json" "$tmp/a.json" "$tmp/b.json" "$src/tests" <<'PY' && ok || bad "$a vs $b"
import sys
sys.path.insert(0, sys.argv[4])
from strict_json import load
d, a, b = load(sys.argv[1]), load(sys.argv[2]), load(sys.argv[3])
# whole CUDA graph launches (--cuda-graphs graph) are kernel-family work, as in the analyses
fams = {"kernels": ("kernel", "graph"), "api_calls": ("cuda_runtime", "cuda_driver"),
        "copies": ("memcpy", "memset")}
for side, st in (("base", a), ("new", b)):
    s = d["summary"]
    assert s["gpu_busy_ns"][side] == st["gpu_busy_ns"], (side, "gpu busy")
    assert s["span_ns"][side] == (st["span"]["duration_ns"] if st["span"] else 0), (side, "span")
    kernels = sum(n["count"] for n in st["names"] if n["category"] in fams["kernels"])
    assert s["kernels"][side] == kernels, (side, "kernels")
    for fam, cats in fams.items():
        want = {}
        for n in st["names"]:
            if n["category"] in cats:
                c, t = want.get(n["name"], (0, 0))
                want[n["name"]] = (c + n["count"], t + n["total_ns"])
        got = {r["name"]: (r["count"][side], r["total_ns"][side]) for r in d["families"][fam]
               if r["count"][side]}
        assert got == want, (side, fam, sorted(set(got.items()) ^ set(want.items()))[:4])
    devs = [x for x in d["devices"] if x["busy_ns"][side] is not None]
    assert sum(x["busy_ns"][side] for x in devs) == st["gpu_busy_ns"], (side, "devices")
# Status follows presence, and rows come by |change in total| desc.
for fam, rs in d["families"].items():
    for r in rs:
        want = ("common" if r["count"]["base"] and r["count"]["new"]
                else "added" if r["count"]["new"] else "removed")
        assert r["status"] == want, r
    ch = [abs(r["total_ns"]["delta"]) for r in rs]
    assert ch == sorted(ch, reverse=True), fam
PY
	prev=$cur
done

# 3. One kernel slower (gemm 3 -> 4.5 us), one added (softmax): exactly those changes.
"$ct" diff --json "$tmp/base.pftrace" "$tmp/slow.pftrace" >"$tmp/slow.json" || bad "diff --json base slow"
python3 - "$tmp/slow.json" "$src/tests" <<'PY' && ok || bad "base vs slow (JSON)"
import sys
sys.path.insert(0, sys.argv[2])
from strict_json import load
j = load(sys.argv[1])
def ch(c, base, new):
    assert c["base"] == base and c["new"] == new and c["delta"] == new - base, (c, base, new)
    assert c["delta_pct"] == (None if base == 0 else (new - base) / base * 100), c
s = j["summary"]
ch(s["span_ns"], 30000, 30000)
ch(s["gpu_busy_ns"], 3 * 4500, 3 * (6000 + 800))
ch(s["kernels"], 6, 9)
ch(s["bytes_copied"], 3 * 4096, 3 * 4096)
k = {r["name"]: r for r in j["families"]["kernels"]}
assert list(k) == ["void gemm<float, 128>(float const*, float*, int)",
                   "void softmax<float>(float*)", "relu(float*)"], list(k)
g = k["void gemm<float, 128>(float const*, float*, int)"]
assert g["status"] == "common"
ch(g["count"], 3, 3); ch(g["total_ns"], 9000, 13500); ch(g["mean_ns"], 3000, 4500)
sm = k["void softmax<float>(float*)"]
assert sm["status"] == "added" and sm["mean_ns"]["base"] is None and sm["mean_ns"]["new"] == 800
ch(sm["count"], 0, 3); ch(sm["total_ns"], 0, 2400)
r = k["relu(float*)"]
assert r["status"] == "common"
ch(r["total_ns"], 1500, 1500)
api = {r["name"]: r for r in j["families"]["api_calls"]}
ch(api["cudaLaunchKernel"]["count"], 6, 9)
ch(api["cudaStreamSynchronize"]["total_ns"], 9000, 9000)
for fam in ("copies", "nvtx_ranges", "ops"):
    for r in j["families"][fam]:
        assert r["status"] == "common" and r["total_ns"]["delta"] == 0, (fam, r)
assert [r["name"] for r in j["families"]["ops"]] == ["aten::mm"]
assert [r["name"] for r in j["families"]["nvtx_ranges"]] == ["step"]
assert j["fail_above"] is None
PY
"$ct" diff --fail-above 10 "$tmp/base.pftrace" "$tmp/slow.pftrace" >"$tmp/slow.txt" 2>"$tmp/err"
rc=$?
[ $rc = 3 ] && ok || bad "--fail-above 10 on base vs slow: exit $rc, not 3"
grep -q "4 times grew by more than 10% (--fail-above)" "$tmp/err" || bad "--fail-above: stderr: $(cat "$tmp/err")"
for line in "4 grew by more than 10%:" \
	"  GPU busy time: 13.50 us -> 20.40 us (+51.1%)" \
	"  kernel void gemm<float, 128>(float const*, float*, int): 9.000 us -> 13.50 us (+50.0%)" \
	"  kernel void softmax<float>(float*): 0 ns -> 2.400 us (new)" \
	"  API call cudaLaunchKernel: 600 ns -> 900 ns (+50.0%)" \
	"Kernels (1 added, 0 removed):"; do
	grep -qxF "$line" "$tmp/slow.txt" || bad "base vs slow: no line '$line'"
done
# The table rows, column by column: counts, totals (3 x 3 us -> 3 x 4.5 us), change, change %
# and the change of the mean (each side's mean is in --json).
# (the name is shortened to keep the line within 100 columns: its start stays)
grep -Eq '^void gemm<float, 128>\(float co\.\.\. +3 +3 +9\.000 us +13\.50 us +\+4\.500 us +\+50\.0 +\+50\.0$' "$tmp/slow.txt" ||
	bad "gemm row"
grep -Eq '^void softmax<float>\(float\*\) +- +3 +0 ns +2\.400 us +\+2\.400 us +added$' "$tmp/slow.txt" ||
	bad "softmax row"
grep -Eq '^relu\(float\*\) +3 +3 +1\.500 us +1\.500 us +0 ns +0\.0 +0\.0$' "$tmp/slow.txt" ||
	bad "relu row"
# The other way round nothing grew; removed is said as such.
"$ct" diff --fail-above 10 --markdown "$tmp/slow.pftrace" "$tmp/base.pftrace" >"$tmp/back.md" && ok ||
	bad "slow vs base should pass --fail-above 10"
grep -qF "| void softmax<float>(float*) | 3 | - | 2.400 us | 0 ns | -2.400 us | removed |  |" "$tmp/back.md" ||
	bad "markdown: softmax removed"
grep -qF "#### Kernels (0 added, 1 removed)" "$tmp/back.md" || bad "markdown: family title"

# 4. More steps: equal per step.
"$ct" diff --per step --fail-above 0 --json "$tmp/base.pftrace" "$tmp/long.pftrace" >"$tmp/per.json"
rc=$?
[ $rc = 0 ] || bad "--per step: exit $rc"
python3 - "$tmp/per.json" "$src/tests" <<'PY' && ok || bad "--per step (JSON)"
import sys
sys.path.insert(0, sys.argv[2])
from strict_json import load
j = load(sys.argv[1])
assert j["per"] == {"name": "step", "base_count": 3, "new_count": 7}, j["per"]
s = j["summary"]
assert s["kernels"]["base"] == 2 and s["kernels"]["new"] == 2, s["kernels"]
assert s["span_ns"]["base"] == 10000 and s["span_ns"]["new"] == 10000, s["span_ns"]
assert s["gpu_busy_ns"]["delta"] == 0 and s["gpu_busy_ns"]["base"] == 4500
for fam, rs in j["families"].items():
    for r in rs:
        assert r["status"] == "common" and r["total_ns"]["delta"] == 0, r
        assert r["count"]["delta"] == 0, r
PY
"$ct" diff "$tmp/base.pftrace" "$tmp/long.pftrace" | grep -Eq '^Kernels +6 +14 +\+8 +\+133\.3$' && ok ||
	bad "without --per the kernel counts differ"
"$ct" diff --per step --top 2 "$tmp/base.pftrace" "$tmp/long.pftrace" >"$tmp/per.txt"
grep -q '^Per:   "step" ranges: 3 in base, 7 in new; counts and times below are per range$' "$tmp/per.txt" ||
	bad "--per header line"
grep -Eq '^relu\(float\*\) +1\.00 +1\.00 ' "$tmp/per.txt" || bad "--per: counts per step"

# 5. --group-by base: template arguments and parameters gone.
"$ct" diff --json --group-by base "$CUPTRACE_TEST_DATA/torch_train.cupti" "$tmp/base.pftrace" >"$tmp/gb.json" ||
	bad "--group-by base"
python3 - "$tmp/gb.json" "$src/tests" <<'PY' && ok || bad "--group-by base (JSON)"
import sys
sys.path.insert(0, sys.argv[2])
from strict_json import load
j = load(sys.argv[1])
assert j["group_by"] == "base"
names = [r["name"] for r in j["families"]["kernels"]]
assert "gemm" in names and "relu" in names and "at::native::vectorized_elementwise_kernel" in names, names
assert not [n for n in names if "<" in n or "(" in n and "(anonymous namespace)" not in n], names
PY

# 5b. Real captures that differ on purpose (examples/steps.cu, recorded on an H100): steps_changed
# makes the "add" kernel do 8x the work and launches "extra_bias" once per step. Exactly those
# two kernels change, "extra_bias" is the one added, and --fail-above 10 exits 3 naming them;
# against a run of 20 steps, --per step gives the same per-step counts.
d=$CUPTRACE_TEST_DATA
if [ -e "$d/steps_base.cupti" ]; then
	"$ct" diff --json "$d/steps_base.cupti" "$d/steps_changed.cupti" >"$tmp/steps.json" 2>"$tmp/err" &&
		python3 - "$tmp/steps.json" <<'PY' && ok || bad "steps: base against changed"
import json, sys
j = json.load(open(sys.argv[1]))
k = {r["name"]: r for r in j["families"]["kernels"]}
assert set(k) == {"add(float*, float const*, int, int)", "extra_bias(float*, int)",
                  "reduce_sum(float const*, int, float*)", "scale(float*, int, float)"}, set(k)
add, extra = k["add(float*, float const*, int, int)"], k["extra_bias(float*, int)"]
assert extra["status"] == "added" and extra["count"]["new"] == 10, extra
assert add["count"]["base"] == add["count"]["new"] == 10, add
assert add["total_ns"]["delta_pct"] > 300, add  # 8x the loop: several times slower
for n in ("reduce_sum(float const*, int, float*)", "scale(float*, int, float)"):
    assert abs(k[n]["total_ns"]["delta_pct"]) < 10 and k[n]["count"]["delta"] == 0, k[n]
PY
	expect 3 "grew by more than 10%" "$ct" diff --fail-above 10 \
		"$d/steps_base.cupti" "$d/steps_changed.cupti"
	grep -q "kernel add(float\*, float const\*, int, int): .* -> .*%)" "$tmp/out" &&
		grep -q "kernel extra_bias(float\*, int): 0 ns -> .* (new)" "$tmp/out" ||
		bad "--fail-above does not name the slower and the added kernel"
	"$ct" diff --json --per step "$d/steps_base.cupti" "$d/steps_long.cupti" >"$tmp/per.json" 2>"$tmp/err" &&
		python3 - "$tmp/per.json" <<'PY' && ok || bad "steps: --per step, 10 against 20 steps"
import json, sys
j = json.load(open(sys.argv[1]))
for r in j["families"]["kernels"]:
    assert r["status"] == "common" and r["count"]["base"] == r["count"]["new"] == 1, r
assert len(j["families"]["kernels"]) == 3
PY
else
	echo "SKIP steps captures: $d/steps_base.cupti missing"
fi

# 6. Two ranks of one job, rank 0 on GPU 0 and rank 1 on GPU 1 (issue 25): one device row
# comparing the two GPUs, not "GPU 0 removed, GPU 1 added"; each side's busy time is what
# `cuptrace stats` says of that rank.
if "$RANKS_TRACE" "$tmp/r0.pftrace" --rank 0 --per-host 2 --gpu-local --steps 6 &&
	"$RANKS_TRACE" "$tmp/r1.pftrace" --rank 1 --per-host 2 --gpu-local --steps 6 &&
	"$ct" diff --json "$tmp/r0.pftrace" "$tmp/r1.pftrace" >"$tmp/ranks.json" &&
	"$ct" diff "$tmp/r0.pftrace" "$tmp/r1.pftrace" >"$tmp/ranks.txt" &&
	"$ct" stats --json "$tmp/r0.pftrace" >"$tmp/r0.json" &&
	"$ct" stats --json "$tmp/r1.pftrace" >"$tmp/r1.json"; then
	python3 - "$tmp/ranks.json" "$tmp/r0.json" "$tmp/r1.json" "$src/tests" <<'PY' && ok || bad "ranks on GPU 0 and GPU 1 (JSON)"
import sys
sys.path.insert(0, sys.argv[4])
from strict_json import load
d, a, b = load(sys.argv[1]), load(sys.argv[2]), load(sys.argv[3])
assert d["devices_matched_by"] == "position", d["devices_matched_by"]
assert d["ranks"] == {"base": 0, "new": 1}, d["ranks"]
assert len(d["devices"]) == 1, d["devices"]
dev = d["devices"][0]
assert dev["name"] == "GPU 0: NVIDIA H200" and dev["new_name"] == "GPU 1: NVIDIA H200", dev
assert dev["busy_ns"]["base"] == a["gpu_busy_ns"] > 0, (dev, a["gpu_busy_ns"])
assert dev["busy_ns"]["new"] == b["gpu_busy_ns"] > 0, (dev, b["gpu_busy_ns"])
PY
	row=$(grep 'GPU 0: NVIDIA H200 (base) vs GPU 1: NVIDIA H200 (new)' "$tmp/ranks.txt")
	[ -n "$row" ] && ok || bad "ranks: no row comparing GPU 0 with GPU 1"
	echo "$row" | grep -qE 'removed|added' && bad "ranks: the GPU row says added or removed"
	grep -q 'GPU 1: NVIDIA H200 *-' "$tmp/ranks.txt" && bad "ranks: GPU 1 listed as added"
	grep -q '^GPUs: *compared by position.*base is rank 0, new is rank 1' "$tmp/ranks.txt" &&
		ok || bad "ranks: the header does not say GPUs are compared by position"
else
	bad "ranks_trace, diff or stats of two ranks"
fi

# 7. Errors.
b=$tmp/base.pftrace
expect 2 "needs two traces, BASE and NEW (got 1)" "$ct" diff "$b"
expect 2 "needs two traces, BASE and NEW (got 3)" "$ct" diff "$b" "$b" "$b"
expect 2 "exclude each other" "$ct" diff --json --markdown "$b" "$b"
expect 2 "takes name, base, op or line" "$ct" diff --group-by kernel "$b" "$b"
expect 2 "takes a number of rows" "$ct" diff --top 0 "$b" "$b"
expect 2 "takes a percentage" "$ct" diff --fail-above -5 "$b" "$b"
expect 2 "takes a percentage" "$ct" diff --fail-above 10x "$b" "$b"
expect 2 "unrecognized option '--frobnicate'" "$ct" diff --frobnicate "$b" "$b"
expect 1 "cannot read /nonexistent.pftrace" "$ct" diff "$b" /nonexistent.pftrace
head -c 3000 /dev/urandom >"$tmp/garbage.bin"
expect 1 "cannot read $tmp/garbage.bin" "$ct" diff "$tmp/garbage.bin" "$b"
expect 1 "$tmp/long.pftrace has no range named 'epoch'" "$ct" diff --per epoch "$b" "$tmp/long.pftrace"
grep -q "$b has no range named 'epoch'" "$tmp/err" || bad "--per: the base's lack not said"
[ -s "$tmp/out" ] && bad "a failed diff printed a report"
# A range on a GPU track only does not count: vector_add has no host range named "step".
expect 1 "vector_add.cupti has no range named 'step'" "$ct" diff --per step "$b" "$CUPTRACE_TEST_DATA/vector_add.cupti"
"$ct" diff --help | grep -q "^usage: cuptrace diff" && ok || bad "diff --help"

echo "$n checks passed"
[ $fail = 0 ] && rm -rf "$tmp"
exit $fail
