# Sourced by the GPU tests: skip (exit 77, with a message) where there is no GPU, and set the
# paths every GPU test uses. The caller sets gpu_test (a name for the temporary directory) first:
# dash's `.` passes no arguments, so a `$1` here would be the caller's own.
if [ ! -e /dev/nvidia0 ] && [ ! -e /dev/nvidiactl ]; then
	echo "SKIP: no NVIDIA GPU on this machine (/dev/nvidia0 missing): GPU tests not run"
	exit 77
fi
# ctest sets these; run by hand (sh tests/gpu_ranks_test.sh), they default to the build directory
# beside the checkout (CUPTRACE_BUILD_DIR, else ./build), so that `set -u` does not stop a test
# at a variable it may not even use.
gpu_build=${CUPTRACE_BUILD_DIR:-$(cd "$(dirname "$0")/.." && pwd)/build}
ct=${CUPTRACE_BIN:-$gpu_build/cuptrace}
ex=${CUPTRACE_EXAMPLES:-$gpu_build/examples}
chk=${CHECK_TRACE:-$gpu_build/tests/check_trace}
if [ ! -x "$ct" ]; then
	echo "FAIL: $ct is not built (set CUPTRACE_BIN, or CUPTRACE_BUILD_DIR to the build directory)"
	exit 1
fi
tmp=$(mktemp -d "${CUPTRACE_TMP:-/tmp}/${gpu_test:-gpu}.XXXXXX") || {
	echo "FAIL: cannot make a temporary directory under ${CUPTRACE_TMP:-/tmp}"
	exit 1
}
# Perfetto's trace processor where shared/tools/ is beside the checkout (GPU machines usually
# have none): tp_check TRACE [tests/tp_check.py options] loads the trace there and asserts a
# clean stats table and the given counts; without it, says so once and passes.
tp_shell=${TRACE_PROCESSOR_SHELL:-${CUPTRACE_SRC:-$(dirname "$0")/..}/../shared/tools/trace_processor_shell}
tp_check() {
	if [ ! -x "$tp_shell" ] || ! command -v python3 >/dev/null 2>&1; then
		[ -n "${tp_said:-}" ] || echo "SKIP trace_processor checks: $tp_shell not found"
		tp_said=1
		return 0
	fi
	TRACE_PROCESSOR_SHELL=$tp_shell python3 "$(dirname "$0")/tp_check.py" "$@"
}
