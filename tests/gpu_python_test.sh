#!/bin/sh
# GPU test of the Python package (issue 47): the context manager around a PyTorch loop; a
# process that starts CUDA before importing cuptrace, whose kernels for steps K..K+M-1 must equal
# `cuptrace record --steps K,M`'s for the same loop; torch.profiler and cuptrace refusing each
# other; a CUDA graph unaffected; the Lightning and transformers callbacks where installed; a
# notebook run headless where Jupyter is installed. Skips without a GPU, or without PyTorch.
# Needs a build without the sanitizers (python3 cannot load an ASan libcuptrace.so).
set -u
# shellcheck source=tests/gpu_common.sh
gpu_test=gpu_python
. "$(dirname "$0")/gpu_common.sh"
if ! python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
	echo "SKIP: PyTorch with CUDA is not installed here: Python package GPU test not run"
	exit 77
fi
src=$(cd "$(dirname "$0")" && pwd)
py=$src/python/gpu_torch.py
export PYTHONPATH="$gpu_build/python${PYTHONPATH:+:$PYTHONPATH}"
unset CUPTRACE_LIB CUDA_INJECTION64_PATH
fail=0
bad() { echo "FAIL: $*"; fail=1; }
# run NAME args...: the helper's RESULT line as JSON in $tmp/NAME.json
run() {
	name=$1
	shift
	if ! timeout 300 python3 "$py" "$@" >"$tmp/$name.log" 2>&1; then
		bad "$name: gpu_torch.py $*"; tail -20 "$tmp/$name.log"; return 1
	fi
	sed -n 's/^RESULT //p' "$tmp/$name.log" >"$tmp/$name.json"
	[ -s "$tmp/$name.json" ] || { bad "$name printed no RESULT"; return 1; }
}
field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }

# 1. The context manager around the whole loop (cuptrace imported before CUDA starts).
if run trace trace "$tmp/trace.pftrace" 20; then
	k=$(field "$tmp/trace.json" kernels)
	[ "$k" -gt 0 ] && [ "$k" = "$(field "$tmp/trace.json" analyze_kernels)" ] ||
		bad "trace: kernels $k, analyze $(field "$tmp/trace.json" analyze_kernels)"
	"$chk" "$tmp/trace.pftrace" --clean || bad "trace: check_trace"
	tp_check "$tmp/trace.pftrace" || fail=1
fi

# 2. Late attach: CUDA first, then cuptrace; steps 4..8 against record --steps 4,5.
K=4 M=5 N=12
if run late late "$tmp/late.pftrace" $N $K $M &&
	timeout 300 "$ct" record --steps $K,$M --no-summary -o "$tmp/rec.pftrace" -- \
		python3 "$py" plain $N >"$tmp/rec.log" 2>&1; then
	rk=$("$ct" stats --json "$tmp/rec.pftrace" | python3 -c '
import json, sys
print(sum(c["slices"] for c in json.load(sys.stdin)["categories"] if c["category"] == "kernel"))')
	lk=$(field "$tmp/late.json" kernels)
	echo "late attach: $lk kernels in steps $K..$((K + M - 1)); record --steps $K,$M: $rk"
	[ "$lk" -gt 0 ] && [ "$lk" = "$rk" ] || bad "late attach kernels $lk != record's $rk"
else
	bad "record --steps $K,$M"; tail -20 "$tmp/rec.log"
fi

# 3. torch.profiler and cuptrace refuse each other, then tracing works.
run conflict conflict "$tmp/conflict.pftrace" &&
	[ "$(grep -c '^refused: ' "$tmp/conflict.log")" = 2 ] || bad "conflict: $(cat "$tmp/conflict.log")"

# 4. A CUDA graph captured and replayed inside a trace computes what eager mode does.
run graphs graphs "$tmp/graphs.pftrace" && [ "$(field "$tmp/graphs.json" kernels)" -gt 0 ] ||
	bad "graphs"

# 5. The callbacks, steps 3..5, where their libraries are installed.
for lib in lightning transformers; do
	if ! python3 -c "import $lib" 2>/dev/null &&
		! { [ $lib = lightning ] && python3 -c "import pytorch_lightning" 2>/dev/null; }; then
		echo "SKIP $lib callback: $lib is not installed"
		continue
	fi
	run $lib $lib "$tmp/$lib.pftrace" 3 3 && [ "$(field "$tmp/$lib.json" kernels)" -gt 0 ] ||
		bad "$lib callback"
done

# 6. A notebook that runs CUDA work in one cell and traces in a later one, run headless.
if command -v jupyter >/dev/null 2>&1 && jupyter nbconvert --version >/dev/null 2>&1; then
	python3 - "$tmp/nb.ipynb" "$tmp/nb.pftrace" <<'PY'
import json, sys
cells = [
    "import torch\nx = torch.randn(512, 512, device='cuda')\n(x @ x).sum().item()",
    "import cuptrace\ncuptrace.start(%r)\nfor _ in range(10):\n    y = torch.relu(x @ x)\n"
    "torch.cuda.synchronize()\nr = cuptrace.stop()\nr" % sys.argv[2],
    "assert r.counts['kernel'] >= 10, r.counts\nr.open_in_perfetto()",
]
nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {"kernelspec": {
    "name": "python3", "display_name": "Python 3", "language": "python"}},
      "cells": [{"cell_type": "code", "id": "c%d" % i, "metadata": {}, "execution_count": None,
                 "outputs": [], "source": c} for i, c in enumerate(cells)]}
json.dump(nb, open(sys.argv[1], "w"))
PY
	if timeout 300 jupyter nbconvert --to notebook --execute "$tmp/nb.ipynb" \
		--output "$tmp/nb.out.ipynb" >"$tmp/nb.log" 2>&1; then
		python3 - "$tmp/nb.out.ipynb" <<'PY' || fail=1
import json, sys
cells = json.load(open(sys.argv[1]))["cells"]
html = ["".join(o.get("data", {}).get("text/html", "")) for c in cells for o in c["outputs"]]
ok = any("<table>" in h and "kernel" in h for h in html) and \
    any("in Perfetto UI" in h and '"PONG"' in h for h in html)
print("notebook: %s" % ("summary table and Perfetto button shown" if ok else "FAIL: outputs " +
                        json.dumps(html)[:2000]))
sys.exit(0 if ok else 1)
PY
	else
		bad "jupyter nbconvert --execute"; tail -30 "$tmp/nb.log"
	fi
else
	echo "SKIP notebook: jupyter (nbconvert) is not installed here"
fi
[ $fail -eq 0 ] && echo "gpu_python_test: ok" && rm -rf "$tmp"
exit $fail
