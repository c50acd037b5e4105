#!/bin/sh
# Builds cuptrace with -Werror, AddressSanitizer and UndefinedBehaviorSanitizer, and runs every
# test. GPU tests skip (with a message) where there is no GPU. The readers are fuzzed first
# (tools/fuzz.sh, about 4 minutes with its build).
set -eu
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/cuda/bin"
cmake -S . -B build-test -DCMAKE_BUILD_TYPE=Debug -DCUPTRACE_SANITIZE=ON >/dev/null
cmake --build build-test -j "$(nproc)"
# The readers of untrusted input, fuzzed for a fixed budget each (CUPTRACE_FUZZ_SECONDS).
tools/fuzz.sh "${CUPTRACE_FUZZ_SECONDS:-60}"
ctest --test-dir build-test --output-on-failure
