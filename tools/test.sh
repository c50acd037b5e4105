#!/bin/sh
# Builds cuptrace with -Werror, AddressSanitizer and UndefinedBehaviorSanitizer, and runs every
# test. GPU tests skip (with a message) where there is no GPU.
set -eu
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/cuda/bin"
cmake -S . -B build-test -DCMAKE_BUILD_TYPE=Debug -DCUPTRACE_SANITIZE=ON >/dev/null
cmake --build build-test -j "$(nproc)"
ctest --test-dir build-test --output-on-failure
