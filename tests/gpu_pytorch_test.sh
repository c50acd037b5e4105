#!/bin/sh
# GPU test: `cuptrace record --pytorch` on a tiny PyTorch program (op slices with clean names,
# nested around the launches they make; module slices; the same kernels as without --pytorch),
# record's default optimizer.step() marks (and none with --no-step-marks),
# the trivial-runtime-call filter (left out by default, back with --runtime all, failed calls
# kept with --runtime watch), and that --pytorch leaves a program without torch, and a
# sitecustomize it shadows, alone. Skips without a GPU, or without PyTorch.
set -u
# shellcheck source=tests/gpu_common.sh
gpu_test=gpu_pytorch
. "$(dirname "$0")/gpu_common.sh"
if ! python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
	echo "SKIP: PyTorch with CUDA is not installed here: PyTorch GPU test not run"
	exit 77
fi
src=$(cd "$(dirname "$0")" && pwd)
fail=0
rec() { # log out [options] -- command...
	log=$1 out=$2
	shift 2
	if ! timeout 120 "$ct" record -o "$tmp/$out" "$@" >"$tmp/$log" 2>&1; then
		echo "FAIL: cuptrace record $*"; cat "$tmp/$log"; fail=1; return 1
	fi
}
prog="$src/gpu/torch_small.py"
rec pt.log pt.json --pytorch -- python3 "$prog" 10 &&
	rec plain.log plain.json -- python3 "$prog" 10 &&
	rec nomarks.log nomarks.json --no-step-marks -- python3 "$prog" 10 &&
	rec all.log all.json --runtime all -- python3 "$prog" 10 &&
	rec watch.log watch.json --runtime watch -- python3 "$prog" 10 --bad-device &&
	python3 "$src/gpu/check_pytorch.py" "$tmp" 10 || fail=1
# analyze takes the marks as the steps: 10 of them, from optimizer.step; without marks it finds
# the 10 iterations in the GPU work (the first of each may differ: 9 or 10).
for f in plain nomarks; do
	"$ct" analyze --json "$tmp/$f.json" >"$tmp/$f.an.json" || { echo "FAIL: analyze $f"; fail=1; }
done
python3 - "$tmp/plain.an.json" "$tmp/nomarks.an.json" <<'PY' || fail=1
import json, sys
a, b = (json.load(open(p))["steps"] for p in sys.argv[1:3])
print("analyze: marks %s %d steps; no marks %s %d steps (confidence %.2f)"
      % (a["kind"], len(a["rows"]), b["kind"], len(b["rows"]), b["confidence"]))
ok = a["kind"] == "optimizer" and len(a["rows"]) == 10 and b["kind"] == "gpu_period" \
    and len(b["rows"]) in (9, 10)
print("" if ok else "FAIL: analyze's steps")
sys.exit(0 if ok else 1)
PY
grep "cuptrace:" "$tmp/watch.log"
grep -q "trivial runtime calls left out" "$tmp/watch.log" ||
	{ echo "FAIL: --runtime watch printed no count of the calls left out"; fail=1; }
# The .pftrace of the same run checks clean with our own reader; both load clean in Perfetto's
# trace processor (where shared/tools/ is beside the checkout).
rec ptp.log pt.pftrace --pytorch -- python3 "$prog" 10 &&
	{ "$chk" "$tmp/pt.pftrace" --clean --at-least nvtx:aten::mm=10 || fail=1; }
for f in pt.pftrace pt.json plain.json all.json watch.json; do
	[ ! -s "$tmp/$f" ] || tp_check "$tmp/$f" || fail=1
done
# No torch: the program runs exactly as it would (stdout untouched, exit status kept).
out=$("$ct" record --pytorch --no-summary -o "$tmp/none.pftrace" -- python3 -c \
	'import sys; print("plain"); sys.exit(3)' 2>"$tmp/none.log")
st=$?
[ "$out" = "plain" ] && [ $st -eq 3 ] && ! grep -q "Traceback" "$tmp/none.log" ||
	{ echo "FAIL: --pytorch changed a program without torch (out '$out', exit $st)"; fail=1; }
# A sitecustomize that ours shadows still runs.
mkdir -p "$tmp/site"
printf '%s\n' 'import sys; sys.stderr.write("user sitecustomize ran\n")' >"$tmp/site/sitecustomize.py"
PYTHONPATH="$tmp/site" "$ct" record --pytorch --no-summary -o "$tmp/site.pftrace" -- python3 \
	-c 'import torch; torch.ones(1, device="cuda")' 2>"$tmp/site.log"
grep -q "Leaked callback" "$tmp/site.log" &&
	{ echo "FAIL: PyTorch warned about the NVTX callback at exit"; fail=1; }
grep -q "user sitecustomize ran" "$tmp/site.log" ||
	{ echo "FAIL: the user's sitecustomize did not run under --pytorch"; cat "$tmp/site.log"; fail=1; }
[ $fail -eq 0 ] && echo "gpu_pytorch_test: ok" && rm -rf "$tmp"
exit $fail
