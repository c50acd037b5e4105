#!/bin/sh
# Builds tests/stacks_prog.c into DIR as the call-stack tests expect it: -O0 -g
# -fno-omit-frame-pointer, shared cudart; DIR/stacks_prog (with debug info), a stripped copy
# DIR/stacks_prog.stripped and its separate debug file DIR/stacks_prog.debug (debuglink).
# Usage: stacks_build.sh SOURCE DIR
set -eu
srcf=$1 dir=$2
cuda=${CUDA_HOME:-/usr/local/cuda}
cc=${CC:-cc}
$cc -O0 -g -fno-omit-frame-pointer -Wl,--build-id -I"$cuda/include" -o "$dir/stacks_prog" \
	"$srcf" -L"$cuda/lib64" -Wl,-rpath,"$cuda/lib64" -lcudart
objcopy --only-keep-debug "$dir/stacks_prog" "$dir/stacks_prog.debug"
objcopy --strip-debug --strip-unneeded "$dir/stacks_prog" "$dir/stacks_prog.stripped"
(cd "$dir" && objcopy --add-gnu-debuglink=stacks_prog.debug stacks_prog.stripped)
