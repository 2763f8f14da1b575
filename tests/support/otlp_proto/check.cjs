// Decodes what a program's otlp_tracer sends with OpenTelemetry's own OTLP protobuf definitions
// (the classes @opentelemetry/otlp-transformer generates from opentelemetry-proto), as a
// collector does: an OTLP/HTTP receiver on 127.0.0.1 takes each POST /v1/traces, turns the JSON
// into an ExportTraceServiceRequest (hex ids into bytes of 16 and 8), encodes it as protobuf,
// decodes that and compares the result with what was sent. A field the schema does not know, a
// value of the wrong type or an id of the wrong length is a problem.
//   node check.cjs -- PROGRAM ARGS...      "{endpoint}" in ARGS becomes the receiver's URL
// Runs each command line given (separated by "--") in turn, then prints the spans' count and
// names; exit 0 when every request decoded the same and there were spans, 1 otherwise.
'use strict';
const http = require('http');
const { spawn } = require('child_process');
const root = require('@opentelemetry/otlp-transformer/build/src/generated/root.js');

const Request = root.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;
const problems = [];
const names = [];
let spans = 0;

const hexBytes = (text, n, what) => {
  if (typeof text !== 'string' || !new RegExp(`^[0-9a-f]{${2 * n}}$`).test(text)) {
    problems.push(`${what} ${JSON.stringify(text)} is not ${2 * n} lower-case hex digits`);
    return Buffer.alloc(n);
  }
  return Buffer.from(text, 'hex');
};

// Ids as protobuf bytes, the rest as OTLP's JSON encoding writes it (which protobufjs reads).
const toProtoShape = (body) => {
  const copy = JSON.parse(JSON.stringify(body));
  for (const rs of copy.resourceSpans || [])
    for (const ss of rs.scopeSpans || [])
      for (const s of ss.spans || []) {
        s.traceId = hexBytes(s.traceId, 16, 'traceId');
        s.spanId = hexBytes(s.spanId, 8, 'spanId');
        if (s.parentSpanId !== undefined) s.parentSpanId = hexBytes(s.parentSpanId, 8, 'parentSpanId');
      }
  return copy;
};

const fromProto = (message) => {
  const out = Request.toObject(message, { longs: String, enums: Number, bytes: Array, defaults: false });
  for (const rs of out.resourceSpans || [])
    for (const ss of rs.scopeSpans || [])
      for (const s of ss.spans || [])
        for (const k of ['traceId', 'spanId', 'parentSpanId'])
          if (s[k] !== undefined) s[k] = Buffer.from(s[k]).toString('hex');
  return out;
};

// Sorted keys; an empty list is the same as none (protobuf does not tell them apart).
const canonical = (v) => {
  if (Array.isArray(v)) return v.map(canonical);
  if (v && typeof v === 'object') {
    const out = {};
    for (const k of Object.keys(v).sort()) {
      if (Array.isArray(v[k]) && v[k].length === 0) continue;
      out[k] = canonical(v[k]);
    }
    return out;
  }
  return v;
};

const take = (text) => {
  let body;
  try {
    body = JSON.parse(text);
  } catch (e) {
    problems.push(`a body that is not JSON: ${e.message}`);
    return;
  }
  const shaped = toProtoShape(body);
  const invalid = Request.verify(Request.fromObject(shaped));
  if (invalid) problems.push(`the schema refuses the request: ${invalid}`);
  const decoded = Request.decode(Request.encode(Request.fromObject(shaped)).finish());
  const back = canonical(fromProto(decoded));
  const sent = canonical(body);
  if (JSON.stringify(back) !== JSON.stringify(sent)) {
    problems.push('what protobuf decoded differs from what was sent (a field or value the schema does not take):\n' +
                  `  sent:    ${JSON.stringify(sent).slice(0, 600)}\n  decoded: ${JSON.stringify(back).slice(0, 600)}`);
  }
  for (const rs of decoded.resourceSpans)
    for (const ss of rs.scopeSpans)
      for (const s of ss.spans) {
        spans += 1;
        names.push(s.name);
      }
};

const server = http.createServer((req, res) => {
  let chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    if (req.method !== 'POST' || req.url !== '/v1/traces' || req.headers['content-type'] !== 'application/json')
      problems.push(`${req.method} ${req.url} as ${req.headers['content-type']}`);
    else take(Buffer.concat(chunks).toString('utf8'));
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end('{}');
  });
});

server.listen(0, '127.0.0.1', async () => {
  const endpoint = `http://127.0.0.1:${server.address().port}/v1/traces`;
  const commands = [];
  for (const a of process.argv.slice(2)) {
    if (a === '--') commands.push([]);
    else if (commands.length) commands[commands.length - 1].push(a.split('{endpoint}').join(endpoint));
  }
  for (const [program, ...args] of commands.filter((c) => c.length)) {
    // the receiver answers from this process's event loop: run the program without blocking it
    const status = await new Promise((resolve) => {
      const child = spawn(program, args, { stdio: ['ignore', 'inherit', 'inherit'] });
      const timer = setTimeout(() => child.kill('SIGKILL'), 120000);
      child.on('exit', (code) => {
        clearTimeout(timer);
        resolve(code);
      });
    });
    if (status !== 0) problems.push(`${program} ${args.join(' ')} exited ${status}`);
  }
  server.close();
  console.log(`otlp_proto_check: ${spans} spans decoded by OpenTelemetry's protobuf classes: ${[...new Set(names)].join(', ')}`);
  for (const p of problems) console.log(`PROBLEM: ${p}`);
  if (spans === 0) console.log('PROBLEM: no span arrived');
  process.exit(problems.length === 0 && spans > 0 ? 0 : 1);
});
