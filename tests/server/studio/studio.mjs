// The studio page in a real browser: Debian's headless chromium, driven by puppeteer-core (pinned in
// package-lock.json), against `global_supervisor serve` started here on a free loopback port.
//
//   /studio ─► graph SVG (stages as clusters) ─► New thread ─► Run {"user_message": "Thomas is traveling
//   to Mallorca"} ─► live stream ─► the interrupt's form ("Which Thomas?") ─► Resume "Thomas Berger"
//   ─► thread idle, the answer in its state, the timeline and the thread's path on the graph
//   ─► fork: run again from the interrupted checkpoint ─► resume "Thomas Anderson"
//   ─► fork: update the state at the newest checkpoint ─► a background run started through the
//   API, joined by selecting its thread
//
// usage: node studio.mjs GLOBAL_SUPERVISOR_BINARY WORK_DIR ARTIFACT_DIR
// Exit 0 when every check passed; screenshots go to ARTIFACT_DIR/studio-*.png (their paths printed).
import puppeteer from "puppeteer-core";
import { spawn } from "node:child_process";
import { openSync } from "node:fs";
import path from "node:path";

const [bin, work, artifacts] = process.argv.slice(2);
if (!artifacts) {
  console.error("usage: node studio.mjs GLOBAL_SUPERVISOR_BINARY WORK_DIR ARTIFACT_DIR");
  process.exit(2);
}
const chromium = process.env.STATEGRAPH_CHROMIUM || "/usr/bin/chromium";
const wait = { timeout: 60_000 }; // generous: under ASan the server is several times slower
// Clicks an item of a list the page may render again at any time (a refresh, a poll): the click
// runs inside the page on the element found at that moment, retried if it was just replaced.
const tap = async (page, selector) => {
  for (let attempt = 0; ; ++attempt) {
    try {
      await page.waitForSelector(selector, wait);
      await page.$eval(selector, (el) => el.click());
      return;
    } catch (e) {
      if (attempt >= 20 || !/detached|No element found|failed to find/i.test(String(e))) throw e;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
};
let checks = 0;
function check(cond, what, extra) {
  if (!cond) throw new Error(`FAIL: ${what}` + (extra === undefined ? "" : `: ${JSON.stringify(extra).slice(0, 600)}`));
  checks++;
}

/// Starts the server on a free port; resolves with the process and its URL.
function startServer() {
  return new Promise((resolve, reject) => {
    const log = openSync(path.join(work, "serve.log"), "w");
    const child = spawn(bin, ["serve", "--db", path.join(work, "chat.db"), "--port", "0"], { stdio: ["ignore", "pipe", log] });
    let out = "";
    const timer = setTimeout(() => reject(new Error("the server printed no address within 30 s")), 30_000);
    child.stdout.on("data", (d) => {
      out += d;
      const m = /http:\/\/127\.0\.0\.1:(\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({ child, url: `http://127.0.0.1:${m[1]}` });
      }
    });
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`the server exited (${code}) before it listened; see ${work}/serve.log`));
    });
  });
}

const server = await startServer();
const api = async (p) => (await fetch(server.url + p)).json();
let browser;
const shots = [];
try {
  // Chromium's first start on a busy 2-core machine can take longer than puppeteer's 30 s
  // default (CI saw it once while both cores compiled): a longer wait, and one more try.
  const launch = () =>
    puppeteer.launch({
      executablePath: chromium,
      headless: true,
      timeout: 90000,
      args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", `--user-data-dir=${path.join(work, "profile")}`],
    });
  try {
    browser = await launch();
  } catch (e) {
    console.error(`studio.mjs: Chromium did not start (${e.message}); trying once more`);
    browser = await launch();
  }
  const page = await browser.newPage();
  await page.setViewport({ width: 1600, height: 1000 });
  const pageErrors = [];
  page.on("pageerror", (e) => pageErrors.push(String(e)));
  page.on("console", (m) => m.type() === "error" && console.error(`(browser console) ${m.text()}`));
  const failed = [];
  page.on("response", (r) => r.status() >= 400 && failed.push(`${r.status()} ${r.request().method()} ${r.url()}`));
  const shot = async (name) => {
    const file = path.join(artifacts, name);
    await page.screenshot({ path: file });
    shots.push(file);
  };
  const text = (sel) => page.$eval(sel, (e) => e.textContent);
  const statusIs = (want) =>
    page.waitForFunction((w) => document.querySelector("#thread-status").textContent === w &&
      document.body.dataset.pending === "0", wait, want);

  // 1. The page, and the graph as SVG with the stages as clusters.
  await page.goto(`${server.url}/studio`, { waitUntil: "load" });
  await page.waitForSelector("body[data-ready='1']", wait);
  await page.waitForSelector("#graph[data-state='drawn'] svg", wait);
  const clusters = await page.$$eval("#graph svg g.cluster", (gs) => gs.length);
  check(clusters >= 5, "the graph's stages are clusters of the SVG", clusters);
  const nodes = await page.$$eval("#graph svg g.node title", (ts) => ts.map((t) => t.textContent));
  check(nodes.includes("disambiguation_blocking"), "the SVG draws disambiguation_blocking", nodes);
  check((await page.$$eval("#assistant option", (o) => o.map((x) => x.textContent))).includes("global_supervisor"), "the assistant is listed");
  await shot("studio-loaded.png");

  // 2. A new thread, and a turn started from the page's form that stops at the interrupt.
  await page.click("#new-thread");
  await page.waitForFunction(() => /^[0-9a-f-]{36}$/.test(document.querySelector("#thread-id").textContent), wait);
  const tid = await text("#thread-id");
  await page.waitForSelector(`#threads li[data-thread='${tid}']`, wait);
  await page.$eval("#run-input", (e, v) => { e.value = v; }, JSON.stringify({ user_message: "Thomas is traveling to Mallorca" }));
  await page.click("#run-start");
  await statusIs("interrupted");
  await page.waitForSelector("#interrupts form.resume-form", wait);
  check(/Which Thomas/.test(await text("#interrupts .question")), "the form asks which Thomas", await text("#interrupts"));
  const streamed = await page.$$eval("#stream-log li", (lis) => lis.map((l) => l.textContent));
  check(streamed[0].startsWith("metadata"), "the live stream starts with the run's metadata", streamed[0]);
  check(streamed.some((t) => t.startsWith("updates") && t.includes("interrupt: ")), "the live stream showed the interrupt", streamed.slice(-3));
  check(streamed.some((t) => t.startsWith("updates") && t.includes("session_init")), "the live stream named the nodes as they ran", streamed.slice(0, 4));
  check((await api(`/threads/${tid}`)).status === "interrupted", "the server has the thread interrupted");
  // The thread drawn on the graph: its caption names the thread, the waiting node is marked.
  await page.waitForFunction((t) => (document.querySelector("#graph svg") || {}).textContent?.includes(t), wait, tid);
  await page.waitForSelector(`#threads li[data-thread='${tid}'][data-status='interrupted']`, wait);
  check(await page.$eval("#graph", (g) => g.scrollTop > 0), "the drawing scrolled to the node that waits");
  await shot("studio-interrupt.png");

  // 3. Resume through the form: an option button fills the answer, Resume sends command.resume.
  const options = await page.$$("#interrupts .resume-option");
  const labels = await Promise.all(options.map((b) => b.evaluate((e) => e.textContent)));
  check(labels.includes("Thomas Berger") && labels.includes("Thomas Anderson"), "the form offers both Thomases", labels);
  await options[labels.indexOf("Thomas Berger")].click();
  check((await page.$eval("#interrupts .resume-value", (e) => e.value)) === "Thomas Berger", "the option filled the answer");
  await page.click("#interrupts .resume-submit");
  await statusIs("idle");
  check((await page.$$("#interrupts form")).length === 0, "no interrupt is pending any more");
  const done = await api(`/threads/${tid}`);
  check(done.status === "idle", "the thread finished (idle)", done.status);
  check(/Thomas Berger/.test(done.values.response.reply), "the state has the answer", done.values.response);
  check((await text("#thread-values")).includes("Thomas Berger"), "the page shows the answer in the state");
  const resumedLog = await page.$$eval("#stream-log li", (lis) => lis.map((l) => l.textContent));
  check(resumedLog.some((t) => t.startsWith("updates") && t.includes("disambiguation_blocking")), "the resumed run streamed", resumedLog.slice(0, 4));

  // 4. The timeline: every checkpoint, the writers and the state change at each.
  await page.waitForFunction(() => Number(document.querySelector("#timeline").dataset.count) >= 10, wait);
  const timeline = await page.$$eval("#timeline li.checkpoint", (lis) => lis.map((l) => ({
    id: l.dataset.checkpoint, head: l.querySelector(".head").textContent, changes: [...l.querySelectorAll(".changes code")].map((c) => c.textContent),
    waiting: l.classList.contains("has-interrupt") })));
  const history = await (await fetch(`${server.url}/threads/${tid}/history`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ limit: 200 }) })).json();
  check(timeline.length === history.length, "one timeline entry per checkpoint", [timeline.length, history.length]);
  check(timeline[0].id === history.at(-1).checkpoint.checkpoint_id, "the timeline runs oldest first");
  check(timeline.some((t) => t.head.includes("disambiguation_blocking") && t.changes.length > 0), "the resumed node's checkpoint shows its state change", timeline.slice(-4));
  check(timeline.some((t) => t.changes.includes("response.reply")), "a checkpoint shows the reply changing (down to the field)", timeline.slice(-3));
  await shot("studio-finished.png");

  // 5. Fork: run again from the checkpoint that waited for the answer (a new branch), resume it.
  const waited = timeline.filter((t) => t.head.includes("next: disambiguation_blocking")).at(-1);
  check(waited, "the checkpoint before the question is on the timeline", timeline.map((t) => t.head));
  await tap(page, `#timeline li[data-checkpoint='${waited.id}']`);
  await page.waitForSelector("#fork:not([hidden])", wait);
  check((await text("#fork-checkpoint")) === waited.id, "the fork panel names the checkpoint");
  await page.waitForFunction((c) => (document.querySelector("#graph svg") || {}).textContent?.includes(c), wait, waited.id);
  await page.click("#fork-run");
  await statusIs("interrupted");
  await page.waitForSelector("#interrupts .resume-value", wait);
  await page.type("#interrupts .resume-value", "Thomas Anderson");
  await page.click("#interrupts .resume-submit");
  await statusIs("idle");
  const forked = await api(`/threads/${tid}`);
  const branches = await page.$$eval("#timeline .branch", (bs) => bs.map((b) => b.textContent));
  check(branches.length === 1 && branches[0].startsWith("branch from step"), "the timeline marks where the branch starts", branches);
  check(/Thomas Anderson/.test(forked.values.response.reply), "the branch run from the checkpoint took the other answer", forked.values.response);

  // 6. Fork: update the state at the newest checkpoint (only the edited field is sent).
  const newest = await page.$eval("#timeline li.checkpoint:last-child", (l) => l.dataset.checkpoint);
  const before = Number(await page.$eval("#timeline", (e) => e.dataset.count));
  await tap(page, `#timeline li[data-checkpoint='${newest}']`);
  await page.waitForSelector("#fork:not([hidden])", wait);
  await page.$eval("#fork-values", (e) => {
    const v = JSON.parse(e.value);
    v.response.reply = "edited in the studio";
    e.value = JSON.stringify(v, null, 2);
  });
  await page.select("#fork-as-node", "message_persist");
  await page.click("#fork-update");
  await page.waitForFunction((n) => Number(document.querySelector("#timeline").dataset.count) === n + 1 &&
    document.body.dataset.pending === "0", wait, before);
  const edited = await api(`/threads/${tid}/state`);
  check(edited.values.response.reply === "edited in the studio", "the state update made at the checkpoint", edited.values.response);
  check(edited.parent_checkpoint.checkpoint_id === newest, "the new checkpoint follows the chosen one");
  check((await page.$eval("#timeline li.selected", (l) => l.dataset.checkpoint)) === edited.checkpoint.checkpoint_id,
        "the new checkpoint is the one selected");
  await shot("studio-fork.png");

  // 7. A run started elsewhere (a background run, 1 s late): selecting its thread joins its stream.
  const post = async (p, body) => (await fetch(server.url + p, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) })).json();
  const other = await post("/threads", { metadata: { graph_id: "global_supervisor" } });
  const bg = await post(`/threads/${other.thread_id}/runs`, { assistant_id: "global_supervisor", input: { user_message: "Hi there!" },
    stream_mode: ["values", "updates"], after_seconds: 1 });
  check(bg.status === "pending", "a background run waits to start", bg);
  await page.click("#refresh");
  await page.waitForSelector(`#threads li[data-thread='${other.thread_id}']`, wait);
  await tap(page, `#threads li[data-thread='${other.thread_id}']`);
  await page.waitForFunction(() => document.querySelector("#stream-status").textContent.includes("(joined)"), wait);
  await statusIs("idle");
  const joined = await page.$$eval("#stream-log li", (lis) => lis.map((l) => l.textContent));
  check((await text("#stream-status")).endsWith("ended"), "the joined stream ended with the run", await text("#stream-status"));
  check(joined.some((t) => t.startsWith("updates") && t.includes("message_persist")), "the joined stream showed the run's nodes", joined.slice(-3));
  check((await api(`/threads/${other.thread_id}/runs/${bg.run_id}`)).status === "success", "the joined run succeeded");
  check((await page.$eval("#error", (e) => e.hidden)), "the page shows no error", await text("#error"));
  check(pageErrors.length === 0, "no script error in the page", pageErrors);
  check(failed.length === 0, "every request of the page succeeded", failed);
  await shot("studio-joined.png");
  console.log(`studio browser test: ${checks} checks passed against ${server.url} (chromium ${await browser.version()})`);
  for (const s of shots) console.log(`screenshot: ${s}`);
} catch (e) {
  console.error(e.stack || String(e));
  if (browser) {
    const pages = await browser.pages();
    if (pages.length) {
      const file = path.join(artifacts, "studio-failure.png");
      await pages.at(-1).screenshot({ path: file, fullPage: true }).catch(() => {});
      console.error(`screenshot of the failure: ${file}`);
    }
  }
  process.exitCode = 1;
} finally {
  if (browser) await browser.close();
}
// SIGTERM: the server drains and exits 0 (under the sanitizers, a report makes it exit otherwise).
const exited = new Promise((resolve) => server.child.on("exit", (code, signal) => resolve({ code, signal })));
server.child.kill("SIGTERM");
const timer = setTimeout(() => server.child.kill("SIGKILL"), 30_000);
const end = await exited;
clearTimeout(timer);
if (end.code !== 0) {
  console.error(`FAIL: the server exited with ${end.code ?? end.signal} after SIGTERM; see ${path.join(work, "serve.log")}`);
  process.exitCode = 1;
}
