# Sourced by the OTLP tests (tests/otlp_test.sh, tests/gpu_otlp_test.sh), after they set $tmp:
# installs the test receiver's decoder (npm ci of package-lock.json, once per lock, into
# $CUPTRACE_TMP/otlp-receiver) and starts and stops the receiver on 127.0.0.1.
#   otlp_install        0, or 1 with the reason in $otlp_why (no node or npm, npm ci failed)
#   otlp_start [python] starts receiver.js (or, given "python", count_receiver.py: names and
#                       counts only, for machines without node); sets otlp_url, otlp_spans,
#                       otlp_reqs, otlp_pid; 1 if it does not come up within 20 s
#   otlp_stop           stops it (also on exit: a trap)
otlp_dir=$(cd "$(dirname "$0")/otlp" && pwd)
otlp_cache=${CUPTRACE_TMP:-/tmp}/otlp-receiver
# Local connections must not go to a proxy from the environment.
export NO_PROXY="127.0.0.1,localhost${NO_PROXY:+,$NO_PROXY}" no_proxy="127.0.0.1,localhost${no_proxy:+,$no_proxy}"

otlp_install() {
	otlp_why=
	if ! command -v node >/dev/null 2>&1; then
		otlp_why="node not found (tools/scripts/setup.sh installs nodejs and npm)"
		return 1
	fi
	# Installed beside receiver.js already (npm ci in tests/otlp, or carried to a machine
	# without the registry): node finds it there first.
	[ -d "$otlp_dir/node_modules/@opentelemetry/otlp-transformer" ] && return 0
	if cmp -s "$otlp_dir/package-lock.json" "$otlp_cache/package-lock.json" &&
		[ -d "$otlp_cache/node_modules/@opentelemetry/otlp-transformer" ]; then
		return 0
	fi
	if ! command -v npm >/dev/null 2>&1; then
		otlp_why="npm not found (tools/scripts/setup.sh installs it)"
		return 1
	fi
	rm -rf "$otlp_cache" && mkdir -p "$otlp_cache" &&
		cp "$otlp_dir/package.json" "$otlp_dir/package-lock.json" "$otlp_cache/" || {
		otlp_why="cannot write $otlp_cache"
		return 1
	}
	# --ignore-scripts: protobufjs's postinstall only checks versions of optional tools.
	if ! (cd "$otlp_cache" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error \
		>"$otlp_cache/npm.log" 2>&1); then
		otlp_why="npm ci failed (is the npm registry reachable?): $(tail -3 "$otlp_cache/npm.log")"
		rm -f "$otlp_cache/package-lock.json"
		return 1
	fi
	return 0
}

otlp_start() {
	otlp_spans=$tmp/otlp_spans.jsonl otlp_reqs=$tmp/otlp_requests.jsonl
	rm -f "$tmp/otlp.port"
	if [ "${1:-}" = python ]; then
		python3 "$otlp_dir/count_receiver.py" "$tmp/otlp.port" "$otlp_spans" "$otlp_reqs" \
			2>"$tmp/receiver.err" &
	else
		NODE_PATH=$otlp_cache/node_modules node "$otlp_dir/receiver.js" "$tmp/otlp.port" \
			"$otlp_spans" "$otlp_reqs" 2>"$tmp/receiver.err" &
	fi
	otlp_pid=$!
	trap otlp_stop EXIT
	k=0
	while [ ! -s "$tmp/otlp.port" ] && [ $k -lt 200 ]; do
		kill -0 "$otlp_pid" 2>/dev/null || break
		sleep 0.1
		k=$((k + 1))
	done
	if [ ! -s "$tmp/otlp.port" ]; then
		echo "the receiver did not start:"
		cat "$tmp/receiver.err"
		return 1
	fi
	otlp_url=http://127.0.0.1:$(cat "$tmp/otlp.port")
}

otlp_stop() {
	if [ -n "${otlp_pid:-}" ]; then
		kill "$otlp_pid" 2>/dev/null
		wait "$otlp_pid" 2>/dev/null
		otlp_pid=
	fi
}
