// A test OTLP/HTTP trace receiver for cuptrace's --otlp: listens on 127.0.0.1, decodes every
// request body with OpenTelemetry's own generated protobuf code (the protobufjs decoder that
// @opentelemetry/otlp-transformer 0.52 ships), and writes what it got as JSON lines.
//
//   node receiver.js PORTFILE SPANS.jsonl REQUESTS.jsonl
//
// It writes its port to PORTFILE once it listens. Each span becomes one line of SPANS.jsonl,
// each request (decoded or not) one line of REQUESTS.jsonl. The path before /v1/traces tells it
// how to answer, so one receiver serves every case of a test:
//   /v1/traces                  200 with an empty ExportTraceServiceResponse
//   /run-NAME/v1/traces         the same (a test tells its cases apart by path)
//   /fail503x2/v1/traces        503 to the first 2 requests on this path, then 200 (also 429)
//   /stall/v1/traces            never answers (the client must give up on its own)
//   /reject1/v1/traces          200 with a partial success that rejects 1 span
// A body that is not gzip when it says so, not protobuf, or not a valid request is answered 400
// and logged with its error: the test counts those as failures.
'use strict';
const http = require('http');
const fs = require('fs');
const zlib = require('zlib');
const root = require('@opentelemetry/otlp-transformer/build/src/generated/root');

const Req = root.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;
const Resp = root.opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse;

const [portFile, spansFile, reqFile] = process.argv.slice(2);
if (!reqFile) {
	console.error('usage: node receiver.js PORTFILE SPANS.jsonl REQUESTS.jsonl');
	process.exit(2);
}
fs.writeFileSync(spansFile, '');
fs.writeFileSync(reqFile, '');

const hex = (b) => Buffer.from(b || []).toString('hex');
const str = (v) => (v === undefined || v === null ? null : v.toString());

function anyValue(v) {
	if (!v || !v.value)
		return null;
	switch (v.value) {
	case 'stringValue':
		return v.stringValue;
	case 'boolValue':
		return v.boolValue;
	case 'intValue':
		// int64 as a string when it does not fit a double exactly
		return Number.isSafeInteger(Number(str(v.intValue))) ? Number(str(v.intValue))
		                                                     : str(v.intValue);
	case 'doubleValue':
		return v.doubleValue;
	case 'arrayValue':
		return (v.arrayValue.values || []).map(anyValue);
	case 'bytesValue':
		return hex(v.bytesValue);
	default:
		return { unsupported: v.value };
	}
}

function attrs(list) {
	const out = {};
	for (const kv of list || []) {
		if (kv.key in out)
			out.__duplicate_keys = (out.__duplicate_keys || 0) + 1;
		out[kv.key] = anyValue(kv.value);
	}
	return out;
}

const failures = {}; // path -> answers given so far

function answer(res, code, body) {
	res.writeHead(code, { 'Content-Type': 'application/x-protobuf' });
	res.end(body || Buffer.alloc(0));
}

const server = http.createServer((req, res) => {
	const chunks = [];
	req.on('data', (c) => chunks.push(c));
	req.on('end', () => {
		const path = req.url;
		const log = {
			path,
			method: req.method,
			content_type: req.headers['content-type'] || null,
			content_encoding: req.headers['content-encoding'] || null,
			bytes: 0,
			spans: 0,
			status: 200,
			error: null,
			t_ms: Date.now(),
		};
		const done = (code, body) => {
			log.status = code;
			fs.appendFileSync(reqFile, JSON.stringify(log) + '\n');
			if (code)
				answer(res, code, body);
		};
		const m = /^(?:\/(fail(503|429)x(\d+)|stall|reject(\d+)|run-[\w.-]+))?\/v1\/traces$/.exec(path);
		if (req.method !== 'POST' || !m) {
			log.error = 'unexpected ' + req.method + ' ' + path;
			return done(404);
		}
		let body = Buffer.concat(chunks);
		log.bytes = body.length;
		try {
			if (log.content_encoding === 'gzip')
				body = zlib.gunzipSync(body);
			if (log.content_type !== 'application/x-protobuf')
				throw new Error('content-type ' + log.content_type);
			const msg = Req.decode(body);
			const lines = [];
			for (const rs of msg.resourceSpans || []) {
				const resource = attrs(rs.resource && rs.resource.attributes);
				for (const ss of rs.scopeSpans || []) {
					for (const s of ss.spans || []) {
						lines.push(JSON.stringify({
							traceId: hex(s.traceId),
							spanId: hex(s.spanId),
							parentSpanId: hex(s.parentSpanId),
							name: s.name,
							kind: s.kind,
							start: str(s.startTimeUnixNano),
							end: str(s.endTimeUnixNano),
							attributes: attrs(s.attributes),
							links: (s.links || []).map((l) => ({ traceId: hex(l.traceId), spanId: hex(l.spanId) })),
							scope: ss.scope ? ss.scope.name : null,
							resource,
							path,
						}));
					}
				}
			}
			log.spans = lines.length;
			// Counted before the answer is decided: a failed request's spans are not kept.
			if (m[2]) {
				failures[path] = (failures[path] || 0) + 1;
				if (failures[path] <= Number(m[3]))
					return done(Number(m[2]));
			}
			if (m[1] === 'stall') {
				log.status = 0;
				fs.appendFileSync(reqFile, JSON.stringify(log) + '\n');
				return; // never answers; the client hangs up
			}
			if (lines.length)
				fs.appendFileSync(spansFile, lines.join('\n') + '\n');
			let resp;
			if (m[4])
				resp = Resp.encode({ partialSuccess: { rejectedSpans: Number(m[4]), errorMessage: 'test' } }).finish();
			else
				resp = Resp.encode({}).finish();
			done(200, resp);
		} catch (e) {
			log.error = String(e && e.message ? e.message : e);
			done(400);
		}
	});
});

server.listen(0, '127.0.0.1', () => {
	fs.writeFileSync(portFile + '.tmp', String(server.address().port));
	fs.renameSync(portFile + '.tmp', portFile);
});
process.on('SIGTERM', () => process.exit(0));
