#!/bin/sh
# GPU test of the Python package (issue 47), one PASS or FAIL line per case:
#  trace        `with cuptrace.trace()` around a PyTorch loop: its kernels equal torch.profiler's
#               count of the same steps (run alone, another process), every GPU slice has its
#               flow (check_trace --clean), flows >= kernels, one cuptrace.range("step") slice per
#               step on the loop's own thread (the Chrome JSON that `cuptrace convert` writes)
#  early        the same, started before CUDA (the model made inside)
#  window       cuptrace.range("hot") as a capture window's range (capture_range="range:hot"):
#               the file holds that range's steps' kernels only, and the range itself
#  late         CUDA first, then cuptrace: steps K..K+M-1 against `record --steps K,M`
#  notebook     `jupyter nbconvert --execute` of a notebook that used CUDA in an earlier cell;
#               without Jupyter, a process that starts CUDA before importing cuptrace
#  conflict     torch.profiler and cuptrace refuse each other with ProfilerConflict
#  graphs       CUDA graph capture and replay give the same numbers traced and not
#  compile      torch.compile gives the same numbers traced and not; Triton kernels traced
#  record       under `cuptrace record`: cuptrace_end is refused (-EPERM), ranges in its trace
#  lightning, transformers  the callbacks' steps K..K+M-1 against `record --steps K,M` of the
#               same training without the callback (each skipped where its library is missing)
# Skips without a GPU or without PyTorch. Needs a build without the sanitizers (python3 cannot
# load an ASan libcuptrace.so).
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
export CUPTRACE_TEST_HF_DIR="$tmp/hf"
# One GPU: the transformers Trainer would spread over every visible one (DataParallel).
export CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0}"
unset CUPTRACE_LIB CUDA_INJECTION64_PATH
fail=0
ok() { echo "PASS $*"; }
bad() { echo "FAIL $*"; fail=1; }
# run NAME args...: the helper's RESULT line as JSON in $tmp/NAME.json
run() {
	name=$1
	shift
	if ! timeout 300 python3 "$py" "$@" >"$tmp/$name.log" 2>&1; then
		bad "$name: gpu_torch.py $* failed"
		tail -20 "$tmp/$name.log"
		return 1
	fi
	sed -n 's/^RESULT //p' "$tmp/$name.log" >"$tmp/$name.json"
	[ -s "$tmp/$name.json" ] || {
		bad "$name printed no RESULT"
		tail -20 "$tmp/$name.log"
		return 1
	}
}
field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
# kernels FILE: the kernel slices in a trace, as `cuptrace stats --json` counts them
kernels() {
	"$ct" stats --json "$1" | python3 -c '
import json, sys
print(sum(c["slices"] for c in json.load(sys.stdin)["categories"] if c["category"] == "kernel"))'
}
# on_thread FILE NAME TID: how many NAME slices (category nvtx) the thread TID's track holds and
# how many lie elsewhere, from the Chrome JSON of the trace ("N M")
on_thread() {
	"$ct" convert "$1" -o "$1.json" >/dev/null 2>&1 || { echo "convert failed"; return; }
	python3 - "$1.json" "$2" "$3" <<'PY'
import json, sys
ev = json.load(open(sys.argv[1]))
ev = ev["traceEvents"] if isinstance(ev, dict) else ev
mine = [e for e in ev if e.get("name") == sys.argv[2] and e.get("cat") == "nvtx" and
        e.get("ph") in ("X", "B")]
here = sum(1 for e in mine if str(e.get("tid")) == sys.argv[3])
print(here, len(mine) - here)
PY
}

# The independent number: torch.profiler's own count of the kernels of N steps.
N=12
if run profile profile "$tmp/profile.json" $N; then
	kp=$(field "$tmp/profile.json" kernels)
	if [ "$((kp % N))" -ne 0 ] || [ "$kp" -eq 0 ]; then
		bad "profile: torch.profiler counted $kp kernels in $N steps (not a multiple)"
		kp=
	else
		echo "torch.profiler: $kp kernels in $N steps ($((kp / N)) a step)"
	fi
else
	kp=
fi

# trace: the context manager around N steps.
if run trace trace "$tmp/trace.pftrace" $N; then
	k=$(field "$tmp/trace.json" kernels)
	ak=$(field "$tmp/trace.json" analyze_kernels)
	sk=$(kernels "$tmp/trace.pftrace")
	"$chk" "$tmp/trace.pftrace" --clean --count nvtx:step=$N >"$tmp/trace.chk" 2>&1
	c=$?
	flows=$(sed -n 's/.* \([0-9]*\) flows,.*/\1/p' "$tmp/trace.chk")
	on_thread "$tmp/trace.pftrace" step "$(field "$tmp/trace.json" tid)" >"$tmp/trace.on"
	read -r here elsewhere <"$tmp/trace.on"
	if [ $c -ne 0 ]; then
		bad "trace: check_trace: $(cat "$tmp/trace.chk")"
	elif [ -n "$kp" ] && [ "$k" != "$kp" ]; then
		bad "trace: $k kernels, torch.profiler counted $kp for the same $N steps"
	elif [ "$k" != "$ak" ] || [ "$k" != "$sk" ] || [ "$k" -le 0 ]; then
		bad "trace: kernels: result $k, analyze $ak, stats $sk"
	elif [ "${flows:-0}" -lt "$k" ]; then
		bad "trace: $flows flows for $k kernels"
	elif [ "${here:-}" != "$N" ] || [ "${elsewhere:-}" != 0 ]; then
		bad "trace: range 'step': $(cat "$tmp/trace.on") slices (on the loop's thread," \
			"elsewhere); expected $N 0"
	else
		ok "trace: $k kernels (torch.profiler: ${kp:-not run}), $flows flows, clean," \
			"$N range slices on the loop's thread"
		tp_check "$tmp/trace.pftrace" || bad "trace: trace_processor"
	fi
fi

# early: started before CUDA.
if run early early "$tmp/early.pftrace" 4; then
	if "$chk" "$tmp/early.pftrace" --clean --count nvtx:step=4 >"$tmp/early.chk" 2>&1 &&
		[ "$(field "$tmp/early.json" kernels)" -gt 0 ]; then
		ok "early: $(field "$tmp/early.json" kernels) kernels, clean, 4 range slices"
	else
		bad "early: $(cat "$tmp/early.chk")"
	fi
fi

# window: a cuptrace range names the capture window: steps A..B only.
A=5 B=7
if run window window "$tmp/window.pftrace" 10 $A $B; then
	k=$(field "$tmp/window.json" kernels)
	want=${kp:+$((kp * (B - A + 1) / N))}
	if ! "$chk" "$tmp/window.pftrace" --clean --count nvtx:hot=1 \
		--count nvtx:step=$((B - A + 1)) >"$tmp/window.chk" 2>&1; then
		bad "window: $(cat "$tmp/window.chk")"
	elif [ -n "$want" ] && [ "$k" != "$want" ]; then
		bad "window: $k kernels in the window of range 'hot', expected $want (steps $A..$B)"
	elif [ "$k" -le 0 ]; then
		bad "window: no kernels"
	else
		ok "window: range 'hot' opened the window: $k kernels (expected ${want:-?}), its" \
			"$((B - A + 1)) step ranges and itself"
	fi
fi

# late: CUDA first, then cuptrace; steps K..K+M-1 against record --steps K,M.
K=4 M=5
if run late late "$tmp/late.pftrace" $N $K $M; then
	if timeout 300 "$ct" record --steps $K,$M --no-summary -o "$tmp/rec.pftrace" -- \
		python3 "$py" plain $N >"$tmp/rec.log" 2>&1; then
		rk=$(kernels "$tmp/rec.pftrace")
		lk=$(field "$tmp/late.json" kernels)
		if [ "$lk" -gt 0 ] && [ "$lk" = "$rk" ]; then
			ok "late: $lk kernels in steps $K..$((K + M - 1)); record --steps $K,$M: $rk"
		else
			bad "late: $lk kernels, record --steps $K,$M: $rk"
		fi
	else
		bad "late: record --steps $K,$M"
		tail -20 "$tmp/rec.log"
	fi
fi

# notebook: headless Jupyter where it is installed, else a process that is like one.
if python3 -c "import nbconvert, nbclient, ipykernel" 2>/dev/null; then
	python3 - "$tmp/nb.ipynb" "$tmp/nb.pftrace" <<'PY'
import json, sys
cells = [
    "import torch\nx = torch.randn(512, 512, device='cuda')\n(x @ x).sum().item()",
    "import cuptrace\ncuptrace.start(%r)\nfor _ in range(10):\n    y = torch.relu(x @ x)\n"
    "torch.cuda.synchronize()\nr = cuptrace.stop()\nr" % sys.argv[2],
    "assert r.complete and r.counts['kernel'] >= 10, r.counts\nr.open_in_perfetto()",
]
nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {"kernelspec": {
    "name": "python3", "display_name": "Python 3", "language": "python"}},
      "cells": [{"cell_type": "code", "id": "c%d" % i, "metadata": {}, "execution_count": None,
                 "outputs": [], "source": c} for i, c in enumerate(cells)]}
json.dump(nb, open(sys.argv[1], "w"))
PY
	if timeout 300 python3 -m nbconvert --to notebook --execute "$tmp/nb.ipynb" \
		--output "$tmp/nb.out.ipynb" >"$tmp/nb.log" 2>&1; then
		if python3 - "$tmp/nb.out.ipynb" <<'PY'; then
import json, sys
cells = json.load(open(sys.argv[1]))["cells"]
html = ["".join(o.get("data", {}).get("text/html", "")) for c in cells for o in c["outputs"]]
ok = any("<table>" in h and "kernel" in h for h in html) and \
    any("in Perfetto UI" in h and '"PONG"' in h for h in html)
if not ok:
    print("outputs: " + json.dumps(html)[:2000])
sys.exit(0 if ok else 1)
PY
			if "$chk" "$tmp/nb.pftrace" --clean --at-least kernel=10 >/dev/null 2>&1; then
				ok "notebook (jupyter nbconvert): summary table and Perfetto button" \
					"shown, trace clean"
			else
				bad "notebook: check_trace $tmp/nb.pftrace"
			fi
		else
			bad "notebook: the executed notebook lacks the summary table or the button"
		fi
	else
		bad "notebook: jupyter nbconvert --execute"
		tail -30 "$tmp/nb.log"
	fi
else
	echo "notebook: Jupyter (nbconvert, nbclient, ipykernel) is not installed: a process" \
		"that starts CUDA before importing cuptrace instead"
	if run notebook notebook "$tmp/nb.pftrace" &&
		"$chk" "$tmp/nb.pftrace" --clean --at-least kernel=10 >/dev/null 2>&1; then
		ok "notebook (CUDA before import): $(field "$tmp/notebook.json" kernels) kernels"
	else
		bad "notebook (CUDA before import)"
	fi
fi

# conflict: torch.profiler and cuptrace refuse each other, then tracing works.
if run conflict conflict "$tmp/conflict.pftrace"; then
	if [ "$(grep -c '^refused: ' "$tmp/conflict.log")" = 2 ] &&
		[ "$(field "$tmp/conflict.json" kernels)" -gt 0 ]; then
		ok "conflict: both refusals raised ProfilerConflict:"
		sed -n 's/^refused: /    /p' "$tmp/conflict.log"
	else
		bad "conflict: $(cat "$tmp/conflict.log")"
	fi
fi

# graphs and compile: the numbers do not change under tracing (asserted in the helper).
if run graphs graphs "$tmp/graphs.pftrace"; then
	gk=$(field "$tmp/graphs.json" kernels)
	# 10 replays of two graphs of the same model (5 each), node by node: the kernels that carry
	# a graph id come 5 per graph id per node. Kernels outside a graph (the capture's set-up
	# work, if any) are not counted here.
	"$ct" convert "$tmp/graphs.pftrace" -o "$tmp/graphs.trace.json" >/dev/null 2>&1
	per=$(python3 - "$tmp/graphs.trace.json" <<'PY'
import collections, json, sys
ev = json.load(open(sys.argv[1]))
ev = ev["traceEvents"] if isinstance(ev, dict) else ev
n = collections.Counter((e["args"]["graph_id"], e["args"].get("graph_node_id")) for e in ev
                        if e.get("ph") == "X" and e.get("cat") == "kernel"
                        and "graph_id" in e.get("args", {}))
graphs = {g for g, _ in n}
print(len(graphs), sum(n.values()), sorted(set(n.values())))
PY
)
	if [ "$gk" -ge 10 ] && [ "${per%% *}" = 2 ] && [ "${per##* }" = "[5]" ] &&
		"$chk" "$tmp/graphs.pftrace" --clean >/dev/null 2>&1; then
		ok "graphs: captured and replayed graphs computed the same traced and not; $gk kernels (graphs, graph kernels, launches per node: $per)"
	else
		bad "graphs: $gk kernels; graphs, graph kernels, launches per node: $per (want 2, a multiple of 10, [5]); or check_trace --clean failed: $("$chk" "$tmp/graphs.pftrace" --clean 2>&1 | tail -2)"
	fi
fi
if run compile compile "$tmp/compile.pftrace"; then
	if grep -q '^SKIP' "$tmp/compile.log"; then
		echo "SKIP compile: $(sed -n 's/^SKIP: //p' "$tmp/compile.log")"
	elif "$chk" "$tmp/compile.pftrace" --clean --at-least kernel:triton=2 >"$tmp/compile.chk" 2>&1
	then
		ok "compile: torch.compile computed the same traced and not; Triton kernels traced"
	else
		bad "compile: $(cat "$tmp/compile.chk")"
	fi
fi

# record: record's session is record's; ranges reach its trace.
if timeout 300 "$ct" record --no-summary -o "$tmp/underrec.pftrace" -- \
	python3 "$py" under_record 6 >"$tmp/underrec.log" 2>&1; then
	sed -n 's/^RESULT //p' "$tmp/underrec.log" >"$tmp/underrec.json"
	on_thread "$tmp/underrec.pftrace" rec_step "$(field "$tmp/underrec.json" tid)" \
		>"$tmp/underrec.on"
	read -r here elsewhere <"$tmp/underrec.on"
	if [ "${here:-}" = 6 ] && [ "${elsewhere:-}" = 0 ]; then
		ok "record: cuptrace_end refused with -EPERM; 6 range slices on the thread in record's trace"
	else
		bad "record: range slices (on the thread, elsewhere): $(cat "$tmp/underrec.on")"
	fi
else
	bad "record: $(tail -5 "$tmp/underrec.log")"
fi

# The callbacks, steps 3..5, against record --steps 3,3 of the same training.
for lib in lightning transformers; do
	if ! python3 -c "import $lib" 2>/dev/null &&
		! { [ $lib = lightning ] && python3 -c "import pytorch_lightning" 2>/dev/null; }; then
		echo "SKIP $lib callback: $lib is not installed"
		continue
	fi
	run $lib $lib "$tmp/$lib.pftrace" 3 3 || continue
	ck=$(field "$tmp/$lib.json" kernels)
	if timeout 300 "$ct" record --steps 3,3 --no-summary -o "$tmp/$lib-rec.pftrace" -- \
		python3 "$py" $lib - 3 3 >"$tmp/$lib-rec.log" 2>&1; then
		rk=$(kernels "$tmp/$lib-rec.pftrace")
		if [ "$ck" -gt 0 ] && [ "$ck" = "$rk" ]; then
			ok "$lib callback: $ck kernels in steps 3..5; record --steps 3,3: $rk"
		else
			bad "$lib callback: $ck kernels in steps 3..5; record --steps 3,3: $rk"
		fi
	else
		bad "$lib: record --steps 3,3"
		tail -20 "$tmp/$lib-rec.log"
	fi
done
if [ $fail -eq 0 ]; then
	echo "gpu_python_test: ok"
	rm -rf "$tmp"
fi
exit $fail
