#!/bin/sh
# GPU test: records every example live with `cuptrace record` (default .pftrace, and Chrome
# JSON for one) and asserts exact counts, flows and a clean timeline, with our reader and, where
# shared/tools/ is beside the checkout, in Perfetto's trace processor. Skips without a GPU.
set -u
# shellcheck source=tests/gpu_common.sh
gpu_test=gpu
. "$(dirname "$0")/gpu_common.sh"
fail=0
rec() { # name out command... : records; then check NAME OUT assertions...
	name=$1 out=$2
	shift 2
	if ! timeout 90 "$ct" record -o "$tmp/$out" -- "$@" >"$tmp/$name.log" 2>&1; then
		echo "FAIL $name: record failed"; cat "$tmp/$name.log"; fail=1; return 1
	fi
	grep "cuptrace:" "$tmp/$name.log"
}
check() { # name out assertions...
	name=$1 out=$2
	shift 2
	# Perfetto's trace processor reads the same kernel (and other category) counts and flows.
	prev="" && : >"$tmp/$name.tp"
	for a in "$@"; do
		case $prev:$a in
		--count:*:*) ;;
		--count:*) printf '%s\n' --category "$a" ;;
		--flows:*) printf '%s\n' --flows "$a" ;;
		esac >>"$tmp/$name.tp"
		prev=$a
	done
	if "$chk" "$tmp/$out" --clean "$@" && tp_check "$tmp/$out" "@$tmp/$name.tp"; then
		echo "ok $name"
	else
		echo "FAIL $name"; fail=1
	fi
}
rec vector_add va.pftrace "$ex/vector_add" &&
	check vector_add va.pftrace --count kernel=1 --count "memcpy:Memcpy HtoD=2" \
		--count "memcpy:Memcpy DtoH=1" --count memset=1 --flows 5 --meta gpu0 \
		--meta driver_version --meta cupti_version --meta cuda_driver_api_version \
		--meta hostname --meta cmdline
rec multi_stream ms.pftrace "$ex/multi_stream" 8 1000 &&
	check multi_stream ms.pftrace --count kernel=8000 --count cuda_runtime:cudaLaunchKernel=8000 \
		--threads worker-=8 --flows 8002
rec driver_api da.pftrace "$ex/driver_api" &&
	check driver_api da.pftrace --count kernel:scale=3 --count cuda_driver:cuLaunchKernel=3 \
		--count cuda_runtime=0
rec graphs gr.pftrace "$ex/graphs" &&
	check graphs gr.pftrace --count kernel=12 --count memset=3 --count memcpy=3 --flows 18
# --cuda-graphs graph: each launch one slice "CUDA graph N" on its stream (CUPTI's GRAPH_TRACE),
# linked to its cudaGraphLaunch; its nodes have no records. A slice spans its graph, so it is
# at least as long as the longest node in the node-by-node trace above (another run: 10% slack).
if timeout 90 "$ct" record --cuda-graphs graph -o "$tmp/grg.pftrace" -- "$ex/graphs" \
	>"$tmp/grg.log" 2>&1 && grep "cuptrace: 3 CUDA graph launches" "$tmp/grg.log" &&
	"$chk" "$tmp/grg.pftrace" --clean --count graph=3 --count kernel=0 --count memset=0 \
		--count memcpy=0 --count cuda_runtime:cudaGraphLaunch=3 --flows 3 &&
	tp_check "$tmp/grg.pftrace" --category graph=3 --category kernel=0 --flows 3 &&
	"$ct" convert "$tmp/grg.pftrace" -o "$tmp/grg.json" && "$ct" convert "$tmp/gr.pftrace" -o "$tmp/gr.json" &&
	python3 - "$tmp/grg.json" "$tmp/gr.json" <<'PY'
import json, sys
def x(p):
    ev = json.load(open(p))
    return [e for e in (ev["traceEvents"] if isinstance(ev, dict) else ev) if e.get("ph") == "X"]
g = [e for e in x(sys.argv[1]) if e.get("cat") == "graph"]
k = max(e["dur"] for e in x(sys.argv[2]) if e.get("cat") == "kernel")
print("graph slices %s us, longest node %.1f us" % ([round(e["dur"], 1) for e in g], k))
sys.exit(0 if len(g) == 3 and all(e["name"].startswith("CUDA graph ") and e["dur"] >= 0.9 * k
                                  for e in g) else 1)
PY
then echo "ok graphs --cuda-graphs graph"; else echo "FAIL graphs --cuda-graphs graph"; cat "$tmp/grg.log"; fail=1; fi
# The replay loop of the benchmark (50 kernels a graph): one slice per launch, none missed (and
# the one memset before the loop).
if timeout 90 "$ct" record --cuda-graphs graph -o "$tmp/grr.pftrace" -- "$ex/graph_replay" 50 200 \
	>"$tmp/grr.log" 2>&1; then
	launches=$(($(sed -n 's/.*"kernels_launched": \([0-9]*\).*/\1/p' "$tmp/grr.log") / 50))
	check graph_replay_graph grr.pftrace --count graph="$launches" --count kernel=0 \
		--count cuda_runtime:cudaGraphLaunch="$launches" --count memset=1 --flows $((launches + 1))
else
	echo "FAIL graph_replay --cuda-graphs graph"; cat "$tmp/grr.log"; fail=1
fi
# Node by node, a run that is mostly graph replays gets a hint towards --cuda-graphs graph, and
# the trace says how much ran in graphs (440 launches of 50 kernels, and one memset outside).
if timeout 90 "$ct" record -o "$tmp/grn.pftrace" -- "$ex/graph_replay" 50 400 >"$tmp/grn.log" 2>&1 &&
	grep "cuptrace: 22000 of 22001 kernels, copies and memsets ran in CUDA graphs; .record --cuda-graphs graph." "$tmp/grn.log" &&
	"$ct" stats "$tmp/grn.pftrace" | grep -E "^gpu_activities_in_graphs: *22000$"; then
	echo "ok graph_replay hint"
else
	echo "FAIL graph_replay hint"; cat "$tmp/grn.log"; "$ct" stats "$tmp/grn.pftrace" | grep -i graph; fail=1
fi
# Graphs launched from the GPU (examples/device_graph 4 20 MODE: 20 host launches of a
# one-kernel graph whose kernel launches a 4-kernel graph, fire and forget, as a tail launch or
# as a sibling; the program counts the 100 kernels that ran). Node by node CUPTI records none of
# the launched graph's work: only the 20 launcher kernels (and a copy and a memset) are there,
# and the summary and the trace's metadata say what is missing. Per graph, every launch is a
# slice: 20 linked to cudaGraphLaunch, and 20 on the track "Graphs launched from the GPU" with
# no API call to link to, each with its launch mode, starting once its launcher has started (a
# tail launch: once its launcher has ended).
for mode in fire tail sibling; do
if timeout 90 "$ct" record -o "$tmp/dgn.pftrace" -- "$ex/device_graph" 4 20 $mode >"$tmp/dgn.log" 2>&1 &&
	grep "device_graph: $mode, worker kernels 4, replays 20, kernels ran 100" "$tmp/dgn.log" &&
	grep "cuptrace: 1 CUDA graphs were instantiated for launch from the GPU: node by node" "$tmp/dgn.log" &&
	"$chk" "$tmp/dgn.pftrace" --clean --count kernel=20 --count kernel:launcher=20 --flows 22 &&
	"$ct" stats "$tmp/dgn.pftrace" | grep -E "^graphs_for_device_launch_unrecorded: *1$"; then
	echo "ok device_graph $mode node by node"
else
	echo "FAIL device_graph $mode node by node"; cat "$tmp/dgn.log"; fail=1
fi
if timeout 90 "$ct" record --cuda-graphs graph -o "$tmp/dgg.pftrace" -- "$ex/device_graph" 4 20 $mode \
	>"$tmp/dgg.log" 2>&1 && grep "cuptrace: 40 CUDA graph launches" "$tmp/dgg.log" &&
	grep "device_graph: $mode, worker kernels 4, replays 20, kernels ran 100" "$tmp/dgg.log" &&
	! grep "instantiated for launch from the GPU" "$tmp/dgg.log" &&
	"$chk" "$tmp/dgg.pftrace" --clean --allow-unlinked 20 --count graph=40 --count kernel=0 \
		--count cuda_runtime:cudaGraphLaunch=20 --flows 22 &&
	tp_check "$tmp/dgg.pftrace" --category graph=40 --category kernel=0 --flows 22 &&
	"$ct" stats "$tmp/dgg.pftrace" | grep -E "^device_graph_launches: *20$" &&
	"$ct" convert "$tmp/dgg.pftrace" -o "$tmp/dgg.json" && python3 - "$tmp/dgg.json" $mode <<'PY'
import json, sys
ev = json.load(open(sys.argv[1]))
ev = ev["traceEvents"] if isinstance(ev, dict) else ev
mode = {"fire": "fire and forget", "tail": "tail",
        "sibling": "fire and forget, as sibling"}[sys.argv[2]]
names = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev
         if e.get("ph") == "M" and e.get("name") == "thread_name"}
g = [e for e in ev if e.get("ph") == "X" and e.get("cat") == "graph"]
dev = sorted((e for e in g if names.get((e["pid"], e["tid"])) == "Graphs launched from the GPU"),
             key=lambda e: e["ts"])
host = sorted((e for e in g if e not in dev), key=lambda e: e["ts"])
# One replay at a time (the program synchronizes after each): the i-th launched graph belongs
# to the i-th launcher.
after = [d["ts"] - (h["ts"] + (h["dur"] if mode == "tail" else 0)) for h, d in zip(host, dev)]
print("graph slices %d, launched from the GPU %d, modes %s, start after the launcher's %s: "
      "min %.3f us" % (len(g), len(dev), sorted({e["args"].get("device_launch") for e in dev}),
                       "end" if mode == "tail" else "start", min(after)))
sys.exit(0 if len(g) == 40 and len(dev) == 20 and len(host) == 20 and
         all(e["args"].get("device_launch") == mode for e in dev) and min(after) >= 0 else 1)
PY
then echo "ok device_graph $mode --cuda-graphs graph"; else echo "FAIL device_graph $mode --cuda-graphs graph"; cat "$tmp/dgg.log"; fail=1; fi
done
# One GPU: 5 copies. Two: cudaMemcpyPeer without peer access is staged as two copies.
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c "^GPU")
[ "$ngpu" -gt 8 ] && ngpu=8
if [ "$ngpu" -ge 2 ]; then copies=6; else copies=5; fi
rec peer_copy pc.pftrace "$ex/peer_copy" && check peer_copy pc.pftrace --count memcpy=$copies
rec memory mem.pftrace "$ex/memory" && check memory mem.pftrace --count kernel=3
rec nvtx nv.pftrace "$ex/nvtx" &&
	check nvtx nv.pftrace --count kernel=4 --count nvtx:outer=1 --count nvtx:inner=1 \
		--count nvtx:async-range=1 --count cuptrace-demo:domain-range=1 \
		--count nvtx:nested-start-end=1
# Chrome JSON: strict JSON, same counts, flows as s/f pairs.
if "$ct" record -o "$tmp/va.json" -- "$ex/vector_add" >"$tmp/json.log" 2>&1 &&
	python3 - "$tmp/va.json" <<'PY' &&
import json, sys
def bad(x): raise ValueError(x)
ev = json.load(open(sys.argv[1]), parse_constant=bad)
ev = ev["traceEvents"] if isinstance(ev, dict) else ev
x = [e for e in ev if e.get("ph") == "X"]
k = sum(1 for e in x if e.get("cat") == "kernel")
m = sum(1 for e in x if e.get("cat") == "memcpy")
s = {e["id"] for e in ev if e.get("ph") == "s"}
f = {e["id"] for e in ev if e.get("ph") == "f" and e.get("bp") == "e"}
print(f"json: {k} kernels, {m} memcpys, {len(s & f)} flows")
sys.exit(0 if (k, m, len(s & f)) == (1, 3, 5) else 1)
PY
	tp_check "$tmp/va.json" --category kernel=1 --category memcpy=3 --flows 5
then echo "ok vector_add_json"; else echo "FAIL vector_add_json"; cat "$tmp/json.log"; fail=1; fi
# The C API: only the 5 kernels between cuptrace_start and cuptrace_stop.
if LD_LIBRARY_PATH="$(dirname "$CUPTRACE_LIB")" "$ex/c_api" "$tmp/capi.pftrace" >"$tmp/capi.log" 2>&1 &&
	"$chk" "$tmp/capi.pftrace" --clean --count kernel=5 &&
	tp_check "$tmp/capi.pftrace" --category kernel=5; then
	echo "ok c_api"
else
	echo "FAIL c_api"; cat "$tmp/capi.log"; fail=1
fi
# A C API start after CUDA started, asked for whole graphs: refused (CUPTI 13.0 crashes on graphs
# made before), said once, and the 5 kernels recorded as usual.
if LD_LIBRARY_PATH="$(dirname "$CUPTRACE_LIB")" CUPTRACE_CUDA_GRAPHS=graph "$ex/c_api" \
	"$tmp/capig.pftrace" >"$tmp/capig.log" 2>&1 &&
	[ "$(grep -c "cuda-graphs graph is not used by a start after CUDA did" "$tmp/capig.log")" = 1 ] &&
	"$chk" "$tmp/capig.pftrace" --clean --count kernel=5; then
	echo "ok c_api --cuda-graphs graph after CUDA started"
else
	echo "FAIL c_api --cuda-graphs graph after CUDA started"; cat "$tmp/capig.log"; fail=1
fi
# GPU metrics from a C API start after CUDA started: the context made before is found (through
# the driver the runtime opened out of the global scope) and sampled.
if LD_LIBRARY_PATH="$(dirname "$CUPTRACE_LIB")" CUPTRACE_GPU_METRICS=1 "$ex/c_api" \
	"$tmp/capim.pftrace" >"$tmp/capim.log" 2>&1 &&
	"$ct" stats "$tmp/capim.pftrace" >"$tmp/capim.stats" 2>&1 &&
	grep -E "^gpu_metrics: *sampled" "$tmp/capim.stats" &&
	"$chk" "$tmp/capim.pftrace" --clean --count kernel=5; then
	echo "ok c_api --gpu-metrics after CUDA started"
else
	echo "FAIL c_api --gpu-metrics after CUDA started"; cat "$tmp/capim.log"; grep -i metric "$tmp/capim.stats"; fail=1
fi
# Every GPU gets its own group; with two, a peer-to-peer copy.
if [ "$ngpu" -ge 2 ]; then peer='--count memcpy:Memcpy PtoP=1'; else peer='--count memcpy=0'; fi
# shellcheck disable=SC2086
rec multi_gpu mg.pftrace "$ex/multi_gpu" &&
	check multi_gpu mg.pftrace --groups "$ngpu" --count kernel=$((2 * ngpu)) \
		--count memset="$ngpu" "$(echo "$peer" | cut -d' ' -f1)" "$(echo "$peer" | cut -d' ' -f2-)"
# CUPTI already held by another tool in the program: a clear message, no trace, and the
# program still runs to its end.
busy=${CUPTI_BUSY:-$(dirname "$chk")/cupti_busy}
timeout 90 "$ct" record -o "$tmp/busy.pftrace" -- "$busy" >"$tmp/busy.out" 2>"$tmp/busy.err"
st=$?
if [ "$st" = 1 ] && grep -q "CUPTI is already in use" "$tmp/busy.err" &&
	grep -q "ran to the end" "$tmp/busy.out" && [ ! -s "$tmp/busy.pftrace" ]; then
	echo "ok cupti_busy: $(grep -m1 "already in use" "$tmp/busy.err")"
else
	echo "FAIL cupti_busy (exit $st)"; cat "$tmp/busy.err" "$tmp/busy.out"; fail=1
fi
# A GPU CUPTI cannot trace (made so here by raising the bar above this GPU): named, with its
# compute capability, before the program runs; exit 1, no file.
CUPTRACE_MIN_COMPUTE=200 timeout 60 "$ct" record -o "$tmp/old.pftrace" -- "$ex/vector_add" >"$tmp/old.log" 2>&1
st=$?
if [ "$st" = 1 ] && grep -q "cannot be traced: CUDA 13's CUPTI supports compute capability 20.0" "$tmp/old.log" &&
	[ ! -e "$tmp/old.pftrace" ] && ! grep -q "vector_add:" "$tmp/old.log"; then
	echo "ok unsupported GPU: $(head -1 "$tmp/old.log")"
else
	echo "FAIL unsupported GPU (exit $st)"; cat "$tmp/old.log"; fail=1
fi
# A graph whose middle node runs for two seconds while other kernels come and go: all 21 of
# its kernels keep their arrow from the one cudaGraphLaunch.
slow=$(dirname "$chk")/graph_slow_node
if rec graph_slow_node gs.pftrace "$slow"; then
	side=$(sed -n 's/^graph_slow_node: \([0-9]*\) side launches$/\1/p' "$tmp/graph_slow_node.log")
	check graph_slow_node gs.pftrace --count kernel=$((21 + ${side:-0})) \
		--count cuda_runtime:cudaGraphLaunch=1 --flows $((21 + ${side:-0}))
fi
# Child processes: one complete trace each, none overwritten.
mkdir -p "$tmp/mp"
if "$ct" record -o "$tmp/mp/mp.pftrace" -- "$ex/multi_process" 2 >"$tmp/mp.log" 2>&1; then
	n=0
	for f in "$tmp"/mp/mp-*.pftrace; do
		"$chk" "$f" --clean --count kernel=2 && tp_check "$f" --category kernel=2 && n=$((n + 1))
	done
	if "$chk" "$tmp/mp/mp.pftrace" --clean --count kernel=1 &&
		tp_check "$tmp/mp/mp.pftrace" --category kernel=1 && [ "$n" = 2 ]; then
		echo "ok multi_process: parent + $n child traces"
	else
		echo "FAIL multi_process ($n child traces)"; ls -la "$tmp/mp"; fail=1
	fi
else
	echo "FAIL multi_process: record failed"; cat "$tmp/mp.log"; fail=1
fi
# Nothing lost (issue 41): the trace is written under a partial name beside its target
# (.NAME.cuptrace-PID.partial) and renamed onto it only when complete, so an older trace of
# that name is never destroyed by a run that failed or recorded nothing. (gpu_signals_test.sh:
# SIGKILL; nothing_lost_test.sh: record's side, without a GPU.)
nl=$tmp/nl
mkdir -p "$nl"
partials() { ls -a "$1" | grep '\.partial$'; }
"$ct" convert "${CUPTRACE_TEST_DATA:-$(dirname "$0")/data}/vector_add.cupti" -o "$nl/keep.pftrace" 2>/dev/null ||
	{ echo "FAIL: convert tests/data/vector_add.cupti"; fail=1; }
old() { # NAME: an earlier run's trace (an hour old) as $nl/NAME
	cp "$nl/keep.pftrace" "$nl/$1" && touch -d "@$(($(date +%s) - 3600))" "$nl/$1"
}
# A command that fails before CUDA starts, and one that starts CUDA (the driver injects the
# library, which opens its partial file) but does no work: the old trace byte for byte.
old run.pftrace
timeout 60 "$ct" record -o "$nl/run.pftrace" -- sh -c 'exit 3' >"$nl/a.log" 2>&1
st=$?
if [ "$st" = 3 ] && cmp -s "$nl/run.pftrace" "$nl/keep.pftrace" && [ -z "$(partials "$nl")" ]; then
	echo "ok nothing lost: a command failing before CUDA leaves the old trace"
else
	echo "FAIL nothing lost: failing command (exit $st)"; cat "$nl/a.log"; ls -la "$nl"; fail=1
fi
timeout 60 "$ct" record -o "$nl/run.pftrace" -- python3 -c \
	'import ctypes, sys; assert ctypes.CDLL("libcuda.so.1").cuInit(0) == 0; sys.exit(3)' >"$nl/b.log" 2>&1
st=$?
if [ "$st" = 3 ] && grep -q "did no CUDA work" "$nl/b.log" && cmp -s "$nl/run.pftrace" "$nl/keep.pftrace" &&
	[ -z "$(partials "$nl")" ]; then
	echo "ok nothing lost: cuInit and exit 3 leaves the old trace: $(grep "did no CUDA work" "$nl/b.log")"
else
	echo "FAIL nothing lost: cuInit and exit (exit $st)"; cat "$nl/b.log"; ls -la "$nl"; fail=1
fi
# A normal run over an old trace, named through a symbolic link: while the program runs the old
# trace is there as it was and the new one is in one partial file beside it; at the end the new
# one replaces it, whole, the link stays a link, and no partial file is left.
ww=$(dirname "$chk")/window_work
old real.pftrace
ln -s real.pftrace "$nl/link.pftrace"
timeout 90 "$ct" record -o "$nl/link.pftrace" -- "$ww" spin 6 >"$nl/c.log" 2>&1 &
rec=$!
k=0
while ! grep -q ready "$nl/c.log" && [ $k -lt 60 ]; do sleep 1; k=$((k + 1)); done
sleep 2
during=$(partials "$nl")
cmp -s "$nl/real.pftrace" "$nl/keep.pftrace" && same=1 || same=0
wait "$rec"
st=$?
echo "during the run: old trace unchanged: $same; partial files: ${during:-none}"
if [ "$st" = 0 ] && [ "$same" = 1 ] && [ "$(echo "$during" | grep -c "^\.real\.pftrace\.cuptrace-[0-9]*\.partial$")" = 1 ] &&
	[ -L "$nl/link.pftrace" ] && [ -z "$(partials "$nl")" ] &&
	"$chk" "$nl/real.pftrace" --clean --at-least kernel:step_kernel=100 &&
	grep -q "trace written to $nl/link.pftrace" "$nl/c.log"; then
	echo "ok nothing lost: written aside, renamed over the old trace at the end, through the link"
else
	echo "FAIL nothing lost: normal run over an old trace (exit $st)"; cat "$nl/c.log"; ls -la "$nl"; fail=1
fi
# Every format and a file per process: no partial file left after normal runs.
for out in va.pftrace.gz va.json.gz va.cupti; do
	old "$out"
	if timeout 90 "$ct" record -o "$nl/$out" -- "$ex/vector_add" >"$nl/d.log" 2>&1 &&
		"$chk" "$nl/$out" --count kernel=1 >/dev/null && ! cmp -s "$nl/$out" "$nl/keep.pftrace" &&
		[ -z "$(partials "$nl")" ]; then
		echo "ok nothing lost: $out replaced whole"
	else
		echo "FAIL nothing lost: $out"; cat "$nl/d.log"; ls -la "$nl"; fail=1
	fi
done
[ -z "$(partials "$tmp")$(partials "$tmp/mp")" ] || { echo "FAIL: partial files left: $(partials "$tmp") $(partials "$tmp/mp")"; fail=1; }
rm -rf "$tmp"
exit $fail
