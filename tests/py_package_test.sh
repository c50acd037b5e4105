#!/bin/sh
# The Python package (src/python/cuptrace, issue 47) on the CPU: its unit tests against the stub
# library (tests/python/test_package.py), `pip install` offline into a venv from the build tree
# and from a `cmake --install` prefix, and `import cuptrace` under `cuptrace record` with no path
# setting. ctest passes CUPTRACE_BUILD_DIR, CUPTRACE_BIN, CUPTRACE_SRC, CUPTRACE_TEST_DATA.
set -eu
src=${CUPTRACE_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
build=${CUPTRACE_BUILD_DIR:-$src/build}
ct=${CUPTRACE_BIN:-$build/cuptrace}
data=${CUPTRACE_TEST_DATA:-$src/tests/data}
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
tmp=$(mktemp -d "${CUPTRACE_TMP:-/tmp}/py_package.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# A real trace for the result object: the CLI converts a recorded capture.
"$ct" convert "$data/torch_train.cupti" -o "$tmp/torch_train.pftrace" 2>/dev/null ||
	fail "cuptrace convert torch_train.cupti"

# 1. Unit tests, with the package as the build tree holds it.
# REAL_LIB: the built library's C API and settings table, where python can load it (not a
# sanitized build: those tests say SKIP then).
STUB=$build/tests/libcuptrace_stub.so STUB_NEXT=$build/tests/libcuptrace_stub_next.so \
	REAL_LIB=$build/libcuptrace.so CUPTRACE_CLI_DIR=$(dirname "$ct") \
	TRACE=$tmp/torch_train.pftrace \
	PYTHONPATH=$build/python python3 "$src/tests/python/test_package.py" 2>&1 ||
	fail "tests/python/test_package.py"

# 2. The build tree's copy finds <build>/libcuptrace.so first.
first=$(cd "$tmp" && env -u CUPTRACE_LIB -u CUDA_INJECTION64_PATH PYTHONPATH="$build/python" \
	python3 -c '
import os, cuptrace._lib as l
print(next(c for c in l.candidates() if os.path.isfile(c)))')
[ "$first" = "$build/libcuptrace.so" ] || fail "build tree: first library found is $first"

# 3. pip install offline (no index, no network, isolated build with nothing to fetch) from the
# source tree, the build tree and an installed prefix, into a venv; then import from outside.
python3 -m venv --system-site-packages "$tmp/venv" ||
	{ echo "SKIP: python3 -m venv fails"; exit 77; }
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null || fail "cmake --install"
share=$tmp/prefix/share/cuptrace/python
[ -f "$share/sitecustomize.py" ] && [ -f "$share/cuptrace/__init__.py" ] &&
	[ -f "$share/cuptrace/py.typed" ] || fail "install: $share lacks the package or the hook"
listing() { find "$1" -name __pycache__ -prune -o -print | sort; }
listing "$share" >"$tmp/before"
for from in "$src/src/python" "$build/python" "$share"; do
	PIP_NO_INDEX=1 PIP_CONFIG_FILE=/dev/null "$tmp/venv/bin/pip" install -q --no-index "$from" ||
		fail "pip install $from"
	got=$(cd "$tmp" && "$tmp/venv/bin/python" -c 'import cuptrace; print(cuptrace.__file__)')
	case $got in
	"$tmp/venv/lib/"*/site-packages/cuptrace/__init__.py) ;;
	*) fail "pip install $from: imported $got" ;;
	esac
	# Only the package: record's sitecustomize must not become the venv's.
	if "$tmp/venv/bin/python" -c 'import sitecustomize, sys
sys.exit("cuptrace" not in sitecustomize.__file__)' 2>/dev/null; then
		fail "pip install $from also installed sitecustomize.py"
	fi
	"$tmp/venv/bin/pip" uninstall -q -y cuptrace || fail "pip uninstall"
done
# pip wrote nothing into the folder it installed from (installed, it may be read-only; byte
# code aside, which Python skips where it cannot write).
listing "$share" | diff "$tmp/before" - || fail "pip wrote into $share"

# 4. Installed, not pip-installed: the package finds the prefix's library.
first=$(cd "$tmp" && env -u CUPTRACE_LIB -u CUDA_INJECTION64_PATH PYTHONPATH=$share python3 -c '
import os, cuptrace._lib as l
print(next(c for c in l.candidates() if os.path.isfile(c)))')
case $first in
"$tmp/prefix/lib"*/libcuptrace.so) ;;
*) fail "installed: first library found is $first" ;;
esac

# 5. Under `cuptrace record` (no GPU needed: Python never starts CUDA here), with no path set.
out=$(cd "$tmp" && env -u PYTHONPATH -u CUPTRACE_LIB "$ct" record --no-check --no-summary \
	-o "$tmp/rec.pftrace" -- python3 -c 'import cuptrace
print(cuptrace.__file__)
print(cuptrace.under_record())' 2>&1) ||
	fail "import under record: $out"
echo "$out" | grep -qx "$build/python/cuptrace/__init__.py" || fail "under record: $out"
echo "$out" | grep -qx True || fail "under record, under_record() is not True: $out"
# 6. With --no-step-marks too: the package's folder is on PYTHONPATH whatever the marks say
# (they are a separate choice: CUPTRACE_STEP_MARKS=0 reaches the program).
out=$(cd "$tmp" && env -u PYTHONPATH -u CUPTRACE_LIB "$ct" record --no-check --no-summary \
	--no-step-marks -o "$tmp/rec2.pftrace" -- python3 -c 'import os, cuptrace
print(cuptrace.__file__)
print(os.environ.get("CUPTRACE_STEP_MARKS"))' 2>&1) ||
	fail "import under record --no-step-marks: $out"
echo "$out" | grep -qx "$build/python/cuptrace/__init__.py" ||
	fail "under record --no-step-marks: $out"
echo "$out" | grep -qx 0 || fail "under record --no-step-marks, CUPTRACE_STEP_MARKS is not 0: $out"
echo "PASS: python package"
