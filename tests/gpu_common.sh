# Sourced by the GPU tests: skip (exit 77, with a message) where there is no GPU, and set the
# paths every GPU test uses. $1: a name for the temporary directory.
if [ ! -e /dev/nvidia0 ] && [ ! -e /dev/nvidiactl ]; then
	echo "SKIP: no NVIDIA GPU on this machine (/dev/nvidia0 missing): GPU tests not run"
	exit 77
fi
ct=$CUPTRACE_BIN
ex=$CUPTRACE_EXAMPLES
chk=$CHECK_TRACE
tmp=$(mktemp -d "${CUPTRACE_TMP:-/tmp}/$1.XXXXXX")
