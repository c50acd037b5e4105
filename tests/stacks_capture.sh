#!/bin/sh
# For the lead, on a GPU machine: records tests/data/stacks_native.cupti (`record --stacks native
# --capture` of tests/stacks_prog.c, stripped, with its separate debug file) and keeps the
# binaries it needs to be symbolized on a CPU later, in tests/data/stacks_native/:
#   stacks_prog (with debug info), stacks_prog.stripped (the one that ran), stacks_prog.debug,
#   nm.txt (`nm -S stacks_prog`: where a, b and c lie, for the tests).
# Usage: sh tests/stacks_capture.sh BUILD_DIR   (BUILD_DIR holds the cuptrace binary)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:?usage: stacks_capture.sh BUILD_DIR}/cuptrace
out=$here/data/stacks_native
mkdir -p "$out"
sh "$here/stacks_build.sh" "$here/stacks_prog.c" "$out"
"$bin" record --stacks native --capture -o "$here/data/stacks_native.cupti" -- "$out/stacks_prog.stripped"
nm -S "$out/stacks_prog" >"$out/nm.txt"
"$bin" convert "$here/data/stacks_native.cupti" -o "$out/check.json"
python3 "$here/stacks_check.py" native "$out/check.json" "$out/stacks_prog" stacks_prog.stripped
rm -f "$out/check.json"
ls -l "$here/data/stacks_native.cupti" "$out"
