#!/bin/sh
# Planted problems found by `cuptrace analyze` on a GPU (issue 26): PyTorch training loops, each
# with one problem, recorded with `cuptrace record --pytorch`; the finding must be there, and the
# clean loop must get no severe finding. Skips (77) without a GPU or PyTorch.
set -u
ct=$CUPTRACE_BIN
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
	echo "SKIP: no GPU"
	exit 77
fi
if ! python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
	echo "SKIP: no PyTorch with CUDA"
	exit 77
fi
tmp=$(mktemp -d "${CUPTRACE_TMP:-/tmp}/gpuanalyze.XXXXXX")
n=0
fail=0
cat >"$tmp/loop.py" <<'PY'
import sys, torch
case = sys.argv[1]
m = torch.nn.Sequential(torch.nn.Linear(2048, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 10)).cuda()
opt = torch.optim.SGD(m.parameters(), lr=0.01)
x_host = torch.randn(256, 2048)              # pageable
x_pinned = x_host.pin_memory()
for step in range(30):
    with torch.profiler.record_function(f"ProfilerStep#{step}"):
        x = (x_host if case == "pageable" else x_pinned).cuda(non_blocking=True)
        if case == "alloc":
            torch.cuda.empty_cache()
            x = x + torch.empty(256, 2048, device="cuda").zero_()
        loss = m(x).square().mean()
        opt.zero_grad(); loss.backward(); opt.step()
        if case == "item":
            print(loss.item(), end="\r")
        if case == "tiny":
            t = torch.zeros(1, device="cuda")
            for _ in range(300):
                t += 1
torch.cuda.synchronize()
PY
for case in clean pageable item tiny alloc; do
	"$ct" record -o "$tmp/$case.pftrace" --pytorch -- python3 "$tmp/loop.py" $case >/dev/null 2>&1 ||
		{ echo "FAIL: record $case"; fail=$((fail + 1)); continue; }
	"$ct" analyze --json "$tmp/$case.pftrace" >"$tmp/$case.json" ||
		{ echo "FAIL: analyze $case"; fail=$((fail + 1)); continue; }
	python3 - "$tmp/$case.json" "$case" <<'PY' && n=$((n + 1)) || fail=$((fail + 1))
import json, sys
j = json.load(open(sys.argv[1])); case = sys.argv[2]
want = {"clean": None, "pageable": "pageable_copy", "item": "item_copy",
        "tiny": "tiny_kernels", "alloc": "alloc_steady"}[case]
ids = {f["id"]: f for f in j["findings"]}
severe = [f["id"] for f in j["findings"] if f["severe"]]
if want is None:
    assert not severe, f"clean loop: severe findings {severe}"
else:
    assert want in ids, f"{case}: {want} not found in {list(ids)}"
print(case, "ok", list(ids))
PY
done
rm -rf "$tmp"
echo "gpu_analyze_test: $n passed, $fail failed"
[ $fail -eq 0 ]
