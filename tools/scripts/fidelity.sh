#!/bin/sh
# Fidelity check (GPU machine): the same PyTorch training loop (examples/torch_train.py: CNN,
# forward + backward + SGD step) under torch.profiler and, in a separate process (one CUPTI
# client per process), under cuptrace. Compares kernel, copy and memset counts, the sum of
# kernel durations, and the share of GPU activities with an incoming flow. Twice each, to show
# the run-to-run spread of the duration sum.
#   tools/scripts/fidelity.sh BUILD_DIR [steps]
set -eu
build=$(cd "$1" && pwd)
steps=${2:-5}
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
for run in 1 2; do
	python3 "$src/examples/torch_train.py" --steps "$steps" --profile "$tmp/prof$run.json" 2>/dev/null |
		tail -1 >"$tmp/prof$run.sum"
	"$build/cuptrace" record --no-summary -o "$tmp/ct$run.pftrace" -- \
		python3 "$src/examples/torch_train.py" --steps "$steps" >/dev/null 2>&1
	"$build/cuptrace" convert "$tmp/ct$run.pftrace" -o "$tmp/ct$run.json"
done
python3 - "$tmp" <<'PY'
import json, sys
tmp = sys.argv[1]
print(f"{'run':<5} {'tool':<16} {'kernels':>8} {'kernel ms':>10} {'memcpy':>7} {'memset':>7} {'with flow':>10}")
for run in (1, 2):
    p = json.load(open(f"{tmp}/prof{run}.sum"))
    print(f"{run:<5} {'torch.profiler':<16} {p['kernels']:>8} {p['kernel_us']/1e3:>10.3f} {p['memcpy']:>7} {p['memset']:>7} {'':>10}")
    ev = json.load(open(f"{tmp}/ct{run}.json"))
    x = [e for e in ev if e.get("ph") == "X"]
    gpu = [e for e in x if e.get("cat") in ("kernel", "memcpy", "memset")]
    fin = [e for e in ev if e.get("ph") == "f"]
    # An 'f' binds to the GPU slice that encloses it on the same track.
    keyed = {}
    for e in gpu:
        keyed.setdefault((e["pid"], e["tid"]), []).append(e)
    linked = set()
    for f in fin:
        for e in keyed.get((f["pid"], f["tid"]), []):
            if e["ts"] <= f["ts"] <= e["ts"] + e["dur"]:
                linked.add(id(e))
    k = [e for e in gpu if e["cat"] == "kernel"]
    share = 100.0 * len(linked) / max(1, len(gpu))
    print(f"{run:<5} {'cuptrace':<16} {len(k):>8} {sum(e['dur'] for e in k)/1e3:>10.3f} "
          f"{sum(1 for e in gpu if e['cat']=='memcpy'):>7} {sum(1 for e in gpu if e['cat']=='memset'):>7} {share:>9.1f}%")
PY
rm -rf "$tmp"
