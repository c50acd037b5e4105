#!/bin/sh
# cuptrace convert --otlp against a receiver on 127.0.0.1 that decodes every request with
# OpenTelemetry's own generated protobuf code (tests/otlp/receiver.js, @opentelemetry/
# otlp-transformer 0.52.1 from npm): captures, a Perfetto file and torch.profiler JSON sent as
# spans and checked against the same trace written to a file (names, times, arguments, parents,
# GPU work under its launch, trace ids, the resource); one trace per step; batches; and the
# failure paths: 503 twice then OK, collector down, collector stalled, spans rejected, bad
# options. Skips (77) only where node is missing.
set -u
ct=$CUPTRACE_BIN
tmp=$(mktemp -d "${CUPTRACE_TMP:-/tmp}/otlp.XXXXXX")
src=${CUPTRACE_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
data=$CUPTRACE_TEST_DATA
. "$(dirname "$0")/script_lib.sh"
. "$(dirname "$0")/otlp/receiver.sh"
check=$src/tests/otlp/check_spans.py

if ! command -v node >/dev/null 2>&1; then
	echo "SKIP: node not found: the OTLP receiver test needs Node.js (tools/scripts/setup.sh installs it)"
	exit 77
fi
if ! otlp_install; then
	echo "FAIL: $otlp_why"
	exit 1
fi
otlp_start || exit 1
echo "receiver at $otlp_url"

now_ms() { date +%s%3N; }

# send NAME INPUT [convert options...]: converts INPUT to NAME.pftrace and sends it to
# /run-NAME at once, then writes the reference (the file read back as Chrome JSON) and the
# stats of the input.
send() {
	name=$1 in=$2
	shift 2
	if ! "$ct" convert "$in" -o "$tmp/$name.pftrace" --otlp "$otlp_url/run-$name" "$@" \
		2>"$tmp/$name.err"; then
		bad "convert $in --otlp:"
		cat "$tmp/$name.err"
		return 1
	fi
	grep -q "spans: .* 0 dropped; 0 failed requests" "$tmp/$name.err" ||
		bad "$name: summary: $(cat "$tmp/$name.err")"
	"$ct" convert "$tmp/$name.pftrace" -o "$tmp/$name.ref.json" &&
		"$ct" stats --json "$in" >"$tmp/$name.stats.json" || bad "$name: reference"
}
# verify NAME [check_spans.py options]
verify() {
	name=$1
	shift
	if python3 "$check" "$otlp_spans" "/run-$name/v1/traces" "$tmp/$name.ref.json" \
		"$tmp/$name.stats.json" "$@"; then ok; else bad "$name: spans differ from the file"; fi
}

# Captures of real runs: every slice and instant, as in the file.
for c in nvtx graphs multi_stream memory multi_gpu_2gpu torch_train; do
	send "$c" "$data/$c.cupti" && verify "$c"
done
# NVTX push/pop ranges are the parents of the calls inside them.
python3 - "$otlp_spans" <<'PY' && ok || bad "nvtx: nesting"
import json, sys
sp = [json.loads(l) for l in open(sys.argv[1]) if '"/run-nvtx/' in l]
by = {s["spanId"]: s for s in sp}
par = lambda n, k=0: [by.get(s["parentSpanId"], {}).get("name") for s in sp if s["name"] == n][k]
assert par("inner") == "outer", par("inner")
launches = sorted((s["start"], by.get(s["parentSpanId"], {}).get("name")) for s in sp
                  if s["name"] == "cudaLaunchKernel")
assert [p for _, p in launches] == ["outer", "inner", "domain-range", None], launches
assert all(by[s["parentSpanId"]]["name"] == "cudaStreamSynchronize"
           for s in sp if s["name"] == "Wait: stream")
assert all(s["attributes"]["stream"] == 13 and s["attributes"]["device"] == 0 and
           s["attributes"]["grid"] == "(4096, 1, 1)" for s in sp if s["name"] == "busy(float*, int)")
print("nvtx: ranges around calls, calls around waits, kernels with grid/stream/device")
PY
# Any input the readers take: a Perfetto file, a Chrome JSON file, torch.profiler's JSON.
send nvtx_pf "$tmp/nvtx.pftrace" && verify nvtx_pf
"$ct" convert "$data/vector_add.cupti" -o "$tmp/vector_add.json" || bad "vector_add.json"
send vector_add_json "$tmp/vector_add.json" && verify vector_add_json
send torch_small "$data/torch_small.kineto.json.gz" --service trainer &&
	verify torch_small --service trainer
# One trace per step; batches of 50.
send steps "$data/steps_base.cupti" --otlp-trace-per step --otlp-batch 50 &&
	verify steps --trace-per step --parent cudaLaunchKernel=step
python3 - "$otlp_reqs" <<'PY' && ok || bad "requests"
import json, sys
reqs = [json.loads(l) for l in open(sys.argv[1])]
steps = [r for r in reqs if r["path"] == "/run-steps/v1/traces"]
assert len(steps) == 4 and max(r["spans"] for r in steps) == 50, steps
for r in reqs:
    assert r["content_type"] == "application/x-protobuf", r
    assert r["content_encoding"] == "gzip", r
    assert r["status"] == 200 and not r["error"], r
print("%d requests, all gzip protobuf and decoded; steps in 4 batches of at most 50" % len(reqs))
PY

# 503 twice, then OK: everything arrives, the two failures are retried.
expect 0 "41 sent in 1 requests .* 0 dropped; 2 failed requests, 2 retries" \
	"$ct" convert "$data/nvtx.cupti" --otlp "$otlp_url/fail503x2"
[ "$(grep -c '"/fail503x2/v1/traces"' "$otlp_spans")" = 41 ] && ok || bad "503x2: spans"
[ "$(grep -c '"status":503' "$otlp_reqs")" = 2 ] && ok || bad "503x2: requests"
expect 0 "41 sent in 1 requests .* 1 failed requests, 1 retries" \
	"$ct" convert "$data/nvtx.cupti" --otlp "$otlp_url/fail429x1"

# The collector rejects a span (partial success): counted as dropped.
expect 1 "41 spans: 40 sent .* 1 dropped" \
	"$ct" convert "$data/nvtx.cupti" --otlp "$otlp_url/reject1"

# Collector down (a port nobody listens on): convert finishes quickly, the file is written,
# every span is counted as dropped and the failed requests are reported.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
t0=$(now_ms)
expect 1 "2045 spans: 0 sent in 0 requests (0 bytes), 2045 dropped; [1-9][0-9]* failed requests" \
	"$ct" convert "$data/multi_stream.cupti" -o "$tmp/down.pftrace" \
	--otlp "http://127.0.0.1:$port" --otlp-timeout 2000 --otlp-batch 100
t=$(($(now_ms) - t0))
[ $t -lt 4000 ] && ok || bad "collector down: convert took $t ms"
grep -q "Couldn't connect" "$tmp/err" && ok || bad "collector down: no reason given"
"$ct" stats "$tmp/down.pftrace" >/dev/null && ok || bad "collector down: the file"
echo "collector down: $t ms, $(grep -o '[0-9]* failed requests' "$tmp/err")"

# Stalled collector (takes the request, never answers): the final flush ends at --otlp-timeout.
t0=$(now_ms)
expect 1 "0 sent in 0 requests (0 bytes), 2045 dropped; 1 failed requests" \
	"$ct" convert "$data/multi_stream.cupti" --otlp "$otlp_url/stall" --otlp-timeout 1500
t=$(($(now_ms) - t0))
[ $t -ge 1400 ] && [ $t -lt 3500 ] && ok || bad "stalled collector: convert took $t ms"
echo "stalled collector: $t ms"

# libcurl missing: one clear message, no spans, and convert says so.
expect 1 "cannot load libcurl" env CUPTRACE_OTLP_LIBCURL=libcurl-missing.so.9 \
	"$ct" convert "$data/nvtx.cupti" -o "$tmp/nocurl.pftrace" --otlp "$otlp_url"
[ "$(grep -c 'libcurl' "$tmp/err")" = 1 ] && ok || bad "libcurl missing: more than one message"

# Bad options.
expect 2 "bad value for --otlp-batch" "$ct" convert "$data/nvtx.cupti" --otlp "$otlp_url" \
	--otlp-batch 0
expect 2 "bad --otlp URL" "$ct" convert "$data/nvtx.cupti" --otlp "ftp://127.0.0.1"
expect 2 "needs --otlp" "$ct" convert "$data/nvtx.cupti" -o "$tmp/x.pftrace" --service x
expect 2 "needs -o OUTPUT (or --otlp URL)" "$ct" convert "$data/nvtx.cupti"
expect 2 "needs --otlp" "$ct" record -o none -- true
expect 2 "not a raw capture" "$ct" record --capture --otlp "$otlp_url" -- true
expect 2 "bad value for --otlp-timeout" "$ct" record --otlp "$otlp_url" --otlp-timeout x -- true

otlp_stop
if [ "$fail" = 0 ]; then
	echo "otlp: $n checks passed"
	rm -rf "$tmp"
fi
exit $fail
