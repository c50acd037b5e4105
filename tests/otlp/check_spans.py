#!/usr/bin/env python3
"""Checks the spans a test receiver decoded (receiver.js: one JSON line per span) against the
same run's trace file, read back by cuptrace into Chrome JSON, and its `cuptrace stats --json`.

  check_spans.py SPANS.jsonl PATH REFERENCE.json STATS.json [--service NAME]
                 [--trace-per NAME] [--parent CHILD=PARENT]...

Only spans that came in on PATH count. Checks: one span per slice and instant of the file, with
the same name, start and end (Unix ns = the trace's start_realtime_ns + its relative time) and
the same arguments as attributes; unique span ids; every parent present and in the same trace;
every GPU slice with an incoming flow under an API call with its correlation id; one trace (the
trace's uuid), or with --trace-per one per occurrence of NAME; the resource. Prints what it
checked; exits 1 on the first kind of mismatch it finds (after printing them all)."""
import collections
import json
import sys

args = sys.argv[1:]
spans_file, path, ref_file, stats_file = args[:4]
opts = {"--service": None, "--trace-per": None}
parents = []
i = 4
while i < len(args):
    if args[i] == "--parent":
        parents.append(args[i + 1].split("=", 1))
    else:
        opts[args[i]] = args[i + 1]
    i += 2

errors = []


def err(msg):
    errors.append(msg)
    print("MISMATCH:", msg)


spans = [json.loads(l) for l in open(spans_file) if l.strip()]
spans = [s for s in spans if s["path"] == path]
ref = json.load(open(ref_file))
ref = ref["traceEvents"] if isinstance(ref, dict) else ref
stats = json.load(open(stats_file))

info = next(e for e in ref if e.get("name") == "cuptrace: trace info")["args"]
base = int(info["start_realtime_ns"])
uuid = info.get("trace_uuid", "").replace("-", "")


def ns(us):
    # Chrome JSON times are microseconds with three decimals: nanoseconds exactly
    return int(round(float(us) * 1000))


def norm(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


# --- counts ---
want = stats["events"]["slices"] + stats["events"]["instants"]
if len(spans) != want:
    err("%d spans, the file has %d slices + %d instants" %
        (len(spans), stats["events"]["slices"], stats["events"]["instants"]))

# --- names, times, arguments against the file ---
events = collections.defaultdict(list)
for e in ref:
    if e.get("ph") == "X" or (e.get("ph") == "i" and e.get("cat") != "cuptrace"):
        start = base + ns(e["ts"])
        end = start + (ns(e["dur"]) if e.get("ph") == "X" else 0)
        events[(e["name"], start, end)].append(e.get("args", {}))
by_key = collections.defaultdict(list)
for s in spans:
    by_key[(s["name"], int(s["start"]), int(s["end"]))].append(s)
unmatched = 0
attrs_checked = 0
for key, evs in events.items():
    got = by_key.get(key, [])
    if len(got) != len(evs):
        unmatched += 1
        if unmatched <= 5:
            err("%r: %d in the file, %d spans" % (key, len(evs), len(got)))
        continue
    # each event's arguments, on one of the spans of its name and time
    for a in evs:
        if not any(all(k in s["attributes"] and norm(s["attributes"][k]) == norm(v)
                       for k, v in a.items()) for s in got):
            err("%r: no span has the arguments %r" % (key, a))
        attrs_checked += len(a)
if unmatched:
    err("%d name/start/end keys differ between the file and the spans" % unmatched)

# --- ids, parents, traces ---
ids = collections.Counter(s["spanId"] for s in spans)
dups = [k for k, c in ids.items() if c > 1]
if dups:
    err("%d span ids used more than once" % len(dups))
by_id = {s["spanId"]: s for s in spans}
missing = [s for s in spans if s["parentSpanId"] and s["parentSpanId"] not in by_id]
if missing:
    err("%d spans name a parent that was not sent (e.g. %s)" % (len(missing), missing[0]["name"]))
cross = [s for s in spans if s["parentSpanId"] in by_id and
         by_id[s["parentSpanId"]]["traceId"] != s["traceId"]]
if cross:
    err("%d spans have a parent in another trace" % len(cross))
gpu_with_parent = 0
for s in spans:
    cat = s["attributes"].get("category")
    if cat not in ("kernel", "memcpy", "memset") or not s["parentSpanId"]:
        continue
    p = by_id.get(s["parentSpanId"])
    if p is None:
        continue
    if p["attributes"].get("category") in ("cuda_runtime", "cuda_driver"):
        gpu_with_parent += 1
        if p["attributes"].get("correlation_id") != s["attributes"].get("correlation_id"):
            err("%s under %s with another correlation id" % (s["name"], p["name"]))
if gpu_with_parent != stats["events"]["gpu_slices_with_flow_in"]:
    err("%d GPU spans under their launch, the file has %d GPU slices with an incoming flow" %
        (gpu_with_parent, stats["events"]["gpu_slices_with_flow_in"]))
for child, parent in parents:
    c = [s for s in spans if s["name"] == child]
    if not c or any(by_id.get(s["parentSpanId"], {}).get("name") != parent for s in c):
        err("not every %s span is a child of %s" % (child, parent))

traces = collections.Counter(s["traceId"] for s in spans)
tp = opts["--trace-per"]
if tp is None:
    if list(traces) != [uuid]:
        err("traces %s, want the trace uuid %s" % (list(traces)[:3], uuid))
else:
    roots = [s for s in spans if s["name"] == tp]
    if len(traces) != len(roots) + (1 if uuid in traces else 0):
        err("%d traces for %d '%s' ranges" % (len(traces), len(roots), tp))
    for r in roots:
        if r["parentSpanId"]:
            err("a '%s' range with a parent" % tp)
        members = [s for s in spans if s["traceId"] == r["traceId"]]
        for s in members:
            hop, seen = s, 0
            while hop["parentSpanId"] and seen < 64:
                hop, seen = by_id[hop["parentSpanId"]], seen + 1
            if hop is not r:
                err("%s in the trace of a '%s' range is not below it" % (s["name"], tp))
                break

# --- the resource ---
svc = opts["--service"] or info.get("process_name")
for s in spans[:1]:
    r = s["resource"]
    if r.get("service.name") != svc:
        err("service.name %r, want %r" % (r.get("service.name"), svc))
    if str(r.get("process.pid")) != str(info.get("pid")):
        err("process.pid %r, want %r" % (r.get("process.pid"), info.get("pid")))
    if info.get("hostname") not in (None, "", "?") and r.get("host.name") != info.get("hostname"):
        err("host.name %r, want %r" % (r.get("host.name"), info.get("hostname")))
    if s["scope"] != "cuptrace":
        err("scope %r" % s["scope"])
print("%s: %d spans in %d traces, %d with a parent, %d GPU spans under their launch; "
      "%d arguments compared with the file" %
      (path, len(spans), len(traces), sum(1 for s in spans if s["parentSpanId"]),
       gpu_with_parent, attrs_checked))
sys.exit(1 if errors else 0)
