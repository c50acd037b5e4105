# Sourced by the GPU tests: skip (exit 77, with a message) where there is no GPU, and set the
# paths every GPU test uses. The caller sets gpu_test (a name for the temporary directory) first:
# dash's `.` passes no arguments, so a `$1` here would be the caller's own.
if [ ! -e /dev/nvidia0 ] && [ ! -e /dev/nvidiactl ]; then
	echo "SKIP: no NVIDIA GPU on this machine (/dev/nvidia0 missing): GPU tests not run"
	exit 77
fi
ct=$CUPTRACE_BIN
ex=$CUPTRACE_EXAMPLES
chk=$CHECK_TRACE
tmp=$(mktemp -d "${CUPTRACE_TMP:-/tmp}/${gpu_test:-gpu}.XXXXXX") || {
	echo "FAIL: cannot make a temporary directory under ${CUPTRACE_TMP:-/tmp}"
	exit 1
}
