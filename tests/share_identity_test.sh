#!/bin/sh
# `cuptrace share` removes identity by rule, not by a list of keys: a torch.profiler JSON with a
# host name, user names and a home path planted under the keys real tools use (Kineto's
# host_name, username, the team keys tw_user and job_user, hostName, home) and again inside
# other strings (process and thread names, a slice's name and argument, another metadata
# value). Every byte of every copy (.json.gz decompressed, .pftrace, .json) and of its markdown
# must be free of them, in any case.
set -u
ct=$CUPTRACE_BIN
src=${CUPTRACE_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
if ! command -v python3 >/dev/null 2>&1; then
	echo "SKIP: python3 not found"
	exit 77
fi
tmp=$(mktemp -d "${CUPTRACE_TMP:-/tmp}/shareid.XXXXXX")
. "$src/tests/script_lib.sh"

python3 - "$tmp/in.json" <<'PY'
import json, sys
ev = [{"ph": "M", "name": "process_name", "pid": 7, "tid": 0, "args": {"name": "python on qzhost7731"}},
      {"ph": "M", "name": "thread_name", "pid": 7, "tid": 7, "args": {"name": "worker of alice9x"}},
      {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1 teambob9y", "pid": 7, "tid": 7,
       "ts": 1000.0, "dur": 50.0, "args": {"note": "carol7z ran it on QZHOST7731.corp.example in /data/dave5w/x"}},
      {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 1010.0, "dur": 5.0,
       "args": {"device": 0, "stream": 7, "by": "erin3q"}}]
doc = {"schemaVersion": 1, "host_name": "qzhost7731.corp.example", "username": "alice9x",
       "tw_user": "teambob9y", "job_user": "carol7z", "home": "/data/dave5w", "hostName": "frank-node-4u",
       "owner_email": "erin3q", "comment": "built by alice9x on frank-node-4u for teambob9y",
       "baseTimeNanoseconds": 1711964646000000000, "traceEvents": ev}
json.dump(doc, open(sys.argv[1], "w"))
PY
# the planted secrets, and the first label of the host name
secrets="qzhost7731 alice9x teambob9y carol7z dave5w frank-node-4u erin3q"
for out in out.json.gz out.pftrace out.json; do
	"$ct" share "$tmp/in.json" -o "$tmp/$out" >"$tmp/log" 2>&1 || { bad "share -o $out:"; cat "$tmp/log"; continue; }
	python3 - "$tmp/$out" "$tmp/$out.md" "$tmp/log" $secrets <<'PY' && ok || bad "share -o $out leaks a planted secret"
import gzip, sys
files, secrets = sys.argv[1:4], sys.argv[4:]
leak = 0
for f in files:
    b = open(f, "rb").read()
    if b[:2] == b"\x1f\x8b":
        b = gzip.decompress(b)
    low = b.lower()
    for s in secrets:
        if s.encode().lower() in low:
            i = low.index(s.encode().lower())
            print("FAIL: %s holds %s: ...%r..." % (f, s, b[max(0, i - 40):i + 40]))
            leak = 1
sys.exit(leak)
PY
	# what stays: the copy still reads, with its slice and kernel
	"$ct" stats "$tmp/$out" >"$tmp/st" 2>&1 && grep -q "gemm" "$tmp/st" && ok || { bad "stats of $out:"; cat "$tmp/st"; }
done
# A merged trace (side by side) keeps each input's trace info and summary as instants with the
# input's metadata: its shared copy holds none of the secrets either.
cp "$tmp/in.json" "$tmp/in2.json"
if "$ct" merge --side-by-side "$tmp/in.json" "$tmp/in2.json" -o "$tmp/merged.pftrace" >"$tmp/mlog" 2>&1 &&
	"$ct" share "$tmp/merged.pftrace" -o "$tmp/mshared.json" >"$tmp/mslog" 2>&1; then
	python3 - "$tmp/mshared.json" "$tmp/mshared.json.md" $secrets <<'PY' && ok || bad "share of a merged trace leaks a planted secret"
import sys
files, secrets = sys.argv[1:3], sys.argv[3:]
leak = 0
for f in files:
    low = open(f, "rb").read().lower()
    for s in secrets:
        if s.encode().lower() in low:
            print("FAIL: %s holds %s" % (f, s))
            leak = 1
sys.exit(leak)
PY
else
	bad "merge + share:"; cat "$tmp/mlog" "$tmp/mslog"
fi
# keys other tools use, by rule: all gone, and said so
for k in host_name username tw_user job_user home hostName owner_email; do
	grep -q "^cuptrace share: $k: removed" "$tmp/log" && ok || { bad "share does not say $k was removed:"; cat "$tmp/log"; }
done

echo "$n checks passed"
[ $fail = 0 ] && rm -rf "$tmp"
exit $fail
