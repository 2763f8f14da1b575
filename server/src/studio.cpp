// The studio page (GET /studio): plain HTML, CSS and JavaScript embedded here (no build step, no
// CDN), using only the server's own API from the browser; and Graphviz `dot -Tsvg` run as a child
// process for GET /assistants/{id}/graph?format=svg.
//
//   browser ── GET /studio, /studio/app.js, /studio/app.css ──────────────► these strings
//           ── /assistants/search, /assistants/{id}/graph?format=svg ──────► render_svg (dot)
//           ── /threads/search, /threads/{id}, /state, /history ──────────► the server's routes
//           ── POST /threads/{id}/runs/stream (input | command.resume | checkpoint_id), read with
//              fetch as it comes; GET /threads/{id}/runs/{run}/stream joins a running one
//           ── POST /threads/{id}/state {values, checkpoint_id}: a fork from a checkpoint

#include "studio.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace stategraph::server::studio {

namespace {

// clang-format off
constexpr std::string_view index_html = R"STUDIO(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>stategraph studio</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/studio/app.css">
</head>
<body>
<header>
  <h1>stategraph studio</h1>
  <label>Assistant <select id="assistant"></select></label>
  <label>API key <input id="api-key" type="password" placeholder="(none)" autocomplete="off"></label>
  <div id="error" role="alert" hidden></div>
</header>
<main>
  <section id="threads-panel">
    <h2>Threads</h2>
    <div class="buttons"><button id="new-thread" type="button">New thread</button>
      <button id="refresh" type="button">Refresh</button></div>
    <ul id="threads"></ul>
  </section>
  <section id="graph-panel">
    <h2>Graph <label class="small"><input type="checkbox" id="overlay" checked> draw the selected thread on it</label></h2>
    <div id="graph-caption"></div>
    <div id="graph" data-state="empty"></div>
  </section>
  <section id="thread-panel">
    <h2>Thread <code id="thread-id">none selected</code> <span id="thread-status" class="status"></span></h2>
    <form id="run-form">
      <label for="run-input">Input (JSON: the graph's input schema, else the state's fields)</label>
      <textarea id="run-input" rows="3">{"user_message": "Hi there!"}</textarea>
      <button id="run-start" type="submit">Run</button>
    </form>
    <div id="interrupts"></div>
    <h3>Live stream <span id="stream-status" data-state="idle"></span></h3>
    <ol id="stream-log"></ol>
    <details id="values-box" open><summary>State values</summary><pre id="thread-values"></pre></details>
  </section>
  <section id="timeline-panel">
    <h2>History <span class="small">(oldest first; click a checkpoint to draw it and fork from it)</span></h2>
    <ol id="timeline"></ol>
    <form id="fork" hidden>
      <h3>Fork from checkpoint <code id="fork-checkpoint"></code></h3>
      <label for="fork-values">State at the checkpoint (edit fields; only changed fields are sent)</label>
      <textarea id="fork-values" rows="10"></textarea>
      <label>as node <select id="fork-as-node"></select></label>
      <div class="buttons"><button type="button" id="fork-update">Update state here (new branch)</button>
        <button type="button" id="fork-run">Run from here</button></div>
    </form>
  </section>
</main>
<script src="/studio/app.js"></script>
</body>
</html>
)STUDIO";

constexpr std::string_view app_css = R"STUDIO(
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.4 system-ui, sans-serif; color: #1d2430; background: #f4f6f9; }
header { display: flex; gap: 1.5em; align-items: center; padding: .5em 1em; background: #1d2430; color: #fff; flex-wrap: wrap; }
header h1 { font-size: 18px; margin: 0; }
#error { background: #b3261e; color: #fff; padding: .3em .7em; border-radius: 4px; white-space: pre-wrap; }
main { display: grid; grid-template-columns: 230px minmax(0, 1fr) 430px; grid-template-areas: "threads graph thread" "threads timeline thread"; gap: 10px; padding: 10px; }
section { background: #fff; border: 1px solid #d5dae1; border-radius: 6px; padding: 8px 10px; min-width: 0; }
#threads-panel { grid-area: threads; } #graph-panel { grid-area: graph; } #thread-panel { grid-area: thread; } #timeline-panel { grid-area: timeline; }
h2 { font-size: 15px; margin: 0 0 6px; } h3 { font-size: 14px; margin: 10px 0 4px; }
.small { font-size: 12px; font-weight: normal; color: #5a6473; }
ul, ol { padding-left: 0; list-style: none; margin: 0; }
#threads li { padding: 4px 6px; border-radius: 4px; cursor: pointer; display: flex; gap: 6px; align-items: center; }
#threads li:hover, #timeline li.checkpoint:hover { background: #eef2f8; }
#threads li.selected, #timeline li.selected { background: #dbe7fb; }
.status { font-size: 12px; padding: 0 6px; border-radius: 8px; background: #e1e5eb; }
.status-idle { background: #d4f0da; } .status-busy { background: #fff0c2; } .status-interrupted { background: #ffd9b8; } .status-error { background: #f8c9c5; }
#graph { overflow: auto; max-height: 62vh; text-align: center; }
#graph svg { max-width: 100%; height: auto; }
.graph-missing { color: #8a4b00; background: #fff4e0; padding: 8px; border-radius: 4px; text-align: left; }
textarea, input[type=text], input.resume-value { width: 100%; font: 12px/1.3 ui-monospace, monospace; }
button { cursor: pointer; }
.buttons { display: flex; gap: 6px; margin: 4px 0; flex-wrap: wrap; }
#interrupts form { border: 2px solid #e07b00; border-radius: 6px; padding: 6px 8px; margin: 8px 0; background: #fff8ef; }
.question { font-weight: bold; margin: 0 0 4px; }
.options { display: flex; gap: 4px; flex-wrap: wrap; margin-bottom: 4px; }
#stream-log { max-height: 180px; overflow: auto; font: 12px/1.35 ui-monospace, monospace; }
#stream-log li { border-bottom: 1px dotted #d5dae1; padding: 1px 0; overflow-wrap: anywhere; }
.event-error { color: #b3261e; }
#stream-status[data-state=running] { color: #946200; } #stream-status[data-state=ended] { color: #1e7b34; } #stream-status[data-state=failed] { color: #b3261e; }
#thread-values { max-height: 260px; overflow: auto; font-size: 11px; background: #f7f8fa; padding: 4px; }
#timeline { max-height: 40vh; overflow: auto; }
#timeline li.checkpoint { border-left: 3px solid #7a8aa3; padding: 3px 8px; margin: 3px 0; cursor: pointer; }
#timeline li.has-interrupt { border-left-color: #e07b00; }
.changes { font: 12px/1.3 ui-monospace, monospace; padding-left: 10px; }
.changes .old { color: #8b1a1a; text-decoration: line-through; } .changes .new { color: #1e6b2f; }
.writers { color: #2a4f8f; } .next { color: #5a6473; } .nochange { color: #8a93a0; font-size: 12px; }
.badge { background: #ffd9b8; border-radius: 8px; padding: 0 6px; font-size: 12px; }
.badge.branch { background: #e3d9fb; }
)STUDIO";

constexpr std::string_view app_js = R"STUDIO("use strict";
// stategraph studio: every call goes to this server's LangGraph API (no other origin, no build).
const $ = (sel) => document.querySelector(sel);
const S = { assistant: null, thread: null, checkpoint: null, history: [], key: sessionStorage.getItem("stategraph-key") || "", graphSeq: 0 };

function showError(e) { const box = $("#error"); box.textContent = String((e && e.message) || e); box.hidden = false; }
function clearError() { $("#error").hidden = true; }
function headers(json) {
  const h = {};
  if (json) h["content-type"] = "application/json";
  if (S.key) h["x-api-key"] = S.key;
  return h;
}
function detailOf(text) { try { return JSON.parse(text).detail || text; } catch (_) { return text; } }
async function api(method, path, body) {
  const r = await fetch(path, { method, headers: headers(body !== undefined), body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${detailOf(text)}`);
  return text ? JSON.parse(text) : null;
}
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const k of kids) if (k !== null && k !== undefined) e.append(k);
  return e;
}
function short(v, n) {
  const s = typeof v === "string" ? v : JSON.stringify(v);
  if (s === undefined) return "(none)";
  return s.length > n ? s.slice(0, n - 1) + "\u2026" : s;
}

// -- assistants and the graph --------------------------------------------------------------
async function loadAssistants() {
  const list = await api("POST", "/assistants/search", { limit: 100 });
  if (!list.length) throw new Error("this server serves no assistant");
  $("#assistant").replaceChildren(...list.map((a) => el("option", { value: a.assistant_id }, a.graph_id)));
  await chooseAssistant(list[0].assistant_id);
}
async function chooseAssistant(id) {
  S.assistant = await api("GET", `/assistants/${encodeURIComponent(id)}`);
  S.thread = null; S.checkpoint = null;
  const shape = await api("GET", `/assistants/${encodeURIComponent(id)}/graph`);
  const nodes = shape.nodes.map((n) => n.id).filter((n) => !n.startsWith("__"));
  $("#fork-as-node").replaceChildren(el("option", { value: "" }, "(as the checkpoint was made)"), ...nodes.map((n) => el("option", { value: n }, n)));
  await Promise.all([loadThreads(), drawGraph()]);
}
async function drawGraph() {
  if (!S.assistant) return;
  const seq = ++S.graphSeq;
  const aid = encodeURIComponent(S.assistant.assistant_id);
  let query = "format=svg", caption = "";
  const t = S.thread;
  if ($("#overlay").checked && t && t.values) {
    query += `&thread_id=${t.thread_id}`;
    if (S.checkpoint) query += `&checkpoint_id=${encodeURIComponent(S.checkpoint)}`;
    caption = `path of thread ${t.thread_id}` + (S.checkpoint ? ` up to checkpoint ${S.checkpoint}` : " (latest)");
  }
  const r = await fetch(`/assistants/${aid}/graph?${query}`, { headers: headers(false) });
  const text = await r.text();
  if (seq !== S.graphSeq) return; // a newer drawing was asked for meanwhile
  const box = $("#graph");
  $("#graph-caption").textContent = caption;
  if (!r.ok) {
    box.replaceChildren(el("p", { class: "graph-missing" }, `The graph cannot be drawn as SVG here (${r.status}): ${detailOf(text)} `,
      el("a", { href: `/assistants/${aid}/graph?format=dot`, target: "_blank" }, "the DOT source")));
    box.dataset.state = "missing";
    return;
  }
  box.innerHTML = text.slice(Math.max(0, text.indexOf("<svg")));
  box.dataset.state = "drawn";
  // Bring the thread's next node (where it waits) into view.
  const shown = S.checkpoint ? S.history.find((x) => x.checkpoint.checkpoint_id === S.checkpoint) : S.history[S.history.length - 1];
  const next = caption && shown ? shown.next : [];
  const node = [...box.querySelectorAll("g.node")].find((g) => next.includes((g.querySelector("title") || {}).textContent));
  if (node) {
    const r1 = node.getBoundingClientRect(), r0 = box.getBoundingClientRect();
    box.scrollTop += r1.top - r0.top - box.clientHeight / 2;
  }
}

// -- threads -------------------------------------------------------------------------------
async function loadThreads() {
  if (!S.assistant) return;
  const list = await api("POST", "/threads/search", { limit: 50, sort_by: "updated_at", metadata: { graph_id: S.assistant.graph_id } });
  const ul = $("#threads");
  ul.replaceChildren(...list.map((t) => el("li", {
      class: "thread" + (S.thread && S.thread.thread_id === t.thread_id ? " selected" : ""), "data-thread": t.thread_id,
      "data-status": t.status, title: t.thread_id, onclick: () => selectThread(t.thread_id).catch(showError) },
    el("code", {}, t.thread_id.slice(0, 8)), el("span", { class: `status status-${t.status}` }, t.status),
    el("small", {}, (t.updated_at || "").slice(11, 19)))));
  if (!list.length) ul.append(el("li", { class: "empty" }, "no thread yet"));
}
async function newThread() {
  const t = await api("POST", "/threads", { metadata: { graph_id: S.assistant.graph_id } });
  await selectThread(t.thread_id);
}
async function selectThread(id) {
  clearError();
  S.thread = await api("GET", `/threads/${id}`);
  S.checkpoint = null;
  S.history = [];
  $("#fork").hidden = true;
  $("#stream-log").replaceChildren();
  $("#stream-status").textContent = "";
  await refreshThread();
  if (S.thread.status === "busy") joinRunning().catch(showError);
}
// body[data-pending]: how many refreshes and streams are under way (0: the page is settled).
async function tracked(work) {
  const body = document.body;
  body.dataset.pending = String(Number(body.dataset.pending || 0) + 1);
  try { return await work(); } finally { body.dataset.pending = String(Number(body.dataset.pending) - 1); }
}
function refreshThread() { return tracked(refreshThreadNow); }
async function refreshThreadNow() {
  if (!S.thread) return;
  const id = S.thread.thread_id;
  S.thread = await api("GET", `/threads/${id}`);
  $("#thread-id").textContent = id;
  const st = $("#thread-status");
  st.textContent = S.thread.status;
  st.className = `status status-${S.thread.status}`;
  $("#thread-values").textContent = JSON.stringify(S.thread.values, null, 2);
  // A thread that never ran has no checkpoint, so nothing can wait on it.
  const state = S.thread.values ? await api("GET", `/threads/${id}/state`) : { interrupts: [] };
  drawInterrupts(state.interrupts || []);
  await loadHistory(); // first: the drawing scrolls to the node the newest checkpoint waits at
  await Promise.all([drawGraph(), loadThreads()]);
}

// -- pending interrupts: a form per interrupt, answered with command.resume -------------------
function parseAnswer(text) {
  const t = text.trim();
  if (/^[\[{"]/.test(t)) { try { return JSON.parse(t); } catch (_) { /* plain text */ } }
  return text;
}
function drawInterrupts(list) {
  const box = $("#interrupts");
  box.replaceChildren();
  if (!list.length) return;
  box.append(el("h3", {}, `Waiting for an answer (${list.length})`));
  for (const it of list) {
    const v = it.value;
    const question = v && typeof v === "object" && typeof v.question === "string" ? v.question : short(v, 400);
    const input = el("input", { class: "resume-value", name: "resume", required: "", placeholder: "the answer (text, or JSON)" });
    const options = v && typeof v === "object" && Array.isArray(v.options) ? v.options : [];
    const form = el("form", { class: "resume-form", "data-interrupt": it.id },
      el("p", { class: "question" }, question),
      options.length ? el("div", { class: "options" }, ...options.map((o) => el("button", { type: "button", class: "resume-option",
        onclick: () => { input.value = typeof o === "string" ? o : JSON.stringify(o); } }, short(o, 60)))) : null,
      input, el("button", { type: "submit", class: "resume-submit" }, "Resume"));
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const value = parseAnswer(input.value);
      const resume = list.length > 1 ? { [it.id]: value } : value;
      runStream({ command: { resume } }).catch(showError);
    });
    box.append(form);
  }
}

// -- runs, streamed as they happen ----------------------------------------------------------
async function runStream(extra) {
  if (!S.thread) throw new Error("select a thread first (or make one with New thread)");
  clearError();
  const body = Object.assign({ assistant_id: S.assistant.assistant_id, stream_mode: ["values", "updates"] }, extra);
  const pending = fetch(`/threads/${S.thread.thread_id}/runs/stream`, { method: "POST", headers: headers(true), body: JSON.stringify(body) });
  await consume(pending, "run");
}
async function joinRunning() {
  const runs = await api("GET", `/threads/${S.thread.thread_id}/runs?limit=10`);
  const r = runs.find((x) => x.status === "running" || x.status === "pending");
  if (!r) return;
  await consume(fetch(`/threads/${S.thread.thread_id}/runs/${r.run_id}/stream`, { headers: headers(false) }), `run ${r.run_id.slice(0, 8)} (joined)`);
}
function parseEvent(block) {
  let event = "message", data = "";
  for (const line of block.split("\n")) {
    if (line.startsWith("event: ")) event = line.slice(7);
    else if (line.startsWith("data: ")) data += line.slice(6);
  }
  if (!data) return null;
  try { return { event, data: JSON.parse(data) }; } catch (_) { return { event, data }; }
}
function showEvent(ev) {
  const kind = ev.event.split("|")[0];
  let what;
  if (kind === "metadata") {
    what = `run ${ev.data.run_id}`;
    const st = $("#thread-status"); st.textContent = "busy"; st.className = "status status-busy";
  } else if (kind === "updates") {
    what = Object.keys(ev.data).map((k) => k === "__interrupt__"
      ? "interrupt: " + short(ev.data[k].map((i) => (i.value && i.value.question) || i.value), 160) : k).join(", ");
  } else if (kind === "values") what = "state: " + Object.keys(ev.data).join(", ");
  else what = short(ev.data, 300);
  $("#stream-log").append(el("li", { class: `event event-${kind}` }, el("b", {}, ev.event), " ", what));
}
function consume(pending, label) { return tracked(() => consumeNow(pending, label)); }
async function consumeNow(pending, label) {
  const status = $("#stream-status");
  $("#stream-log").replaceChildren();
  status.textContent = `${label}: connecting`;
  status.dataset.state = "running";
  const mine = S.thread.thread_id;
  try {
    const r = await pending;
    if (!r.ok) throw new Error(`${r.status} ${detailOf(await r.text())}`);
    status.textContent = `${label}: streaming`;
    const reader = r.body.getReader();
    const dec = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true }).replace(/\r\n/g, "\n");
      let i;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        const ev = parseEvent(buf.slice(0, i));
        buf = buf.slice(i + 2);
        if (ev) showEvent(ev);
      }
    }
    status.textContent = `${label}: ended`;
    status.dataset.state = "ended";
  } catch (e) {
    status.textContent = `${label}: failed`;
    status.dataset.state = "failed";
    throw e;
  } finally {
    if (S.thread && S.thread.thread_id === mine) await refreshThread();
  }
}

// -- history: a timeline of checkpoints with the state change at each -------------------------
const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
// The fields that differ from `a` to `b`; with `deep`, inside objects down to the changed leaves
// ("response.reply"), so that a checkpoint shows what its node really changed.
function diffValues(a, b, deep, prefix) {
  const out = [];
  a = a || {}; b = b || {};
  for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) {
    if (JSON.stringify(a[k]) === JSON.stringify(b[k])) continue;
    const key = (prefix || "") + k;
    if (deep && isObject(a[k]) && isObject(b[k])) out.push(...diffValues(a[k], b[k], deep, key + "."));
    else out.push({ key, old: a[k], now: b[k] });
  }
  return out;
}
async function loadHistory() {
  const id = S.thread.thread_id;
  const list = await api("POST", `/threads/${id}/history`, { limit: 200 });
  if (!S.thread || S.thread.thread_id !== id) return;
  S.history = list.slice().reverse();
  const ol = $("#timeline");
  ol.replaceChildren();
  // Each checkpoint against its parent (not the one before it in time: a fork starts a branch).
  const byId = new Map(S.history.map((h) => [h.checkpoint.checkpoint_id, h]));
  let before = null;
  for (const h of S.history) {
    const cid = h.checkpoint.checkpoint_id;
    const m = h.metadata || {};
    const writers = Array.isArray(m.writers) ? m.writers.filter((w) => w !== "__start__") : [];
    const parentId = h.parent_checkpoint && h.parent_checkpoint.checkpoint_id;
    const parent = parentId ? byId.get(parentId) : null;
    const first = !parent;
    const changes = parent ? diffValues(parent.values, h.values, true) : [];
    const branch = parent && before && parent !== before
      ? el("span", { class: "badge branch" }, `branch from step ${(parent.metadata || {}).step} `) : null;
    before = h;
    const waiting = (h.interrupts || []).length > 0;
    ol.append(el("li", { class: "checkpoint" + (cid === S.checkpoint ? " selected" : "") + (waiting ? " has-interrupt" : ""),
        "data-checkpoint": cid, onclick: () => selectCheckpoint(cid).catch(showError) },
      el("div", { class: "head" }, el("b", {}, `step ${m.step}`), ` ${m.source || ""} `,
        writers.length ? el("span", { class: "writers" }, "\u2190 " + writers.join(", ") + " ") : null,
        h.next.length ? el("span", { class: "next" }, "\u2192 next: " + h.next.join(", ") + " ") : null,
        waiting ? el("span", { class: "badge" }, "interrupt") : null, branch,
        el("small", {}, " " + (h.created_at || "").slice(11, 23))),
      first ? el("div", { class: "nochange" }, (parentId ? "(parent not listed) " : "initial state: ") + Object.keys(h.values || {}).join(", "))
      : changes.length ? el("ul", { class: "changes" }, ...changes.map((c) => el("li", {}, el("code", {}, c.key), ": ",
          c.old === undefined ? null : el("span", { class: "old" }, short(c.old, 80)), c.old === undefined ? null : " \u2192 ",
          el("span", { class: "new" }, short(c.now, 160)))))
        : el("div", { class: "nochange" }, "no state change")));
  }
  ol.dataset.count = String(S.history.length);
  if (!S.checkpoint) ol.scrollTop = ol.scrollHeight; // the newest in view
}

// -- fork from a checkpoint: update the state there (a new branch), or run from it -------------
async function selectCheckpoint(cid) {
  S.checkpoint = cid;
  for (const li of document.querySelectorAll("#timeline .checkpoint")) {
    li.classList.toggle("selected", li.dataset.checkpoint === cid);
    if (li.dataset.checkpoint === cid) li.scrollIntoView({ block: "nearest" });
  }
  const h = S.history.find((x) => x.checkpoint.checkpoint_id === cid);
  $("#fork").hidden = false;
  $("#fork-checkpoint").textContent = cid;
  $("#fork-values").value = JSON.stringify(h ? h.values : {}, null, 2);
  await drawGraph();
}
async function forkUpdate() {
  let edited;
  try { edited = JSON.parse($("#fork-values").value); } catch (e) { throw new Error("the state is not valid JSON: " + e.message); }
  const h = S.history.find((x) => x.checkpoint.checkpoint_id === S.checkpoint);
  const values = {};
  for (const c of diffValues(h ? h.values : {}, edited)) if (c.now !== undefined) values[c.key] = c.now;
  const body = { values, checkpoint_id: S.checkpoint };
  if ($("#fork-as-node").value) body.as_node = $("#fork-as-node").value;
  const r = await api("POST", `/threads/${S.thread.thread_id}/state`, body);
  await refreshThread();
  await selectCheckpoint(r.checkpoint.checkpoint_id);
}
async function forkRun() {
  const cid = S.checkpoint;
  S.checkpoint = null;
  $("#fork").hidden = true;
  await runStream({ checkpoint_id: cid });
}

// -- wiring ----------------------------------------------------------------------------------
$("#api-key").value = S.key;
$("#api-key").addEventListener("change", () => { S.key = $("#api-key").value; sessionStorage.setItem("stategraph-key", S.key); loadAssistants().catch(showError); });
$("#assistant").addEventListener("change", () => chooseAssistant($("#assistant").value).catch(showError));
$("#new-thread").addEventListener("click", () => tracked(newThread).catch(showError));
$("#refresh").addEventListener("click", () => (S.thread ? refreshThread() : loadThreads()).catch(showError));
$("#overlay").addEventListener("change", () => drawGraph().catch(showError));
$("#fork-update").addEventListener("click", () => tracked(forkUpdate).catch(showError));
$("#fork-run").addEventListener("click", () => forkRun().catch(showError));
$("#run-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  let input;
  try { input = JSON.parse($("#run-input").value); } catch (e) { showError(new Error("the input is not valid JSON: " + e.message)); return; }
  runStream({ input }).catch(showError);
});
setInterval(() => { if (!document.hidden && S.assistant) loadThreads().catch(() => {}); }, 3000);
loadAssistants().then(() => { document.body.dataset.ready = "1"; }, showError);
)STUDIO";
// clang-format on

const asset page{index_html, "text/html; charset=utf-8"};
const asset script{app_js, "text/javascript; charset=utf-8"};
const asset style{app_css, "text/css; charset=utf-8"};

/// A file descriptor closed on scope exit.
struct fd_guard {
    int fd = -1;
    ~fd_guard() {
        if (fd >= 0) ::close(fd);
    }
};

/// An unlinked temporary file (closed on exec); -1 and errno on failure.
int temp_file() {
    char name[] = "/tmp/stategraph-dot-XXXXXX";
    int fd = ::mkostemp(name, O_CLOEXEC);
    if (fd >= 0) ::unlink(name);
    return fd;
}

std::string sys_error(const char* what, int err) { return std::string(what) + ": " + std::strerror(err); }

/// The child's pid, and whether the timer killed it; shared with the timer's handler.
struct child_watch {
    pid_t pid = -1;
    bool reaped = false;
    bool timed_out = false;
};

} // namespace

const asset* find_asset(std::string_view name) {
    if (name.empty() || name == "index.html") return &page;
    if (name == "app.js") return &script;
    if (name == "app.css") return &style;
    return nullptr;
}

boost::asio::awaitable<svg_answer> render_svg(std::unique_ptr<svg_job> job) {
    namespace net = boost::asio;
    auto ex = co_await net::this_coro::executor;
    constexpr std::size_t max_svg = 32u << 20;
    // At most this many dot children at once (each may buffer up to max_svg): more get 429.
    constexpr int max_renders = 4;
    static std::atomic<int> rendering{0};
    struct slot {
        bool held;
        explicit slot(bool h) : held(h) {}
        ~slot() {
            if (held) --rendering;
        }
    };
    slot mine(++rendering <= max_renders);
    if (!mine.held) {
        --rendering;
        co_return svg_answer{429, "too many graphs are being drawn right now (at most " + std::to_string(max_renders) +
                                      " at once); try again, or ask for ?format=dot"};
    }

    fd_guard in{temp_file()}, err{temp_file()};
    if (in.fd < 0 || err.fd < 0) co_return svg_answer{500, sys_error("could not make a temporary file for dot", errno)};
    for (std::size_t done = 0; done < job->dot.size();) {
        auto n = ::write(in.fd, job->dot.data() + done, job->dot.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) co_return svg_answer{500, sys_error("could not write the DOT text for dot", errno)};
        done += static_cast<std::size_t>(n);
    }
    ::lseek(in.fd, 0, SEEK_SET);
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) co_return svg_answer{500, sys_error("could not make a pipe for dot", errno)};
    fd_guard out_write{out[1]};

    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in.fd, 0);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_adddup2(&actions, err.fd, 2);
    // Nothing else of the server's goes to the child: not the listening socket, not a client's,
    // not a database's (Asio's descriptors are not close-on-exec).
    posix_spawn_file_actions_addclosefrom_np(&actions, 3);
    std::string format = "-Tsvg";
    char* argv[] = {job->program.data(), format.data(), nullptr};
    pid_t pid = -1;
    int rc = ::posix_spawnp(&pid, job->program.c_str(), &actions, nullptr, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(out_write.fd);
    out_write.fd = -1;
    if (rc != 0) {
        ::close(out[0]);
        co_return svg_answer{501, "Graphviz is not installed here: could not run '" + job->program + "' (" +
                                      std::strerror(rc) +
                                      "); install graphviz (apt-get install graphviz), or ask for ?format=dot"};
    }

    // The timer kills the child when it takes too long; its pipe then ends and the read below too.
    auto watch = std::make_shared<child_watch>();
    watch->pid = pid;
    net::steady_timer deadline(ex);
    deadline.expires_after(job->timeout);
    deadline.async_wait([watch](boost::system::error_code ec) {
        if (ec || watch->reaped) return;
        watch->timed_out = true;
        ::kill(watch->pid, SIGKILL);
    });

    net::posix::stream_descriptor reader(ex, out[0]);
    std::string svg;
    std::array<char, 16384> buf;
    bool too_big = false;
    for (;;) {
        auto [ec, n] = co_await reader.async_read_some(net::buffer(buf), net::as_tuple(net::use_awaitable));
        svg.append(buf.data(), n);
        if (ec) break;
        if (svg.size() > max_svg) {
            too_big = true;
            ::kill(pid, SIGKILL);
            break;
        }
    }
    reader.close();
    // Reap it without blocking the server's thread: dot exits right after its output ends (or is
    // killed by the timer, or just now).
    int wstatus = 0;
    bool known = false;
    for (;;) {
        pid_t r = ::waitpid(pid, &wstatus, WNOHANG);
        if (r == pid) {
            known = true;
            break;
        }
        if (r < 0 && errno != EINTR) break; // reaped elsewhere (SIGCHLD ignored): judge by the output
        net::steady_timer pause(ex);
        pause.expires_after(std::chrono::milliseconds(5));
        auto [ec] = co_await pause.async_wait(net::as_tuple(net::use_awaitable));
        (void)ec;
    }
    watch->reaped = true;
    deadline.cancel();

    if (watch->timed_out)
        co_return svg_answer{504, "'" + job->program + " -Tsvg' took longer than " + std::to_string(job->timeout.count()) +
                                      " ms and was stopped; ask for ?format=dot and render it yourself"};
    if (too_big) co_return svg_answer{500, "'" + job->program + " -Tsvg' wrote more than 32 MiB; stopped"};
    bool ok = known ? WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0 : svg.find("</svg>") != std::string::npos;
    if (!ok) {
        std::string why(2048, '\0');
        auto n = ::pread(err.fd, why.data(), why.size(), 0);
        why.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
        while (!why.empty() && (why.back() == '\n' || why.back() == '\r')) why.pop_back();
        std::string how = known && WIFSIGNALED(wstatus) ? "killed by signal " + std::to_string(WTERMSIG(wstatus))
                          : known ? "exit " + std::to_string(WEXITSTATUS(wstatus))
                                  : "no SVG written";
        co_return svg_answer{500, "'" + job->program + " -Tsvg' failed (" + how + ")" + (why.empty() ? "" : ": " + why)};
    }
    co_return svg_answer{200, std::move(svg)};
}

} // namespace stategraph::server::studio
