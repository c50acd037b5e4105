#!/bin/sh
# Installs what cuptrace needs to build, on Debian or Ubuntu: cmake, gcc, pkg-config, protobuf-c
# (protoc-c, and libprotobuf-c-dev: the shared runtime and its pkg-config file; the build copies
# libprotobuf-c.so.1 into build/runtime-libs/ for GPU machines that lack it), zlib, python3
# (tests), libdeflate0 (dlopened: compresses .pftrace chunks; copied into build/runtime-libs/
# too), libdw-dev (elfutils headers: symbolizes native call stacks; libdw.so.1 is dlopened
# at run time), libunwind8 (dlopened for native call stacks), clang with libFuzzer
# (tools/scripts/fuzz.sh; tools/scripts/test.sh also builds a Release with clang), clang-format (the tree's one
# format, checked by tools/scripts/test.sh),
# libcurl's headers (--otlp: the library itself is loaded at run time), Node.js and npm
# (tests/otlp_test.sh decodes the spans with OpenTelemetry's npm package). The CUDA toolkit (for
# CUPTI and nvcc) must already be at /usr/local/cuda or on PATH.
set -eu
need=""
command -v cmake >/dev/null 2>&1 || need="$need cmake"
command -v gcc >/dev/null 2>&1 || need="$need build-essential" # tools/scripts/test.sh builds with gcc
command -v pkg-config >/dev/null 2>&1 || need="$need pkg-config"
command -v protoc-c >/dev/null 2>&1 || need="$need protobuf-c-compiler"
[ -f /usr/include/protobuf-c/protobuf-c.h ] || need="$need libprotobuf-c-dev"
[ -f /usr/include/zlib.h ] || need="$need zlib1g-dev"
[ -f /usr/include/elfutils/libdwfl.h ] || need="$need libdw-dev" # symbolize native frames
# libdeflate.so.0, dlopened to compress .pftrace chunks at half zlib's CPU (zlib does otherwise)
ls /usr/lib/*/libdeflate.so.0 /lib/*/libdeflate.so.0 >/dev/null 2>&1 || need="$need libdeflate0"
# libunwind.so.8, dlopened by the recorder for fast native stacks (else glibc's backtrace())
ls /usr/lib/*/libunwind.so.8 /lib/*/libunwind.so.8 >/dev/null 2>&1 || need="$need libunwind8"
command -v python3 >/dev/null 2>&1 || need="$need python3"
command -v clang >/dev/null 2>&1 || need="$need clang"
command -v clang-format >/dev/null 2>&1 || need="$need clang-format" # tools/scripts/test.sh's format check
{ [ -f /usr/include/curl/curl.h ] || ls /usr/include/*/curl/curl.h; } >/dev/null 2>&1 ||
	need="$need libcurl4-openssl-dev"
command -v node >/dev/null 2>&1 || need="$need nodejs"
command -v npm >/dev/null 2>&1 || need="$need npm"
ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1 ||
	need="$need libclang-rt-14-dev"
if [ -n "$need" ]; then
	echo "setup: installing$need"
	SUDO=""
	[ "$(id -u)" = 0 ] || SUDO=sudo
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $need >/dev/null
fi
if [ ! -e /usr/local/cuda/include/cupti.h ] && ! command -v nvcc >/dev/null 2>&1; then
	echo "setup: the CUDA toolkit (CUPTI headers, nvcc) was not found at /usr/local/cuda;" >&2
	echo "       install CUDA 13 and put nvcc on PATH" >&2
	exit 1
fi
echo "setup: ok"
