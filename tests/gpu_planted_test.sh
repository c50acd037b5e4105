#!/bin/sh
# GPU test (issue 43): `cuptrace analyze` gives the right answer on runs recorded as users record
# them. Each loop of tests/gpu/planted.py (one planted problem each), recorded three ways: plain
# `cuptrace record` (no options, no marks), with NVTX step marks (--nvtx), and with
# `record --pytorch`; then a 2-rank DDP job over NCCL with one slow rank (two GPUs, else skipped
# with a message), and the third-party trainers of tests/gpu/trainers.py. tests/gpu/
# check_planted.py judges each analyze --json and prints one table row per run (README's table).
#   PLANTED_CASES="clean item"  PLANTED_MODES="plain nvtx"  restrict the runs
#   PLANTED_KEEP=DIR            keep every trace and analysis there
#   PLANTED_RECORD_ONLY=1       record (and analyze) but do not judge
gpu_test=gpuplanted
. "$(dirname "$0")/gpu_common.sh"
if ! python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
	echo "SKIP: no PyTorch with CUDA"
	exit 77
fi
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
src=$(cd "$(dirname "$0")" && pwd)
keep=${PLANTED_KEEP:-$tmp}
mkdir -p "$keep"
cases=${PLANTED_CASES:-clean pageable item tiny alloc loader cpuprep slowhost slowgpu graph ddp gpt2 lightning timm}
modes=${PLANTED_MODES:-plain nvtx pytorch}
ngpu=$(python3 -c "import torch; print(torch.cuda.device_count())")
fail=0
rows="$tmp/rows.txt"
: >"$rows"
judge() { # name case mode json...
	name=$1
	shift
	if [ -n "${PLANTED_RECORD_ONLY:-}" ]; then
		return 0
	fi
	python3 "$src/gpu/check_planted.py" "$@" >>"$rows" 2>"$tmp/judge.err" || {
		echo "FAIL: $name"
		cat "$tmp/judge.err"
		fail=1
	}
	tail -1 "$rows"
}
analyze() { # name trace...
	name=$1
	shift
	"$ct" analyze --json "$@" >"$keep/$name.json" 2>"$keep/$name.analyze.err" &&
		"$ct" analyze "$@" >"$keep/$name.txt" 2>/dev/null || {
		echo "FAIL: analyze $name"
		cat "$keep/$name.analyze.err"
		fail=1
		return 1
	}
}
for case in $cases; do
	for mode in $modes; do
		opt=
		arg=
		[ "$mode" = pytorch ] && opt=--pytorch
		[ "$mode" = nvtx ] && arg=--nvtx
		name=${case}_$mode
		case $case in
		gpt2 | lightning | timm)
			[ "$mode" = plain ] || continue
			cmd="python3 $src/gpu/trainers.py $case"
			;;
		ddp)
			if [ "$ngpu" -lt 2 ]; then
				echo "SKIP: ddp needs two GPUs ($ngpu here)"
				continue
			fi
			rm -f "$keep/${name}"_r*.pftrace
			if ! timeout 300 "$ct" record $opt -o "$keep/${name}_r%r.pftrace" -- torchrun --standalone \
				--nproc-per-node 2 "$src/gpu/planted_ddp.py" $arg >"$keep/$name.log" 2>&1; then
				echo "FAIL: record $name"
				tail -20 "$keep/$name.log"
				fail=1
				continue
			fi
			analyze "$name" "$keep/${name}"_r*.pftrace && judge "$name" "$case" "$mode" "$keep/$name.json"
			continue
			;;
		*) cmd="python3 $src/gpu/planted.py $case $arg" ;;
		esac
		if ! timeout 300 "$ct" record $opt -o "$keep/$name.pftrace" -- $cmd >"$keep/$name.log" 2>&1; then
			echo "FAIL: record $name"
			tail -20 "$keep/$name.log"
			fail=1
			continue
		fi
		analyze "$name" "$keep/$name.pftrace" && judge "$name" "$case" "$mode" "$keep/$name.json"
	done
done
if [ -z "${PLANTED_RECORD_ONLY:-}" ]; then
	echo "== what each run gave"
	cat "$rows"
fi
[ $fail = 0 ] && echo "ok: planted problems found" && [ "$keep" = "$tmp" ] && rm -rf "$tmp"
exit $fail
