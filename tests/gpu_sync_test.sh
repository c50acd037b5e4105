#!/bin/sh
# GPU test (issue 45): synchronizations timed by cuptrace's callbacks (--sync-records callback)
# against CUPTI's SYNCHRONIZATION records (the default, --sync-records cupti), and the driver calls left out by
# default (--driver work) against --driver user. On the examples that synchronize (device,
# stream and event syncs, stream waits, on worker threads, through the driver): each run
# recorded both ways, and the traces must have the same synchronization slices, each a child
# of its call with the same correlation id, one per synchronizing call (counted from the API
# slices, independently of the sync slices), with the same stream and the same events (CUPTI
# numbers events its own way: the same event must be one number, two events two); and the same
# GPU work with the same arrows. Skips without a GPU.
set -u
# shellcheck source=tests/gpu_common.sh
gpu_test=gpu_sync
. "$(dirname "$0")/gpu_common.sh"
fail=0
run() { # out options... -- command...
	out=$1
	shift
	timeout 120 "$ct" record --no-summary -o "$tmp/$out.pftrace" "$@" >"$tmp/$out.log" 2>&1 &&
		"$ct" convert "$tmp/$out.pftrace" -o "$tmp/$out.json" >>"$tmp/$out.log" 2>&1
}
compare() { # name: compares $tmp/NAME-cb.json (callbacks) with $tmp/NAME-cupti.json
	python3 - "$tmp/$1-cb.json" "$tmp/$1-cupti.json" <<'PY'
import collections, json, re, sys
SYNC_CALL = re.compile(r"^(cuda(Device|Thread|Stream|Event)Synchronize|cudaStream(WaitEvent|Query)"
                       r"|cudaEventQuery|cu(Ctx|Stream|Event)Synchronize|cuStream(WaitEvent|Query)"
                       r"|cuEventQuery)(_v\d+|_ptsz|_ptds)*$")
def load(p):
    ev = json.load(open(p))
    ev = ev["traceEvents"] if isinstance(ev, dict) else ev
    x = [e for e in ev if e.get("ph") == "X"]
    api = {e["args"]["correlation_id"]: e for e in x
           if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation_id" in e.get("args", {})}
    syncs = [e for e in x if e.get("cat") == "sync"]
    gpu = collections.Counter(e["cat"] for e in x if e.get("cat") in ("kernel", "memcpy", "memset"))
    flows = sum(1 for e in ev if e.get("ph") == "f")
    # Every synchronizing call's slice, by name: a call must not be drawn twice (a second
    # record of it, e.g. from the trivial-call watch, would collapse in `api` above).
    ncalls = collections.Counter(e["name"] for e in x if e.get("cat") in ("cuda_runtime", "cuda_driver")
                                 and SYNC_CALL.match(e["name"]))
    return api, syncs, gpu, flows, ncalls
fails = []
res = {}
for mode, path in (("callback", sys.argv[1]), ("cupti", sys.argv[2])):
    api, syncs, gpu, flows, ncalls = load(path)
    calls = [a for a in api.values() if SYNC_CALL.match(a["name"])]
    per = collections.Counter()
    for s in syncs:
        a = api.get(s["args"].get("correlation_id"))
        if not a:
            fails.append("%s: %s without its call" % (mode, s["name"]))
            continue
        if not (a["tid"] == s["tid"] and a["ts"] <= s["ts"] + 1e-3 and
                s["ts"] + s["dur"] <= a["ts"] + a["dur"] + 1e-3):
            fails.append("%s: %s not inside its %s" % (mode, s["name"], a["name"]))
        per[(a["name"], s["name"], s["args"].get("stream", -1))] += 1
    # Events by call: how many syncs each event had, as a sorted list (the numbers differ).
    ev = collections.defaultdict(collections.Counter)
    for s in syncs:
        if "event" in s["args"]:
            a = api.get(s["args"].get("correlation_id"))
            ev[a["name"] if a else "?"][s["args"]["event"]] += 1
    evshape = {k: sorted(v.values()) for k, v in ev.items()}
    res[mode] = (per, evshape, gpu, flows, ncalls)
    print("%s: %d synchronizing calls, %d sync slices %s; events %s; gpu %s, flows %d" % (
        mode, len(calls), len(syncs), dict(per), evshape, dict(gpu), flows))
    if not syncs:
        fails.append("%s: no sync slice" % mode)
    if mode == "callback" and len(syncs) != len(calls):
        fails.append("callback: %d sync slices for %d synchronizing calls" % (len(syncs), len(calls)))
for i, what in enumerate(("sync slices by call, name and stream", "events", "GPU work", "flows",
                          "synchronizing call slices")):
    if res["callback"][i] != res["cupti"][i]:
        fails.append("%s differ: --sync-records callback %s, cupti %s" % (
            what, res["callback"][i], res["cupti"][i]))
for f in fails:
    print("FAIL:", f)
sys.exit(1 if fails else 0)
PY
}
# name command...
for spec in "vector_add vector_add" "memory memory" "graphs graphs" "nvtx nvtx" \
	"multi_stream multi_stream 4 200" "steps steps --steps 10" \
	"driver_api driver_api"; do
	# shellcheck disable=SC2086
	set -- $spec
	name=$1
	shift
	prog=$1
	shift
	if run "$name-cb" --sync-records callback -- "$ex/$prog" "$@" && run "$name-cupti" --sync-records cupti -- "$ex/$prog" "$@" &&
		compare "$name"; then
		echo "ok $name: the same synchronizations from callbacks as from CUPTI"
	else
		echo "FAIL $name"; cat "$tmp/$name-cb.log" "$tmp/$name-cupti.log"; fail=1
	fi
done
# The summary's count of trivial runtime calls left out names no synchronizing call: those have
# callbacks for their sync slices, which the trivial-call count must not take for its own.
if timeout 120 "$ct" record --sync-records callback -o "$tmp/sum.pftrace" -- "$ex/multi_stream" 4 200 >/dev/null 2>"$tmp/sum.log" &&
	! grep 'trivial runtime calls' "$tmp/sum.log" | grep -q 'Synchronize\|WaitEvent\|Query'; then
	echo "ok summary: no synchronizing call counted as a trivial one"
else
	echo "FAIL summary: $(grep 'trivial runtime calls' "$tmp/sum.log")"; fail=1
fi
# PyTorch (event queries and syncs of its caching allocator and streams), where there is one.
if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
	src=${CUPTRACE_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
	if run torch-cb --sync-records callback -- python3 "$src/examples/torch_train.py" --steps 3 &&
		run torch-cupti --sync-records cupti -- python3 "$src/examples/torch_train.py" --steps 3 &&
		compare torch; then
		echo "ok torch_train: the same synchronizations"
	else
		echo "FAIL torch_train"; tail -5 "$tmp/torch-cb.log" "$tmp/torch-cupti.log"; fail=1
	fi
else
	echo "SKIP torch_train: no PyTorch with CUDA"
fi
# --driver work (default) leaves out examples/driver_api's cuDeviceGet and cuModuleGetFunction
# (no GPU work), which --driver user records; its launches, copies and synchronization stay,
# with the same arrows to the same GPU work.
if run da-user --driver user -- "$ex/driver_api" &&
	python3 - "$tmp/driver_api-cupti.json" "$tmp/da-user.json" <<'PY'
import collections, json, sys
def load(p):
    ev = json.load(open(p))
    ev = ev["traceEvents"] if isinstance(ev, dict) else ev
    x = [e for e in ev if e.get("ph") == "X"]
    drv = collections.Counter(e["name"] for e in x if e.get("cat") == "cuda_driver")
    gpu = collections.Counter(e["cat"] for e in x if e.get("cat") in ("kernel", "memcpy", "memset"))
    return drv, gpu, sum(1 for e in ev if e.get("ph") == "f")
(dw, gw, fw), (du, gu, fu) = load(sys.argv[1]), load(sys.argv[2])
print("work:", dict(dw), "\nuser:", dict(du))
ok = (dw["cuLaunchKernel"] == 3 and du["cuLaunchKernel"] == 3 and dw["cuCtxSynchronize"] >= 1
      and du["cuModuleGetFunction"] >= 1 and dw["cuModuleGetFunction"] == 0
      and du["cuDeviceGet"] >= 1 and dw["cuDeviceGet"] == 0
      and all(dw[k] == du[k] for k in dw) and gw == gu and fw == fu and fw > 0)
sys.exit(0 if ok else 1)
PY
then
	echo "ok driver_api: getters left out by default, kept by --driver user, same GPU work and arrows"
else
	echo "FAIL driver_api --driver work/user"; cat "$tmp/da-user.log"; fail=1
fi
rm -rf "$tmp"
exit $fail
