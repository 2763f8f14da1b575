// The driver of issue 24's multi-host test and benchmark: the official SDK
// (@langchain/langgraph-sdk, installed in ../sdk by its install.sh) against the lab that lab.sh made
// (read from WORK/lab.env): HAProxy in front of instances a, b, c in network namespaces.
//
//   node driver.mjs single --work WORK            # one instance behind HAProxy: the SDK flow
//   node driver.mjs multi --work WORK [--kills N] # across instances, then the kill loop
//   node driver.mjs kills --work WORK --kills N   # the kill loop alone (bench.sh: takeover times)
//   node driver.mjs load --url URL [--clients 64] [--seconds 10] [--warmup 2]   # runs/s (bench)
//
// The graph (multihost_server): prepare, retrieve, llm (waits; a run's `wait_ms` input sets it),
// tool, review, respond, each appending its name to `log`. Every instance appends a line per node
// start to WORK/trace.log ("µs instance.gen thread node logged"): the driver reads there which
// instance runs a thread and when a killed run made progress again elsewhere.
//
// Exit 0 when every check passed; 1 with each failed check named ("FAIL: ...").
import fs from "node:fs";
import path from "node:path";
import { spawn } from "node:child_process";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const { Client } = await import(
  pathToFileURL(path.join(here, "../sdk/node_modules/@langchain/langgraph-sdk/dist/index.js")).href
);

const NODES = ["prepare", "retrieve", "llm", "tool", "review", "respond"];
const GRAPH = "multihost";

// ---- arguments ---------------------------------------------------------------------------------
const mode = process.argv[2];
const opt = { work: "", kills: "12", url: "", clients: "64", seconds: "10", warmup: "2", out: "" };
for (let i = 3; i < process.argv.length; i++) {
  const k = process.argv[i].replace(/^--/, "");
  if (!(k in opt) || i + 1 >= process.argv.length) usage(`bad argument ${process.argv[i]}`);
  opt[k] = process.argv[++i];
}
function usage(why) {
  console.error(`driver.mjs: ${why}\nusage: driver.mjs single|multi|kills --work WORK [--kills N] | load --url URL [--clients N] [--seconds S]`);
  process.exit(2);
}

// Every wait of the driver is bounded; this bounds the whole run as well (a server that never
// answers a join), so that the calling script always gets to remove the lab.
const limitS = mode === "load" ? Number(opt.seconds) + Number(opt.warmup) + 120 : 180 + Number(opt.kills) * 40;
setTimeout(() => {
  console.error(`FAIL: driver.mjs ${mode} still running after ${limitS} s: stopped`);
  process.exit(1);
}, limitS * 1000).unref();

// ---- checks ------------------------------------------------------------------------------------
const failures = [];
let checks = 0;
class CheckFailed extends Error {}
function check(cond, what, extra) {
  if (cond) {
    checks++;
    return;
  }
  const msg = what + (extra === undefined ? "" : `: ${JSON.stringify(extra)?.slice(0, 500)}`);
  failures.push(msg);
  console.error(`FAIL: ${msg}`);
  throw new CheckFailed(msg);
}
/** Runs part `name`; a failed check (or an error) ends the part, not the test. */
async function part(name, body) {
  const t0 = performance.now();
  const before = failures.length;
  try {
    await body();
  } catch (e) {
    if (!(e instanceof CheckFailed)) {
      failures.push(`${name}: ${e?.stack ?? e}`);
      console.error(`FAIL: ${name}: ${e?.message ?? e}`);
    }
  }
  const ok = failures.length === before;
  console.error(`driver: ${ok ? "ok  " : "FAIL"} ${name} (${((performance.now() - t0) / 1000).toFixed(1)} s)`);
  return ok;
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const rand = (lo, hi) => lo + Math.floor(Math.random() * (hi - lo + 1));
const sameList = (a, b) => Array.isArray(a) && a.length === b.length && a.every((x, i) => x === b[i]);
const repeated = (n) => Array.from({ length: n }, () => NODES).flat();
/** "HTTP 404: ..." of an SDK call, or its result. */
async function attempt(promise) {
  try {
    return { ok: true, value: await promise };
  } catch (e) {
    return { ok: false, status: e?.status, error: String(e?.message ?? e).slice(0, 300) };
  }
}
function quantile(xs, q) {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))];
}

// ---- the lab -----------------------------------------------------------------------------------
function readEnv(work) {
  const env = {};
  for (const line of fs.readFileSync(path.join(work, "lab.env"), "utf8").split("\n")) {
    const m = /^([A-Z_a-z0-9]+)=(.*)$/.exec(line);
    if (!m) continue;
    let v = m[2];
    if (v === "''") v = "";
    env[m[1]] = v.replace(/\\(.)/g, "$1"); // printf %q of plain paths, URLs and words
  }
  return env;
}
const clientOf = (apiUrl) => new Client({ apiUrl, apiKey: null, callerOptions: { maxRetries: 0 } });

let env, lb, names, inst;
function openLab() {
  env = readEnv(opt.work);
  names = env.LAB_NAMES.split(" ").filter(Boolean);
  lb = clientOf(env.LAB_LB_URL);
  inst = Object.fromEntries(names.map((n) => [n, clientOf(`http://${env[`LAB_ADDR_${n}`]}:8123`)]));
}
const pidOf = (name) => {
  try {
    return Number(fs.readFileSync(path.join(opt.work, `${name}.pid`), "utf8").trim()) || 0;
  } catch {
    return 0;
  }
};
const alive = (pid) => {
  try {
    const st = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    return !/^\d+ \(.*\) Z/.test(st); // a zombie (not reaped yet by its shell) is gone
  } catch {
    return false;
  }
};
function labCommand(cmd, name) {
  return new Promise((resolve, reject) => {
    const p = spawn("bash", [path.join(here, "lab.sh"), opt.work, cmd, name], { stdio: ["ignore", "inherit", "inherit"] });
    p.on("exit", (code) => (code === 0 ? resolve() : reject(new Error(`lab.sh ${cmd} ${name} exited ${code}`))));
  });
}
/** The trace lines (node starts) of `thread`, oldest first: {us, inst, host, node, logged}. */
function traceOf(thread) {
  const out = [];
  for (const line of fs.readFileSync(env.LAB_TRACE, "utf8").split("\n")) {
    if (!line.includes(thread)) continue;
    const [us, id, t, node, logged] = line.split(" ");
    if (t === thread) out.push({ us: Number(us), inst: id, host: id.split(".")[0], node, logged: Number(logged) });
  }
  return out;
}
/** The instances serving the API now (their process is alive). */
const liveNames = () => names.filter((n) => alive(pidOf(n)));

/** A run's record from any live instance but `not` (the first that knows it). */
async function runFrom(thread, runId, not = "") {
  let last;
  for (const n of liveNames()) {
    if (n === not) continue;
    last = await attempt(inst[n].runs.get(thread, runId));
    if (last.ok) return { ...last, host: n };
  }
  return last ?? { ok: false, error: "no live instance" };
}

/** Streams run `runId` (joinStream) through `client`; on a dropped stream rejoins through `client`
 * with Last-Event-ID, up to `rejoins` times. Resolves {events, ids, rejoins, error}. */
async function follow(client, thread, runId, { rejoins = 10, stopAfter = Infinity, signal, from } = {}) {
  const events = [];
  let lastId = from;
  let n = 0;
  for (;;) {
    try {
      for await (const ev of client.runs.joinStream(thread, runId, { lastEventId: lastId, streamMode: ["values", "updates"], signal })) {
        events.push(ev);
        if (ev.id !== undefined) lastId = ev.id;
        if (events.length >= stopAfter) return { events, lastId, rejoins: n };
      }
      return { events, lastId, rejoins: n };
    } catch (e) {
      if (signal?.aborted) return { events, lastId, rejoins: n };
      if (++n > rejoins) return { events, lastId, rejoins: n, error: String(e?.message ?? e) };
      await sleep(300);
    }
  }
}
/** Event ids of a stream, as numbers (undefined when the server sends none). */
const idsOf = (events) => events.filter((e) => e.id !== undefined && e.id !== null).map((e) => Number(e.id));
const increasing = (ids) => ids.every((x, i) => i === 0 || x > ids[i - 1]);

/** Checks a finished thread: `runIds` listed once each and success, its log exactly `runIds`
 * times the six nodes, the steps of its checkpoints unique. Returns the history's length. */
async function checkThread(client, thread, runIds, label) {
  const listed = await client.runs.list(thread, { limit: 1000 });
  const byId = new Map();
  for (const r of listed) byId.set(r.run_id, (byId.get(r.run_id) ?? 0) + 1);
  for (const id of runIds) {
    check(byId.get(id) === 1, `${label}: run ${id} is listed once on thread ${thread}`, { listed: byId.get(id) ?? 0 });
    const r = listed.find((x) => x.run_id === id);
    check(r.status === "success", `${label}: run ${id} of thread ${thread} ended success`, { status: r.status });
  }
  const state = await client.threads.getState(thread);
  check(sameList(state.values?.log, repeated(runIds.length)),
    `${label}: thread ${thread}: the log holds each of its ${runIds.length} runs' six nodes once, in order (no step lost or committed twice)`,
    state.values?.log);
  const history = await client.threads.getHistory(thread, { limit: 1000 });
  const steps = history.map((c) => c.metadata?.step);
  check(new Set(steps).size === steps.length, `${label}: thread ${thread}: the steps of its checkpoints are unique`,
    steps.filter((s, i) => steps.indexOf(s) !== i));
  return history.length;
}

// ---- single: one instance behind HAProxy --------------------------------------------------------
async function single() {
  openLab();
  await part("HAProxy routes to the live instance and the graph is served", async () => {
    const seen = new Set();
    for (let i = 0; i < 6; i++) {
      const r = await fetch(`${env.LAB_LB_URL}/ok`);
      check(r.status === 200, "GET /ok through HAProxy", r.status);
      seen.add(r.headers.get("x-multihost-backend"));
    }
    console.error(`driver: HAProxy answered from ${[...seen].join(", ")}`);
    const found = await lb.assistants.search({ graphId: GRAPH });
    check(found.length === 1, "assistants.search finds the multihost graph", found);
  });
  await flowThrough(lb, "through HAProxy");
}

/** The SDK flow on one client: wait, stream, join with Last-Event-ID, cancel, enqueue, history. */
async function flowThrough(c, label) {
  await part(`runs.wait and runs.stream (${label})`, async () => {
    const t = await c.threads.create({ metadata: { test: "multihost" } });
    const out = await c.runs.wait(t.thread_id, GRAPH, { input: { tag: "wait" } });
    check(sameList(out.log, NODES), "runs.wait returns the six nodes' log", out);
    const chunks = [];
    for await (const ch of c.runs.stream(t.thread_id, GRAPH, { input: { tag: "stream" }, streamMode: ["updates", "values"] }))
      chunks.push(ch);
    const updates = chunks.filter((x) => x.event === "updates").map((x) => Object.keys(x.data)[0]);
    check(sameList(updates, NODES), "runs.stream: an updates event per node, in order", updates);
    const values = chunks.filter((x) => x.event === "values").at(-1)?.data;
    check(sameList(values?.log, repeated(2)), "runs.stream: the last values hold both runs", values);
    await checkThread(c, t.thread_id, (await c.runs.list(t.thread_id)).map((r) => r.run_id), label);
  });
  await part(`joinStream with Last-Event-ID, join (${label})`, async () => {
    const t = await c.threads.create();
    const run = await c.runs.create(t.thread_id, GRAPH, { input: { wait_ms: 800 }, streamMode: ["values", "updates"] });
    const first = await follow(c, t.thread_id, run.run_id, { stopAfter: 2 });
    check(first.events.length === 2 && first.lastId !== undefined, "joinStream: two events with ids", first.events);
    const rest = await follow(c, t.thread_id, run.run_id, { from: first.lastId });
    check(!rest.error, "joinStream again with Last-Event-ID ends cleanly", rest.error);
    const ids = [...idsOf(first.events), ...idsOf(rest.events)];
    check(increasing(ids) && Number(ids[2]) === Number(first.lastId) + 1,
      "the rejoined stream goes on after Last-Event-ID: no event twice, none lost", ids);
    const joined = await c.runs.join(t.thread_id, run.run_id);
    check(sameList(joined.log, NODES), "runs.join returns the final values", joined);
  });
  await part(`cancel (${label})`, async () => {
    const t = await c.threads.create();
    const run = await c.runs.create(t.thread_id, GRAPH, { input: { wait_ms: 3000 } });
    await waitFor(() => traceOf(t.thread_id).some((x) => x.node === "llm"), 10_000, "the run reaches llm");
    await c.runs.cancel(t.thread_id, run.run_id, true);
    const r = await c.runs.get(t.thread_id, run.run_id);
    check(r.status === "interrupted", "a cancelled run reads interrupted", r.status);
    await sleep(300);
    check(!traceOf(t.thread_id).some((x) => x.node === "tool"), "a cancelled run runs no further node");
  });
  await part(`enqueue (${label})`, async () => {
    const t = await c.threads.create();
    const ids = [];
    for (let i = 0; i < 3; i++) {
      const r = await c.runs.create(t.thread_id, GRAPH, { input: { wait_ms: i === 0 ? 500 : 50 }, multitaskStrategy: "enqueue" });
      ids.push(r.run_id);
    }
    for (const id of ids) await c.runs.join(t.thread_id, id);
    await checkThread(c, t.thread_id, ids, `enqueue ${label}`);
  });
}
async function waitFor(cond, ms, what) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await cond()) return;
    await sleep(25);
  }
  check(false, `${what} (waited ${ms} ms)`);
}

// ---- multi: across instances, then the kill loop ------------------------------------------------
async function multi() {
  openLab();
  const [A, B, C] = names;
  await part("HAProxy spreads requests over every instance (round robin)", async () => {
    const seen = new Set();
    for (let i = 0; i < 3 * names.length; i++) {
      const r = await fetch(`${env.LAB_LB_URL}/ok`);
      check(r.status === 200, "GET /ok through HAProxy", r.status);
      seen.add(r.headers.get("x-multihost-backend"));
    }
    check(names.every((n) => seen.has(n)), `HAProxy answered from every instance (${names.join(", ")})`, [...seen]);
  });
  await part(`a thread created on ${A} is read on ${B} and ${C}`, async () => {
    const t = await inst[A].threads.create({ metadata: { made_on: A } });
    for (const n of [B, C]) {
      const got = await attempt(inst[n].threads.get(t.thread_id));
      check(got.ok && got.value.metadata?.made_on === A, `thread ${t.thread_id} created on ${A} is ${got.status ?? "read"} on ${n}`, got.error ?? got.value);
    }
  });
  await part(`a run created on ${A} is read, streamed (Last-Event-ID) and joined on ${B} and ${C}`, async () => {
    const t = await inst[A].threads.create();
    const run = await inst[A].runs.create(t.thread_id, GRAPH, { input: { wait_ms: 1500 }, streamMode: ["values", "updates"] });
    const got = await attempt(inst[B].runs.get(t.thread_id, run.run_id));
    check(got.ok, `run ${run.run_id} created on ${A} is ${got.status ?? "?"} on ${B} (GET /threads/${t.thread_id}/runs/${run.run_id})`, got.error);
    const first = await follow(inst[B], t.thread_id, run.run_id, { stopAfter: 2, rejoins: 0 });
    check(first.events.length === 2 && first.lastId !== undefined,
      `joinStream on ${B} of run ${run.run_id} created on ${A} yields events with ids`, first.error ?? first.events);
    const rest = await follow(inst[C], t.thread_id, run.run_id, { rejoins: 0, from: first.lastId });
    const ids = [...idsOf(first.events), ...idsOf(rest.events)];
    check(!rest.error && increasing(ids) && ids[2] === Number(first.lastId) + 1,
      `joinStream on ${C} with Last-Event-ID ${first.lastId} (from ${B}) goes on where ${B} stopped`, rest.error ?? ids);
    const joined = await attempt(inst[C].runs.join(t.thread_id, run.run_id));
    check(joined.ok && sameList(joined.value.log, NODES), `runs.join on ${C} of run ${run.run_id} created on ${A}`, joined.error ?? joined.value);
  });
  await part(`a run created on ${A} is cancelled on ${B} and reads interrupted on ${C}`, async () => {
    const t = await inst[A].threads.create();
    const run = await inst[A].runs.create(t.thread_id, GRAPH, { input: { wait_ms: 3000 } });
    await waitFor(() => traceOf(t.thread_id).some((x) => x.node === "llm"), 10_000, `run ${run.run_id} reaches llm`);
    const cancelled = await attempt(inst[B].runs.cancel(t.thread_id, run.run_id, true));
    check(cancelled.ok, `POST .../runs/${run.run_id}/cancel?wait=1 on ${B} (created on ${A})`, cancelled.error);
    const r = await attempt(inst[C].runs.get(t.thread_id, run.run_id));
    check(r.ok && r.value.status === "interrupted", `run ${run.run_id} cancelled on ${B} reads interrupted on ${C}`, r.error ?? r.value.status);
    await sleep(300);
    check(!traceOf(t.thread_id).some((x) => x.node === "tool"), `run ${run.run_id} cancelled on ${B} runs no further node`, traceOf(t.thread_id));
  });
  await part(`runs enqueued on ${A}, ${B} and ${C} on one thread run one after another`, async () => {
    const t = await inst[A].threads.create();
    const ids = [];
    for (const n of [A, B, C]) {
      const r = await attempt(inst[n].runs.create(t.thread_id, GRAPH, { input: { wait_ms: n === A ? 600 : 50 }, multitaskStrategy: "enqueue" }));
      check(r.ok, `runs.create (enqueue) on ${n} on thread ${t.thread_id} made on ${A}`, r.error);
      ids.push(r.value.run_id);
    }
    for (const id of ids) {
      const j = await attempt(inst[C].runs.join(t.thread_id, id));
      check(j.ok, `runs.join on ${C} of enqueued run ${id}`, j.error);
    }
    await checkThread(inst[B], t.thread_id, ids, "enqueue across instances");
  });
  await part(`runs.wait on ${B} on a thread made on ${C}`, async () => {
    const t = await inst[C].threads.create();
    const out = await attempt(inst[B].runs.wait(t.thread_id, GRAPH, { input: {} }));
    check(out.ok && sameList(out.value.log, NODES), `runs.wait on ${B}, thread ${t.thread_id} made on ${C}`, out.error ?? out.value);
  });
  await part("24 threads through HAProxy, each a run waited for, spread over the instances", async () => {
    const threads = await Promise.all(Array.from({ length: 24 }, () => lb.threads.create()));
    const outs = await Promise.all(threads.map((t) => attempt(lb.runs.wait(t.thread_id, GRAPH, { input: { wait_ms: 200 } }))));
    const bad = outs.filter((o) => !o.ok || !sameList(o.value.log, NODES));
    check(bad.length === 0, `every run.wait through HAProxy returns the six nodes (${bad.length} of 24 did not)`, bad[0]);
    const hosts = new Set(threads.flatMap((t) => traceOf(t.thread_id).map((x) => x.host)));
    check(hosts.size >= Math.min(2, names.length), "the runs ran on more than one instance", [...hosts]);
  });
  await killLoop(Number(opt.kills));
}

// ---- the kill loop ------------------------------------------------------------------------------
const lease = () => Number(env.LAB_LEASE_MS || 2000);
async function killLoop(kills) {
  const threads = []; // {id, runs: [run ids]}
  const takeovers = [];
  let endedAtKill = 0; // kills after the thread's last node: nothing left to take over
  const streams = [];
  let reexecuted = 0;
  let done = 0;
  await part(`kill loop: ${kills} SIGKILLs of the instance running a run, each restarted`, async () => {
    for (let i = 0; i < kills; i++) {
      // Three threads, each made on a live instance picked at random, each a run and a queued
      // run (enqueue); which instance runs them is the servers' choice.
      const batch = [];
      for (let k = 0; k < 3; k++) {
        const live = liveNames();
        const on = live[rand(0, live.length - 1)];
        const t = await inst[on].threads.create({ metadata: { kill_loop: i } });
        const waitMs = rand(400, 1600);
        const r1 = await inst[on].runs.create(t.thread_id, GRAPH, { input: { wait_ms: waitMs, tag: `k${i}` }, streamMode: ["values", "updates"] });
        const r2 = await inst[on].runs.create(t.thread_id, GRAPH, { input: { wait_ms: rand(50, 400) }, multitaskStrategy: "enqueue" });
        const rec = { id: t.thread_id, runs: [r1.run_id, r2.run_id], waitMs, madeOn: on };
        threads.push(rec);
        batch.push(rec);
      }
      const target = batch[0];
      // The target run streamed through HAProxy all along: rejoined (Last-Event-ID) when its
      // instance dies.
      streams.push({ thread: target.id, run: target.runs[0],
                     p: follow(lb, target.id, target.runs[0], { rejoins: 20, signal: AbortSignal.timeout(60_000 + 8 * lease()) }) });
      await waitFor(() => traceOf(target.id).length > 0, 15_000, `kill ${i}: run ${target.runs[0]} starts on some instance`);
      await sleep(rand(0, target.waitMs + 100));
      const last = traceOf(target.id).at(-1);
      const victim = last.host;
      const pid = pidOf(victim);
      check(pid && alive(pid), `kill ${i}: instance ${victim} (running thread ${target.id}) is alive`, pid);
      const tKill = Date.now();
      process.kill(pid, "SIGKILL");
      // The run's next progress on another process: a node start by another instance.
      const bound = 4 * lease() + 15_000;
      let next;
      while (Date.now() - tKill < bound) {
        next = traceOf(target.id).find((x) => x.us > tKill * 1000 && x.inst !== last.inst);
        if (next) break;
        await sleep(20);
      }
      if (!next) {
        // No node started elsewhere: right, when the killed instance had run every node of the
        // thread's runs before it died (the taker-over then only records the end). Each run then
        // reads success; anything else is a run left behind.
        const seen = [];
        for (const id of target.runs) seen.push(await runFrom(target.id, id, victim));
        if (seen.every((x) => x.ok && x.value.status === "success")) endedAtKill++;
        else
          check(false, `kill ${i}: thread ${target.id}, run ${target.runs[0]} (created on ${target.madeOn}, running ${last.node} on ${victim}) made no progress on another instance within ${bound} ms of SIGKILL of ${victim}; another instance says: ${seen.map((x) => (x.ok ? `status ${x.value.status}` : `${x.status ?? ""} ${x.error}`)).join(", ")}`);
      } else {
        takeovers.push({ ms: next.us / 1000 - tKill, from: victim, to: next.host, node: next.node, killedIn: last.node });
      }
      await labCommand("start", victim);
      done++;
    }
    // Every run of every thread ends, exactly once, each a success.
    const deadline = Date.now() + 8 * lease() + 60_000;
    for (const t of threads) {
      for (const id of t.runs) {
        for (;;) {
          const r = await runFrom(t.id, id);
          if (r.ok && !["pending", "running"].includes(r.value.status)) break;
          check(Date.now() < deadline, `run ${id} of thread ${t.id} ends (status ${r.ok ? r.value.status : r.error})`);
          await sleep(100);
        }
      }
      await checkThread(lb, t.id, t.runs, "kill loop");
      const starts = traceOf(t.id).length;
      reexecuted += starts - NODES.length * t.runs.length;
    }
    for (const s of streams) {
      const res = await s.p;
      const ids = idsOf(res.events);
      const values = res.events.filter((e) => e.event === "values").at(-1)?.data;
      check(!res.error && increasing(ids) && sameList(values?.log, NODES),
        `the stream of run ${s.run} (through HAProxy, rejoined ${res.rejoins} times with Last-Event-ID) ends with the run's six nodes, no event twice`,
        res.error ?? { ids, log: values?.log });
    }
  });
  const ms = takeovers.map((t) => t.ms);
  const summary = {
    kills: done,
    ended_at_kill: endedAtKill,
    threads: threads.length,
    runs: threads.reduce((n, t) => n + t.runs.length, 0),
    takeover_ms: { p50: quantile(ms, 0.5), p99: quantile(ms, 0.99), max: ms.length ? Math.max(...ms) : null },
    reexecuted_nodes: reexecuted,
    lease_ms: lease(),
  };
  console.error(`driver: kill loop: ${JSON.stringify(summary)}`);
  fs.writeFileSync(path.join(opt.work, "killloop.json"), JSON.stringify({ ...summary, takeovers }) + "\n");
}

// ---- load: runs/s with N clients ----------------------------------------------------------------
async function load() {
  const c = clientOf(opt.url);
  const clients = Number(opt.clients);
  let count = 0, errors = 0, firstError = "";
  let measuring = false, stop = false;
  const lat = [];
  const worker = async () => {
    while (!stop) {
      const t0 = performance.now();
      try {
        const out = await c.runs.wait(null, GRAPH, { input: {} }); // stateless: a thread of its own
        if (!sameList(out?.log, NODES)) throw new Error(`wrong log ${JSON.stringify(out).slice(0, 200)}`);
        if (measuring) { count++; lat.push(performance.now() - t0); }
      } catch (e) {
        errors++;
        firstError ||= String(e?.message ?? e);
        await sleep(50);
      }
    }
  };
  const ws = Array.from({ length: clients }, worker);
  await sleep(Number(opt.warmup) * 1000);
  measuring = true;
  const t0 = performance.now();
  await sleep(Number(opt.seconds) * 1000);
  measuring = false;
  const secs = (performance.now() - t0) / 1000;
  stop = true;
  await Promise.all(ws);
  const row = { runs_per_s: count / secs, runs: count, seconds: secs, clients, errors, first_error: firstError,
                latency_ms: { p50: quantile(lat, 0.5), p99: quantile(lat, 0.99) } };
  console.log(JSON.stringify(row));
  if (errors > 0 && count === 0) process.exit(1);
}

// ---- main --------------------------------------------------------------------------------------
if (mode === "single") await single();
else if (mode === "multi") await multi();
else if (mode === "kills") { openLab(); await killLoop(Number(opt.kills)); }
else if (mode === "load") { await load(); process.exit(0); }
else usage(`unknown mode ${mode}`);
console.error(`driver: ${mode}: ${checks} checks passed, ${failures.length} failed`);
for (const f of failures) console.error(`  - ${f}`);
process.exit(failures.length ? 1 : 0);
