#!/bin/sh
# GPU test of `cuptrace record --otlp`: live runs of the examples send their spans to a
# receiver on 127.0.0.1 (tests/otlp/receiver.js with OpenTelemetry's decoder where node and its
# npm packages are there; else tests/otlp/count_receiver.py, which checks counts and parents
# only). Alongside a file (the spans match it), instead of one (-o none), one trace per step,
# and what must never hurt the program: the collector down, stalled, libcurl missing. Skips
# without a GPU.
set -u
gpu_test=gpu_otlp
. "$(dirname "$0")/gpu_common.sh"
. "$(dirname "$0")/script_lib.sh"
. "$(dirname "$0")/otlp/receiver.sh"
src=${CUPTRACE_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
check=$src/tests/otlp/check_spans.py
if ! ldconfig -p 2>/dev/null | grep -q 'libcurl\.so\.4 '; then
	echo "SKIP: libcurl.so.4 is not installed here (apt-get install libcurl4): --otlp cannot send"
	exit 77
fi
if otlp_install; then
	kind=node
else
	echo "note: $otlp_why: using the python receiver (counts and parents only)"
	kind=python
fi
otlp_start $kind || exit 1
echo "receiver ($kind) at $otlp_url"
now_ms() { date +%s%3N; }

# rec NAME [record options] -- command: records with the receiver's /run-NAME; log in NAME.log
rec() {
	name=$1
	shift
	if ! (cd "$tmp" && timeout 120 "$ct" record "$@") >"$tmp/$name.log" 2>&1; then
		bad "$name: record failed:"
		cat "$tmp/$name.log"
		return 1
	fi
	grep "cuptrace: OTLP" "$tmp/$name.log"
}
# counts NAME python-assertions: the spans of /run-NAME as `sp`, by id as `by`
counts() {
	name=$1
	python3 - "$otlp_spans" "/run-$name/v1/traces" "$2" <<'PY' && ok || bad "$name: $2"
import collections, json, sys
sp = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
sp = [s for s in sp if s["path"] == sys.argv[2]]
by = {s["spanId"]: s for s in sp}
n = collections.Counter(s["name"] for s in sp)
cat = collections.Counter(s["attributes"].get("category") for s in sp)
par = lambda s: by.get(s["parentSpanId"], {}).get("name")
traces = {s["traceId"] for s in sp}
assert all(not s["parentSpanId"] or s["parentSpanId"] in by for s in sp), "missing parents"
assert eval("(" + sys.argv[3] + ")"), (sys.argv[3], dict(n.most_common(8)), dict(cat), len(traces))
print("%s: %d spans, %d traces: ok %s" % (sys.argv[2], len(sp), len(traces), sys.argv[3]))
PY
}

# 1. Alongside the file: the spans are the file's slices and instants.
if rec nvtx --otlp "$otlp_url/run-nvtx" -o nv.pftrace -- "$ex/nvtx"; then
	grep -q "spans: .* 0 dropped; 0 failed requests" "$tmp/nvtx.log" && ok ||
		bad "nvtx: summary"
	"$ct" stats --json "$tmp/nv.pftrace" >"$tmp/nvtx.stats.json" &&
		"$ct" convert "$tmp/nv.pftrace" -o "$tmp/nvtx.ref.json" || bad "nvtx: reference"
	if [ $kind = node ]; then
		python3 "$check" "$otlp_spans" /run-nvtx/v1/traces "$tmp/nvtx.ref.json" \
			"$tmp/nvtx.stats.json" --parent inner=outer && ok || bad "nvtx: spans differ"
	fi
	counts nvtx "cat['kernel'] == 4 and all(par(s) == 'cudaLaunchKernel' for s in sp
	if s['name'] == 'busy(float*, int)') and par([s for s in sp if s['name'] == 'inner'][0]) ==
	'outer' and len(traces) == 1 and len(sp) == $(python3 -c "import json;e=json.load(open('$tmp/nvtx.stats.json'))['events'];print(e['slices']+e['instants'])")"
fi

# 2. Instead of the file: -o none, 8 threads x 1000 launches.
ls "$tmp" >"$tmp/files.before"
if rec none --otlp "$otlp_url/run-none" -o none -- "$ex/multi_stream" 8 1000; then
	ls "$tmp" | grep -v -x -F -f "$tmp/files.before" | grep -v -x -e none.log -e files.before -e files.new \
		>"$tmp/files.new" && bad "-o none wrote a file: $(cat "$tmp/files.new")"
	grep -q "trace written" "$tmp/none.log" && bad "-o none: says a trace was written"
	counts none "n['cudaLaunchKernel'] == 8000 and cat['kernel'] == 8000 and all(
	par(s) == 'cudaLaunchKernel' for s in sp if s['attributes'].get('category') == 'kernel')"
fi

# 3. One trace per step, and the service name.
if rec steps --otlp "$otlp_url/run-steps" --otlp-trace-per step --service trainer -o none \
	-- "$ex/steps" --steps 5; then
	counts steps "n['step'] == 5 and len(traces) == 6 and cat['kernel'] == 15 and all(
	s['resource']['service.name'] == 'trainer' for s in sp) and all(not s['parentSpanId']
	for s in sp if s['name'] == 'step')"
fi

# 4. Collector down: the program and its file are unharmed; the spans are counted as dropped.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
t0=$(now_ms)
if rec down --otlp "http://127.0.0.1:$port" -o down.pftrace -- "$ex/vector_add"; then
	t=$(($(now_ms) - t0))
	grep -q "0 sent in 0 requests (0 bytes), [1-9][0-9]* dropped" "$tmp/down.log" && ok ||
		bad "down: summary"
	"$chk" "$tmp/down.pftrace" --clean --count kernel=1 && ok || bad "down: the file"
	[ $t -lt 15000 ] && ok || bad "down: record took $t ms"
	echo "collector down: $t ms"
fi

# 5. Stalled collector: the end of the run waits at most --otlp-timeout for it.
t0=$(now_ms)
if rec stall --otlp "$otlp_url/stall" --otlp-timeout 1000 -o none -- "$ex/vector_add"; then
	t=$(($(now_ms) - t0))
	grep -q "0 sent in 0 requests .* dropped" "$tmp/stall.log" && ok || bad "stall: summary"
	[ $t -lt 15000 ] && ok || bad "stall: record took $t ms"
	echo "stalled collector: $t ms"
fi

# 6. No libcurl in the traced program: one message, and the file is still written.
export CUPTRACE_OTLP_LIBCURL=libcurl-missing.so.9
if rec nocurl --otlp "$otlp_url/run-nocurl" -o nocurl.pftrace -- "$ex/vector_add"; then
	[ "$(grep -c 'cannot load libcurl' "$tmp/nocurl.log")" = 1 ] && ok ||
		bad "nocurl: want one message"
	"$chk" "$tmp/nocurl.pftrace" --clean --count kernel=1 && ok || bad "nocurl: the file"
fi
unset CUPTRACE_OTLP_LIBCURL

otlp_stop
if [ "$fail" = 0 ]; then
	echo "gpu otlp: $n checks passed"
	rm -rf "$tmp"
fi
exit $fail
