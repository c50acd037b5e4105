#!/bin/sh
# GPU test: `cuptrace record --private` and CUPTRACE_PRIVATE=1 write no host name, boot id,
# command-line arguments or home paths into the trace, in any format (.pftrace, .json.gz,
# .cupti and its conversion): vector_add is run through a path under a fake home directory with
# a secret-looking argument, and the decompressed bytes of every output (tests/trace_bytes.py)
# must hold none of them, while a control run without --private holds them. The program's base
# name stays (cmdline metadata "vector_add"), and the trace still holds its kernel. Skips without
# a GPU.
set -u
gpu_test=gpu_private
. "$(dirname "$0")/gpu_common.sh"
src=${CUPTRACE_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
fail=0
if ! command -v python3 >/dev/null 2>&1; then
	echo "SKIP: python3 not found (needed by tests/trace_bytes.py)"
	exit 77
fi
mkdir -p "$tmp/home/alice-priv/proj"
ln -s "$ex/vector_add" "$tmp/home/alice-priv/proj/vector_add"
prog="$tmp/home/alice-priv/proj/vector_add"
token=sk-PRIVATE-4242
# What must not be in a private trace, one a line; the host name where it is long enough not
# to occur by chance, and the boot id where the kernel has one.
printf '%s\n' "$token" alice-priv /home/ >"$tmp/secrets"
host=$(hostname 2>/dev/null || cat /proc/sys/kernel/hostname)
[ ${#host} -ge 4 ] && printf '%s\n' "$host" >>"$tmp/secrets"
[ -r /proc/sys/kernel/random/boot_id ] && cat /proc/sys/kernel/random/boot_id >>"$tmp/secrets"

bytes() {
	case $1 in
	*.cupti) cat "$1" ;;
	*) python3 "$src/tests/trace_bytes.py" "$1" ;;
	esac
}
run() { # label out [env...] -- record options...
	label=$1 out=$2
	shift 2
	if ! timeout 90 env "$@" "$prog" "$token" >"$tmp/$label.log" 2>&1; then
		echo "FAIL $label: record failed"
		cat "$tmp/$label.log"
		fail=1
		return 1
	fi
	[ -s "$tmp/$out" ] || { echo "FAIL $label: no $out"; fail=1; return 1; }
}
leaks() { # file: prints the secrets in it
	bytes "$1" | grep -a -o -i -F -f "$tmp/secrets" | sort -u | tr '\n' ' '
}

# Control: without --private the trace names the program's path, the argument and the host.
run control c.pftrace "$ct" record -o "$tmp/c.pftrace" -- &&
	case $(leaks "$tmp/c.pftrace") in
	*"$token"*alice-priv* | *alice-priv*"$token"*) echo "ok control holds the secrets" ;;
	*) echo "FAIL control: secrets not found ($(leaks "$tmp/c.pftrace")): the check cannot fail"; fail=1 ;;
	esac

for spec in "flag p.pftrace --private" "flagjson p.json.gz --private" "flagcap p.cupti --private" \
	"env e.pftrace"; do
	set -- $spec
	label=$1 out=$2 opt=${3:-}
	if [ "$label" = env ]; then
		run "$label" "$out" CUPTRACE_PRIVATE=1 "$ct" record -o "$tmp/$out" -- || continue
	else
		run "$label" "$out" "$ct" record $opt -o "$tmp/$out" -- || continue
	fi
	files="$tmp/$out"
	if [ "$label" = flagcap ]; then
		"$ct" convert "$tmp/$out" -o "$tmp/p-conv.pftrace" && files="$files $tmp/p-conv.pftrace" ||
			{ echo "FAIL $label: convert"; fail=1; }
	fi
	for f in $files; do
		l=$(leaks "$f")
		if [ -n "$l" ]; then
			echo "FAIL $label: $(basename "$f") holds: $l"
			fail=1
		else
			echo "ok $label: $(basename "$f") holds none of the secrets"
		fi
		"$ct" stats --json "$f" >"$tmp/st.json" && python3 - "$tmp/st.json" <<'EOF' || { echo "FAIL $label: $(basename "$f") stats"; fail=1; }
import json, sys
j = json.load(open(sys.argv[1]))
h = j["header"]
cats = {c["category"]: c["slices"] for c in j["categories"]}
assert cats.get("kernel") == 1, cats
assert h["command_line"] == "vector_add", h["command_line"]
assert not h["host"], h["host"]
EOF
	done
done
echo "gpu_private: $([ $fail = 0 ] && echo all passed || echo FAILED)"
[ $fail = 0 ] && rm -rf "$tmp"
exit $fail
