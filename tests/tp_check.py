#!/usr/bin/env python3
"""Loads a trace (.pftrace, .json, either gzipped) in Perfetto's trace_processor_shell and checks
it: no import error or data loss in its `stats` table, and the counts it reads back equal what
the caller expects, or those of another trace (--same-as).

Exit status: 0 clean and as expected, 1 not, 77 (with a SKIP line) when trace_processor_shell
is not there. It is looked for in --tp, then $TRACE_PROCESSOR_SHELL, then
shared/tools/trace_processor_shell beside the source checkout (../shared from its root).

Slices are counted as trace_processor stores them: an instant is a slice of duration 0, so
"slices" below are those with a duration and "instants" those without. A track's name is the
thread's name for a thread track; tracks of the same name (overlap lanes) are summed.
"""
import argparse
import collections
import csv
import io
import os
import subprocess
import sys
import tempfile

# One query, one CSV: (kind, key, value) rows.
QUERY = """
with lab as (
  select t.id, coalesce(t.name, th.name, '') as label
  from track t left join thread_track tt using (id) left join thread th using (utid)
)
select 'stat' as kind, name || coalesce('[' || idx || ']', '') || ' (' || severity || ')' as key,
       value from stats where severity in ('error', 'data_loss') and value > 0
union all select 'slices', '', count(*) from slice where dur != 0
union all select 'instants', '', count(*) from slice where dur = 0
union all select 'category', coalesce(category, ''), count(*) from slice where dur != 0 group by 2
union all select 'category_instants', coalesce(category, ''), count(*) from slice where dur = 0
  group by 2
union all select 'name', coalesce(name, ''), count(*) from slice group by 2
union all select 'track', lab.label, count(*) from slice join lab on slice.track_id = lab.id
  group by 2
union all select 'flows', '', count(*) from flow
union all select 'flow', so.category || ' -> ' || si.category, count(*)
  from flow f join slice so on so.id = f.slice_out join slice si on si.id = f.slice_in group by 2
union all select 'category_dur', coalesce(category, ''), sum(dur) from slice where dur != 0
  group by 2
union all select 'category_ts', coalesce(category, ''),
  sum(ts - (select min(ts) from slice)) from slice group by 2
union all select 'category_depth', coalesce(category, ''), max(depth) from slice group by 2
union all select 'counters', '', count(*) from counter
union all select 'thread', coalesce(name, ''), count(*) from thread where tid != 0 group by 2
union all select 'process', coalesce(name, ''), count(*) from process where pid != 0 group by 2
union all select 'meta', name,
  replace(coalesce(str_value, cast(int_value as text), ''), '"', char(39)) from metadata
"""
# trace_processor_shell's CSV does not escape '"' inside a value: metadata values, which may be
# JSON text (torch.profiler's distributedInfo), have theirs turned into "'" above.

# What --same-as compares between two traces of the same capture: counts, the flows' ends by
# category, and per category the sum of durations, of start times (from the first slice, as the
# two formats differ in their time base) and the deepest nesting.
SAME_KINDS = ("slices", "instants", "category", "category_instants", "name", "track", "flows",
              "flow", "counters", "category_dur", "category_ts", "category_depth")


def find_tp(given):
    here = os.path.dirname(os.path.abspath(__file__))
    p = (given or os.environ.get("TRACE_PROCESSOR_SHELL")
         or os.path.join(here, "..", "..", "shared", "tools", "trace_processor_shell"))
    return p if os.path.isfile(p) and os.access(p, os.X_OK) else None


def load(tp, trace):
    """Returns {kind: {key: value}} as trace_processor reads the trace, or raises RuntimeError."""
    with tempfile.NamedTemporaryFile("w", suffix=".sql") as q:
        q.write(QUERY)
        q.flush()
        r = subprocess.run([tp, "-q", q.name, trace], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"trace_processor_shell failed ({r.returncode}):\n"
                           + "\n".join(r.stderr.strip().splitlines()[-10:]))
    counts = collections.defaultdict(dict)
    rows = list(csv.reader(io.StringIO(r.stdout)))
    if not rows or rows[0] != ["kind", "key", "value"]:
        raise RuntimeError("unexpected output from trace_processor_shell:\n" + r.stdout[:2000])
    for kind, key, value in rows[1:]:
        counts[kind][key] = value if kind == "meta" else int(value)
    return counts


def pair(text):
    key, sep, n = text.rpartition("=")
    if not sep or not n.lstrip("-").isdigit():
        raise argparse.ArgumentTypeError(f"expected NAME=N, got {text!r}")
    return key, int(n)


def meta_pair(text):
    key, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 fromfile_prefix_chars="@",
                                 epilog="@FILE reads more arguments from FILE, one a line.")
    ap.add_argument("trace")
    ap.add_argument("--tp", help="path of trace_processor_shell")
    ap.add_argument("--slices", type=int, help="slices with a duration, in all")
    ap.add_argument("--instants", type=int, help="instants (slices of duration 0), in all")
    ap.add_argument("--category", type=pair, action="append", default=[], metavar="CAT=N",
                    help="slices with a duration of category CAT")
    ap.add_argument("--name", type=pair, action="append", default=[], metavar="NAME=N",
                    help="slices and instants named NAME")
    ap.add_argument("--track", type=pair, action="append", default=[], metavar="NAME=N",
                    help="slices and instants on the tracks named NAME")
    ap.add_argument("--flows", type=int, help="rows of the flow table")
    ap.add_argument("--counters", type=int, help="counter values")
    ap.add_argument("--thread", action="append", default=[], metavar="NAME",
                    help="a thread of this name exists")
    ap.add_argument("--process", action="append", default=[], metavar="NAME",
                    help="a process of this name exists")
    ap.add_argument("--meta", type=meta_pair, action="append", default=[], metavar="KEY=VALUE",
                    help="the metadata table's KEY is VALUE (e.g. system_release=6.1.0)")
    ap.add_argument("--same-as", metavar="TRACE",
                    help="another trace of the same timeline: same slices and instants per "
                         "category and per track name, same flows and counter values")
    ap.add_argument("--same-totals-as", metavar="TRACE",
                    help="another trace of the same work in another tool's layout (e.g. the "
                         "torch.profiler JSON a trace was converted from): the same numbers of "
                         "slices, flows and counter values")
    ap.add_argument("--print", action="store_true", help="print every count read back")
    a = ap.parse_args()

    tp = find_tp(a.tp)
    if not tp:
        print("SKIP: trace_processor_shell not found (--tp, $TRACE_PROCESSOR_SHELL, or "
              "shared/tools/ beside the checkout)")
        return 77
    try:
        c = load(tp, a.trace)
        other = load(tp, a.same_as) if a.same_as else None
        totals = load(tp, a.same_totals_as) if a.same_totals_as else None
    except RuntimeError as e:
        print(f"FAIL {a.trace}: {e}")
        return 1

    bad = []
    for key, v in sorted(c["stat"].items()):
        bad.append(f"stats: {key} = {v}")
    for key, v in sorted(other["stat"].items() if other else ()):
        bad.append(f"stats of {a.same_as}: {key} = {v}")

    def expect(what, got, want):
        if want is not None and got != want:
            bad.append(f"{what}: {got}, expected {want}")

    expect("slices", c["slices"].get("", 0), a.slices)
    expect("instants", c["instants"].get("", 0), a.instants)
    expect("flows", c["flows"].get("", 0), a.flows)
    expect("counter values", c["counters"].get("", 0), a.counters)
    for kind, pairs in (("category", a.category), ("name", a.name), ("track", a.track)):
        for key, n in pairs:
            expect(f"{kind} {key!r}", c[kind].get(key, 0), n)
    for kind, names in (("thread", a.thread), ("process", a.process)):
        for n in names:
            if n not in c[kind]:
                bad.append(f"no {kind} named {n!r} (there are: {sorted(c[kind])})")
    for key, value in a.meta:
        expect(f"metadata {key}", c["meta"].get(key), value)
    for kind in ("slices", "flows", "counters") if totals is not None else ():
        x, y = c[kind].get("", 0), totals[kind].get("", 0)
        if x != y:
            bad.append(f"{kind}: {x} here, {y} in {a.same_totals_as}")
    if other is not None:
        for kind in SAME_KINDS:
            for key in sorted(set(c[kind]) | set(other[kind])):
                x, y = c[kind].get(key, 0), other[kind].get(key, 0)
                if x != y:
                    bad.append(f"{kind} {key!r}: {x} here, {y} in {a.same_as}")

    if a.print:
        for kind in sorted(c):
            for key, v in sorted(c[kind].items()):
                print(f"  {kind}\t{key}\t{v}")
    summary = (f"{c['slices'].get('', 0)} slices, {c['instants'].get('', 0)} instants, "
               f"{c['flows'].get('', 0)} flows, {c['counters'].get('', 0)} counter values")
    if bad:
        print(f"FAIL {a.trace} in trace_processor ({summary}):")
        for b in bad:
            print("  " + b)
        return 1
    print(f"ok {a.trace} in trace_processor: {summary}, stats clean"
          + (f", same as {os.path.basename(a.same_as)}" if other is not None else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
