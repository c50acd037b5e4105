#!/bin/sh
# The main job, end to end: build, then record an example on a GPU into demo.pftrace, or, on a
# machine without one, convert a real capture (a PyTorch training loop recorded on an H200).
# Open demo.pftrace in https://ui.perfetto.dev.
set -eu
cd "$(dirname "$0")/../.."
export PATH="$PATH:/usr/local/cuda/bin"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)" >/dev/null
if [ -e /dev/nvidia0 ] && ./build/cuptrace record -o demo.pftrace -- ./build/examples/vector_add; then
	:
else
	echo "demo: no GPU here: converting tests/data/torch_train.cupti (recorded on an H200)"
	./build/cuptrace convert tests/data/torch_train.cupti -o demo.pftrace
fi
./build/cuptrace stats demo.pftrace
echo "demo: open $(pwd)/demo.pftrace in https://ui.perfetto.dev"
