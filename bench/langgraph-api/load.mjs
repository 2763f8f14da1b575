// The load driver of the server rows: the same requests against stategraph_bench_server and the
// LangGraph JS server (server.mjs), both serving the benchmark supervisor graph on loopback.
//
//   load.mjs --64 clients, HTTP/1.1 keep-alive--> POST /runs/wait     (stateless, complex turn)
//            --1 client, one after another------> POST /runs/stream   (time to the first SSE event)
//
//   node load.mjs --url http://127.0.0.1:PORT --side cpp|langgraphjs [--seconds 10] [--clients 64]
//                 [--streams 200] [--stream-seconds 5]
//                 [--warmup-seconds 2] [--checkpointer memory] [--smoke]
// Prints one JSON line in the shape of the other bench rows (scenario "server", checkpointer
// as --checkpointer says: what the server behind the URL stores its checkpoints in). Every reply
// is checked (21 nodes ran, the complex turn's answer); a wrong answer or an HTTP error fails the
// run.
import http from "node:http";
import { createRequire } from "node:module";
import "./hook.mjs";

const { COMPLEX_MESSAGE } = await import("../langgraphjs/lib/supervisor.mjs");

const a = { url: "", side: "", seconds: "10", clients: "64", streams: "200", "stream-seconds": "5", "warmup-seconds": "2", checkpointer: "memory", smoke: false };
for (let i = 2; i < process.argv.length; i++) {
  const k = process.argv[i].replace(/^--/, "");
  if (k === "smoke") a.smoke = true;
  else if (k in a && i + 1 < process.argv.length) a[k] = process.argv[++i];
  else fail(`bad argument ${process.argv[i]}`);
}
if (!a.url || !a.side) fail("--url and --side are required");
if (a.smoke) Object.assign(a, { seconds: "1", streams: "10", "stream-seconds": "1", "warmup-seconds": "0.3" });
const clients = Number(a.clients);
const target = new URL(a.url);
const agent = new http.Agent({ keepAlive: true, maxSockets: clients });

function fail(why) {
  console.error(`load.mjs: ${why}`);
  process.exit(1);
}

let seq = 0;
const body = (extra = {}) => {
  const thread = `load-${process.pid}-${++seq}`;
  return JSON.stringify({
    assistant_id: "supervisor",
    input: { user_message: COMPLEX_MESSAGE, chat_id: thread, user_id: "u1", hitl_resume_type: "none" },
    config: { recursion_limit: 100 },
    ...extra,
  });
};

/** POST `path`; `onData(chunk, t)` sees every chunk; resolves with status and the whole text.
 * A kept-alive socket the server closed as the request went out (ECONNRESET before any reply on a
 * reused socket, the race Node's documentation describes for `req.reusedSocket`) is retried once. */
function post(path, data, onData, retried = false) {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: target.hostname, port: target.port, path, method: "POST", agent,
        headers: { "content-type": "application/json", "content-length": Buffer.byteLength(data) } },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (c) => {
          if (onData) onData(c, performance.now());
          text += c;
        });
        res.on("end", () => resolve({ status: res.statusCode, text }));
        res.on("error", reject);
      },
    );
    req.on("error", (e) => {
      if (!retried && req.reusedSocket && e.code === "ECONNRESET") resolve(post(path, data, onData, true));
      else reject(e);
    });
    req.end(data);
  });
}

function checkValues(v, what) {
  if (!v || !Array.isArray(v.trace) || v.trace.length !== 21 || v.ui_response !== "synthesized 3 agent results")
    fail(`${a.side}: ${what}: not the complex turn's result: ${JSON.stringify(v).slice(0, 300)}`);
}

async function waitOnce() {
  const r = await post("/runs/wait", body());
  if (r.status !== 200) fail(`${a.side}: POST /runs/wait -> ${r.status}: ${r.text.slice(0, 300)}`);
  checkValues(JSON.parse(r.text), "/runs/wait");
}

/** `clients` loops of /runs/wait for `seconds`; latencies in ms of the runs that finished in time. */
async function closedLoop(seconds) {
  const lat = [];
  const end = performance.now() + seconds * 1000;
  const loop = async () => {
    while (performance.now() < end) {
      const t0 = performance.now();
      await waitOnce();
      lat.push(performance.now() - t0);
    }
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: clients }, loop));
  return { lat, elapsed: (performance.now() - t0) / 1000 };
}

/** One /runs/stream: ms to the first complete SSE event, and to the end of the stream. */
async function streamOnce() {
  let first = null, buf = "";
  const t0 = performance.now();
  const r = await post("/runs/stream", body({ stream_mode: ["values"] }), (c, t) => {
    if (first == null && (buf += c).includes("\n\n")) first = t - t0;
  });
  const total = performance.now() - t0;
  if (r.status !== 200) fail(`${a.side}: POST /runs/stream -> ${r.status}: ${r.text.slice(0, 300)}`);
  const events = r.text.split(/\r?\n\r?\n/).filter((e) => e.trim());
  const ev = (e) => /^event: ?(.*)$/m.exec(e)?.[1];
  if (ev(events[0]) !== "metadata") fail(`${a.side}: the stream's first event is ${ev(events[0])}, not metadata`);
  const last = events.filter((e) => ev(e) === "values").pop();
  if (!last) fail(`${a.side}: the stream has no values event`);
  const data = [...last.matchAll(/^data: ?(.*)$/gm)].map((x) => x[1]).join("\n");
  checkValues(JSON.parse(data), "/runs/stream");
  return { first, total };
}

const pct = (xs, p) => {
  const s = [...xs].sort((x, y) => x - y);
  return s.length ? s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] : null;
};
const r3 = (x) => (x == null ? null : Math.round(x * 1000) / 1000);

const info = await new Promise((resolve) =>
  http.get({ host: target.hostname, port: target.port, path: "/info", agent }, (res) => {
    let t = "";
    res.on("data", (c) => (t += c)).on("end", () => resolve(res.statusCode === 200 ? JSON.parse(t) : {}));
  }).on("error", () => resolve({})),
);
if (Number(a["warmup-seconds"]) > 0) await closedLoop(Number(a["warmup-seconds"]));
const { lat, elapsed } = await closedLoop(Number(a.seconds));
const firsts = [], totals = [];
// At most --streams streams and --stream-seconds (at least 10 streams).
const streamEnd = performance.now() + Number(a["stream-seconds"]) * 1000;
for (let i = 0; i < Number(a.streams) && (i < 10 || performance.now() < streamEnd); i++) {
  const s = await streamOnce();
  firsts.push(s.first);
  totals.push(s.total);
}
const m = (metric, unit, xs) => ({ metric, unit, median: r3(pct(xs, 50)), p90: r3(pct(xs, 90)), p99: r3(pct(xs, 99)), n: xs.length });
const rate = lat.length / elapsed;
const require = createRequire(import.meta.url);
console.log(JSON.stringify({
  scenario: "server",
  checkpointer: a.checkpointer,
  side: a.side,
  metrics: [
    { metric: "runs_wait_per_s_64_clients", unit: "1/s", median: r3(rate), n: lat.length },
    m("runs_wait_ms_p50", "ms", lat),
    { ...m("runs_wait_ms_p99", "ms", lat), median: r3(pct(lat, 99)) },
    m("first_sse_event_ms", "ms", firsts),
    { ...m("first_sse_event_ms_p99", "ms", firsts), median: r3(pct(firsts, 99)) },
    m("stream_run_ms", "ms", totals),
  ],
  config: { clients, seconds: Number(a.seconds), elapsed_s: r3(elapsed), streams: firsts.length, url: a.url },
  versions: a.side === "cpp"
    ? { stategraph_bench_server: info.version ?? "?", "driver node": process.versions.node }
    : { node: process.versions.node, "@langchain/langgraph-api": require("@langchain/langgraph-api/package.json").version,
        "@langchain/langgraph": (info.langgraph_js_version ?? require("@langchain/langgraph/package.json").version) },
}));
agent.destroy();
