#!/usr/bin/env python3
"""A fallback OTLP/HTTP receiver for machines without node (the GPU machines): the standard
library only. It reads the protobuf wire format itself, so it checks much less than receiver.js
(which uses OpenTelemetry's own decoder): per span its name, ids, times and category, and per
request the headers. Same command line and output lines as receiver.js; of its answers only
/stall/ (never answers) besides 200.

  count_receiver.py PORTFILE SPANS.jsonl REQUESTS.jsonl
"""
import gzip
import http.server
import json
import os
import sys
import time


def fields(buf):
    """(field number, wire type, value) of one message; value is bytes for length-delimited."""
    i, n = 0, len(buf)
    while i < n:
        key, i = varint(buf, i)
        f, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(buf, i)
        elif wt == 1:
            v, i = int.from_bytes(buf[i:i + 8], "little"), i + 8
        elif wt == 5:
            v, i = int.from_bytes(buf[i:i + 4], "little"), i + 4
        elif wt == 2:
            ln, i = varint(buf, i)
            v, i = buf[i:i + ln], i + ln
        else:
            raise ValueError("wire type %d" % wt)
        yield f, wt, v


def varint(buf, i):
    shift = v = 0
    while True:
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return v, i


def attrs(kvs):
    out = {}
    for kv in kvs:
        key, val = None, None
        for f, _, v in fields(kv):
            if f == 1:
                key = v.decode()
            elif f == 2:
                for g, _, x in fields(v):
                    val = x.decode(errors="replace") if g == 1 else x
        out[key] = val
    return out


def spans_of(body):
    for f, _, rs in fields(body):
        if f != 1:
            continue
        resource = {}
        for g, _, v in fields(rs):
            if g == 1:
                resource = attrs([x for h, _, x in fields(v) if h == 1])
            elif g == 2:
                for h, _, sp in fields(v):
                    if h != 2:
                        continue
                    s = {"parentSpanId": "", "links": [], "resource": resource}
                    kvs = []
                    for k, _, x in fields(sp):
                        if k == 1:
                            s["traceId"] = x.hex()
                        elif k == 2:
                            s["spanId"] = x.hex()
                        elif k == 4:
                            s["parentSpanId"] = x.hex()
                        elif k == 5:
                            s["name"] = x.decode()
                        elif k == 7:
                            s["start"] = str(x)
                        elif k == 8:
                            s["end"] = str(x)
                        elif k == 9:
                            kvs.append(x)
                    s["attributes"] = attrs(kvs)
                    yield s


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        log = {"path": self.path, "content_type": self.headers.get("Content-Type"),
               "content_encoding": self.headers.get("Content-Encoding"), "bytes": len(body),
               "spans": 0, "status": 200, "error": None}
        try:
            if log["content_encoding"] == "gzip":
                body = gzip.decompress(body)
            lines = [json.dumps(dict(s, path=self.path)) for s in spans_of(body)]
            log["spans"] = len(lines)
            if not self.path.startswith("/stall/"):
                with open(sys.argv[2], "a") as f:
                    f.write("".join(l + "\n" for l in lines))
        except Exception as e:  # noqa: BLE001 - any decoding problem is the answer
            log["status"], log["error"] = 400, str(e)
        if self.path.startswith("/stall/"):
            log["status"] = 0
        with open(sys.argv[3], "a") as f:
            f.write(json.dumps(log) + "\n")
        if self.path.startswith("/stall/"):
            time.sleep(3600)  # the client gives up on its own
            return
        self.send_response(log["status"])
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *a):
        pass


open(sys.argv[2], "w").close()
open(sys.argv[3], "w").close()
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
srv.daemon_threads = True
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
srv.serve_forever()
