#!/bin/sh
# GPU test: a torchrun job of 2 ranks (tests/gpu/ddp_train.py), recorded both ways a user would:
# cuptrace around torchrun (-o 'job-%r.pftrace'), and torchrun around cuptrace (--no-python).
# Each gives exactly one trace per rank and none for the launcher, with the rank metadata, each
# rank's kernels as many as CUPTI delivered, and `merge --ranks` of them holds every rank
# (tests/gpu/check_ranks.py), each rank names the GPU it used (gpus_used, its UUID and PCI bus
# id). With 2 GPUs or more the job is DDP over NCCL: each rank on a GPU of its own, NCCL kernels
# carry their collective, and in the merged trace each rank's GPU group is labelled with its GPU,
# the k-th all-reduce of each rank overlaps the other ranks', and the symmetric collectives end
# together. With one GPU the ranks share it and all-reduce over gloo (NCCL needs a GPU per rank).
# Run by hand: sh tests/gpu_ranks_test.sh (paths default to ./build, see gpu_common.sh).
# Skips without a GPU, PyTorch or torchrun. NVLink multicast stays off in every process.
set -u
gpu_test=gpu_ranks
. "$(dirname "$0")/gpu_common.sh"
if ! python3 -c "import torch, torch.distributed; assert torch.cuda.is_available()" 2>/dev/null ||
	! command -v torchrun >/dev/null 2>&1; then
	echo "SKIP: PyTorch with CUDA and torchrun are not installed here: ranks GPU test not run"
	exit 77
fi
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
src=$(cd "$(dirname "$0")" && pwd)
fail=0
steps=20
ngpu=$(python3 -c "import torch; print(torch.cuda.device_count())")
export RANKS_NGPU=$ngpu # check_ranks.py: rank r uses CUDA device r % ngpu (ddp_train.py)
backend=gloo
[ "$ngpu" -ge 2 ] && backend=nccl
echo "GPUs: $ngpu, backend $backend"

# 1. cuptrace around the launcher.
mkdir -p "$tmp/a" "$tmp/b"
if timeout 300 "$ct" record -o "$tmp/a/job-%r.pftrace" -- torchrun --standalone --nproc-per-node 2 \
	"$src/gpu/ddp_train.py" $steps >"$tmp/a.log" 2>&1; then
	grep "^cuptrace: \|^rank " "$tmp/a.log"
	"$ct" merge --ranks "$tmp"/a/job-*.pftrace -o "$tmp/a.merged.pftrace" 2>"$tmp/am.log" && cat "$tmp/am.log" &&
		python3 "$src/gpu/check_ranks.py" "$ct" "$tmp/a" 2 $steps $backend "$tmp/a.merged.pftrace" || fail=1
	for f in "$tmp"/a/job-*.pftrace "$tmp/a.merged.pftrace"; do
		"$chk" "$f" --clean >/dev/null 2>"$tmp/chk.err" || { echo "FAIL: $f not clean"; cat "$tmp/chk.err"; fail=1; }
		tp_check "$f" || fail=1
	done
	cp "$tmp/a.merged.pftrace" "${RANKS_KEEP:-$tmp}/" 2>/dev/null
	cp "$tmp"/a/job-*.pftrace "${RANKS_KEEP:-$tmp}/" 2>/dev/null
else
	echo "FAIL: cuptrace record -- torchrun"; cat "$tmp/a.log"; fail=1
fi

# 2. The launcher around cuptrace.
if timeout 300 torchrun --standalone --nproc-per-node 2 --no-python "$ct" record -o "$tmp/b/job-%r.pftrace" -- \
	python3 "$src/gpu/ddp_train.py" $steps >"$tmp/b.log" 2>&1; then
	"$ct" merge --ranks "$tmp"/b/job-*.pftrace -o "$tmp/b.merged.tar" 2>"$tmp/bm.log" && cat "$tmp/bm.log" &&
		python3 "$src/gpu/check_ranks.py" "$ct" "$tmp/b" 2 $steps $backend || fail=1
	tar tf "$tmp/b.merged.tar" | grep -qx perfetto_manifest.json || { echo "FAIL: no manifest in b.merged.tar"; fail=1; }
else
	echo "FAIL: torchrun -- cuptrace record"; cat "$tmp/b.log"; fail=1
fi
[ $fail = 0 ] && echo "ok: ranks recorded both ways, merged" && rm -rf "$tmp"
exit $fail
