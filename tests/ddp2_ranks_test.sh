#!/bin/sh
# A real 2-rank DDP job over NCCL on two H200s (tests/data/ddp2_rank*.cupti, recorded with
# `record --capture` under torchrun from tests/gpu/ddp_train.py), no GPU needed: each rank's
# metadata and `stats` name the GPU it used (both could see both), `merge --ranks` puts the ranks
# in order, each GPU group labelled with its rank and GPU, the symmetric collectives' ends
# together within microseconds (measured apart from the broadcasts), NCCL kernels carry their
# collective as arguments, and `analyze` reports both ranks. Every number is checked against the
# raw captures, decoded by tests/ddp2_check.py without cuptrace.
set -u
ct=$CUPTRACE_BIN
src=${CUPTRACE_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
d=${CUPTRACE_TEST_DATA:-$src/tests/data}
if ! command -v python3 >/dev/null 2>&1; then
	echo "SKIP: python3 not found (needed to decode the captures)"
	exit 77
fi
tmp=$(mktemp -d "${CUPTRACE_TMP:-/tmp}/ddp2.XXXXXX")
python3 "$src/tests/ddp2_check.py" "$ct" "$d/ddp2_rank0.cupti" "$d/ddp2_rank1.cupti" "$tmp"
fail=$?
[ $fail = 0 ] && rm -rf "$tmp"
exit $fail
