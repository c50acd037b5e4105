#!/bin/sh
# Builds cuptrace with -Werror, AddressSanitizer and UndefinedBehaviorSanitizer, and runs every
# test. GPU tests skip (with a message) where there is no GPU. Release builds with gcc and with
# clang, tests and examples included, must build with -Werror too (build only: optimizers and the
# other compiler find warnings the Debug build does not). The readers are fuzzed first
# (tools/scripts/fuzz.sh, about 4 minutes with its build).
set -eu
cd "$(dirname "$0")/../.."
export PATH="$PATH:/usr/local/cuda/bin"
# One format for the tree: .clang-format as Debian 12's clang-format 14 applies it (other
# versions break some lines differently, so they only say so). Fix with clang-format -i.
if clang-format --version 2>/dev/null | grep -q 'version 14\.'; then
	if ! git ls-files '*.c' '*.h' '*.cu' | xargs -r clang-format --dry-run --Werror; then
		echo "test: files above differ from .clang-format (clang-format -i FILE)" >&2
		exit 1
	fi
else
	echo "test: format check skipped: it needs clang-format 14 (tools/scripts/setup.sh installs it)"
fi
cmake -S . -B build-test -DCMAKE_BUILD_TYPE=Debug -DCUPTRACE_SANITIZE=ON -DCUPTRACE_WERROR=ON \
	>/dev/null
cmake --build build-test -j "$(nproc)"
for cc in gcc clang; do
	compiler=$(command -v "$cc" || true)
	[ -n "$compiler" ] || [ "$cc" != clang ] || compiler=$(command -v clang-14 || true)
	if [ -z "$compiler" ]; then
		echo "test: $cc not found (tools/scripts/setup.sh installs it)" >&2
		exit 1
	fi
	echo "test: Release build with $cc and -Werror (build-rel-$cc)"
	cmake -S . -B "build-rel-$cc" -DCMAKE_C_COMPILER="$compiler" -DCMAKE_BUILD_TYPE=Release \
		-DCUPTRACE_WERROR=ON >/dev/null
	if ! cmake --build "build-rel-$cc" -j "$(nproc)" >"build-rel-$cc/build.log" 2>&1; then
		if grep -q "error" "build-rel-$cc/build.log"; then
			grep -B2 -A12 "error" "build-rel-$cc/build.log" | head -80
		else
			tail -40 "build-rel-$cc/build.log"
		fi
		echo "test: the Release build with $cc failed (build-rel-$cc/build.log)" >&2
		exit 1
	fi
done
# The readers of untrusted input, fuzzed for a fixed budget each (CUPTRACE_FUZZ_SECONDS).
tools/scripts/fuzz.sh "${CUPTRACE_FUZZ_SECONDS:-60}"
ctest --test-dir build-test --output-on-failure
