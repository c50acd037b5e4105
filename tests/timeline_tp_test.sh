#!/bin/sh
# The timeline layout (src/format/TIMELINE.md) as Perfetto's own trace processor imports it:
# per process, the CUPTI overhead track names that hold slices (at most 1), the tracks named like
# the process (or unnamed) that hold slices (0: the row ui.perfetto.dev drew for the metadata
# instants), and process labels (0: drawn across the process's header); the "all data sources
# started" time the UI opens at: in one trace where tests/view_check.py computes it from the
# capture, in a 2-rank merge past the ranks' start-up. Needs
# trace_processor_shell on PATH (or TRACE_PROCESSOR); skips without it. timeline_layout_test.sh
# checks the same with check_trace where it is absent.
set -u
ct=$CUPTRACE_BIN
data=$CUPTRACE_TEST_DATA
src=${CUPTRACE_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
tp=${TRACE_PROCESSOR:-$(command -v trace_processor_shell 2>/dev/null || true)}
if [ -z "$tp" ] || [ ! -x "$tp" ]; then
	echo "SKIP: trace_processor_shell not found (PATH or TRACE_PROCESSOR): Perfetto's counts not taken"
	exit 77
fi
tmp=$(mktemp -d "${CUPTRACE_TMP:-/tmp}/timeline_tp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail=0

# One row per process ("ROW ..."), and a "BAD ..." row for each rule broken. The UI places a
# track under a process by its upid dimension and draws only tracks that hold slices or counter
# values (viz/summary/slices.sql, dev.perfetto.TraceProcessorTrack).
cat >"$tmp/layout.sql" <<'SQL'
CREATE PERFETTO TABLE _cuptrace_proc AS
SELECT
  p.upid, p.pid, p.name AS pname,
  (SELECT COUNT(DISTINCT t.name) FROM track t
   WHERE extract_arg(t.dimension_arg_set_id, 'upid') = p.upid
     AND t.name GLOB 'CUPTI overhead*'
     AND EXISTS (SELECT 1 FROM slice s WHERE s.track_id = t.id)) AS overhead,
  (SELECT COUNT(*) FROM track t
   WHERE extract_arg(t.dimension_arg_set_id, 'upid') = p.upid
     AND (t.name IS NULL OR t.name = p.name)
     AND EXISTS (SELECT 1 FROM slice s WHERE s.track_id = t.id)) AS named_like,
  (SELECT COUNT(*) FROM args a
   WHERE p.arg_set_id IS NOT NULL AND a.arg_set_id = p.arg_set_id
     AND a.flat_key = 'chrome.process_label') AS labels
FROM process p
WHERE p.pid IS NOT NULL AND p.pid != 0;
SELECT 'ROW pid ' || pid || ' ' || ifnull(pname, '?') || ': ' || overhead
       || ' overhead track names, ' || named_like || ' tracks named like it, '
       || labels || ' labels' AS line
FROM _cuptrace_proc
UNION ALL
SELECT 'BAD pid ' || pid || ' breaks the layout' FROM _cuptrace_proc
WHERE overhead > 1 OR named_like > 0 OR labels > 0
UNION ALL
SELECT 'BAD no process' WHERE NOT EXISTS (SELECT 1 FROM _cuptrace_proc)
UNION ALL
SELECT 'VIEW ' || (int_value - (SELECT start_ts FROM trace_bounds)) FROM metadata
WHERE name = 'all_data_source_started_ns'
UNION ALL
SELECT 'END ' || (end_ts - start_ts) FROM trace_bounds;
SQL

query() { # trace -> its lines in $tmp/q
	if ! "$tp" --query-file "$tmp/layout.sql" "$1" >"$tmp/q" 2>"$tmp/err"; then
		echo "FAIL: trace_processor_shell on $1"
		cat "$tmp/err"
		fail=1
		return 1
	fi
	grep -E "ROW|BAD|VIEW|END" "$tmp/q" | sed "s|^|$(basename "$1"): |"
	if grep -q "BAD" "$tmp/q"; then
		echo "FAIL: $(basename "$1") (BAD rows above)"
		fail=1
	fi
	return 0
}

for f in ddp2_rank0 ddp2_rank1 torch_train multi_stream vector_add peer_copy; do
	"$ct" convert "$data/$f.cupti" -o "$tmp/$f.pftrace" >/dev/null 2>&1 ||
		{ echo "FAIL: convert $f"; fail=1; continue; }
	query "$tmp/$f.pftrace" || continue
	# One trace opens where its GPU work begins (TIMELINE.md): trace_processor's view start
	# is where tests/view_check.py puts it from the capture's records, given the trace's end
	# as trace_processor sees it.
	v=$(sed -n 's/.*VIEW \([0-9][0-9]*\).*/\1/p' "$tmp/q" | head -1)
	e=$(sed -n 's/.*END \([0-9][0-9]*\).*/\1/p' "$tmp/q" | head -1)
	if ! python3 "$src/tests/view_check.py" "$data/$f.cupti" "$tmp/$f.pftrace" "${e:-0}" \
		>"$tmp/vc" 2>&1; then
		echo "FAIL: $f.pftrace: view start"
		cat "$tmp/vc"
		fail=1
		continue
	fi
	want=$(sed -n 's/^expect view at \([0-9][0-9]*\) ns$/\1/p' "$tmp/vc")
	if [ -n "$want" ] && { [ -z "$v" ] || [ $((v > want ? v - want : want - v)) -gt 1000 ]; }; then
		echo "FAIL: $f.pftrace: trace_processor's view start '${v}' ns, expected $want ns"
		fail=1
	elif [ -z "$want" ] && [ -n "$v" ]; then
		echo "FAIL: $f.pftrace: a view start, expected none"
		fail=1
	fi
done
if "$ct" merge --ranks "$tmp/ddp2_rank0.pftrace" "$tmp/ddp2_rank1.pftrace" \
	-o "$tmp/ranks.pftrace" >/dev/null 2>&1; then
	if query "$tmp/ranks.pftrace"; then
		# Two processes, and the first view starts past the first fifth of the trace (the
		# ranks' start-up: 7.1 s of 8.2 s).
		[ "$(grep -c "ROW" "$tmp/q")" -ge 2 ] || { echo "FAIL: ranks: not 2 processes"; fail=1; }
		v=$(sed -n 's/.*VIEW \([0-9][0-9]*\).*/\1/p' "$tmp/q" | head -1)
		if [ -z "$v" ] || [ "$v" -lt 1000000000 ]; then
			echo "FAIL: ranks.pftrace: view start '${v}' ns, expected past start-up (7.1 s)"
			fail=1
		fi
	fi
else
	echo "FAIL: merge --ranks"
	fail=1
fi
[ $fail = 0 ] && echo "timeline in trace_processor: ok"
exit $fail
