// The official LangGraph JS SDK streams a graph with a subgraph (subgraph_server's travel_desk)
// at one verbosity level of the server (`--verbosity`), in every stream mode, with and without
// `streamSubgraphs`, and in the legacy `messages` mode:
//
//   runs.stream {request}  (subgraphs)  ─► the subgraph's events named <mode>|research:<task id>,
//        its interrupt ─► runs.stream {command: {resume}} ─► the thread ends, booked
//   runs.stream (no subgraphs)          ─► no event names a namespace
//   runs.stream messages (legacy)       ─► messages/metadata, then messages/partial accumulating
//
// usage: node subgraphs.mjs http://127.0.0.1:PORT full|events|result   (exit 0: every check passed)
import { Client } from "@langchain/langgraph-sdk";
import { check, checking, checks, collect } from "./checks.mjs";

const [apiUrl, level] = process.argv.slice(2);
if (!apiUrl || !["full", "events", "result"].includes(level)) {
  console.error("usage: node subgraphs.mjs http://127.0.0.1:PORT full|events|result");
  process.exit(2);
}
const client = new Client({ apiUrl, apiKey: null });
const graph = "travel_desk";
checking(level);
const base = (e) => e.split("|")[0];
const names = (chunks) => [...new Set(chunks.map((c) => c.event))];
const everyMode = ["values", "updates", "custom", "messages-tuple", "tasks", "checkpoints", "debug", "events"];

// 1. Every mode with subgraphs, up to the interrupt inside the subgraph.
const t = await client.threads.create();
const first = await collect(
  client.runs.stream(t.thread_id, graph, { input: { request: "Mallorca" }, streamMode: everyMode, streamSubgraphs: true }),
);
check(first[0].event === "metadata" && typeof first[0].data.run_id === "string", "the first event is metadata", first[0]);
const sub = first.filter((c) => c.event.includes("|"));
const subNs = sub.length ? c_ns(sub[0].event) : "";
function c_ns(e) {
  return e.slice(e.indexOf("|") + 1);
}
check(!first.some((c) => base(c.event) === "error"), "no error event", names(first));
const lastValues = first.filter((c) => c.event === "values").at(-1);
check(lastValues && Array.isArray(lastValues.data.__interrupt__) && lastValues.data.__interrupt__.length === 1,
  "the stream ends on values holding the subgraph's interrupt", lastValues);
check(lastValues.data.__interrupt__[0].value === "book 'Fly to Mallorca'?", "the interrupt's question", lastValues.data);
const subMessages = first.filter((c) => c.event.startsWith("messages|"));
check(subMessages.length === 3, "three message chunks, from the subgraph", names(first));
check(subMessages.map((c) => c.data[0].content).join("") === "Fly to Mallorca", "the chunks add up to the plan", subMessages);
check(subMessages[0].data[1].langgraph_node === "draft", "the chunk's metadata names the node", subMessages[0].data[1]);
if (level === "result") {
  // Messages, errors and the final values only.
  const kinds = new Set(first.map((c) => base(c.event)));
  check([...kinds].every((k) => ["metadata", "messages", "values"].includes(k)), "result: only metadata, messages, values", [...kinds]);
  check(first.filter((c) => c.event === "values").length === 1, "result: one values event (the final one)", names(first));
} else {
  check(subNs.startsWith("research:"), "subgraph events are named <mode>|research:<task id>", sub[0]?.event);
  const customs = first.filter((c) => c.event === `custom|${subNs}`);
  check(customs.length === 1 && customs[0].data.searching === "Mallorca", "the subgraph's custom event", customs);
  const subUpdates = first.filter((c) => c.event === `updates|${subNs}`).map((c) => Object.keys(c.data)[0]);
  check(JSON.stringify(subUpdates.slice(0, 2)) === JSON.stringify(["search", "draft"]), "the subgraph's updates, in order", subUpdates);
  const parentUpdates = first.filter((c) => c.event === "updates").map((c) => Object.keys(c.data)[0]);
  check(parentUpdates[0] === "triage", "the parent's updates come unnamespaced", parentUpdates);
  const subTasks = first.filter((c) => c.event === `tasks|${subNs}`);
  check(subTasks.some((c) => c.data.name === "draft" && "result" in c.data), "the subgraph's tasks", subTasks.length);
  const subEvents = first.filter((c) => c.event === `events|${subNs}`);
  check(subEvents.some((c) => c.data.event === "on_chat_model_stream"), "the subgraph's LangChain events", subEvents.length);
  if (level === "full") {
    const subValues = first.filter((c) => c.event === `values|${subNs}`);
    check(subValues.length >= 2 && subValues.at(-1).data.plan === "Fly to Mallorca", "the subgraph's values", subValues.at(-1));
    check(first.some((c) => c.event === `checkpoints|${subNs}`), "the subgraph's checkpoints", names(first));
    check(first.some((c) => c.event === `debug|${subNs}`), "the subgraph's debug events", names(first));
    check(first.filter((c) => c.event === "values").length >= 2, "full: values after each parent step", names(first));
  } else {
    const kinds = new Set(first.map((c) => base(c.event)));
    check(!kinds.has("checkpoints") && !kinds.has("debug"), "events: no checkpoints or debug", [...kinds]);
    check(first.filter((c) => base(c.event) === "values").length === 1, "events: one values event (the final one)", names(first));
  }
}

// 2. The resume, into the subgraph, with subgraphs: the thread ends booked.
const rest = await collect(
  client.runs.stream(t.thread_id, graph, { command: { resume: "yes" }, streamMode: ["values", "updates"], streamSubgraphs: true }),
);
const end = rest.filter((c) => c.event === "values").at(-1);
check(end && end.data.booked === "yes" && !("__interrupt__" in end.data), "the resume books the trip", end);
check(JSON.stringify(end.data.log) === JSON.stringify(["triage", "search", "draft", "confirm", "reply"]), "the log of both graphs", end.data.log);
if (level !== "result") {
  check(rest.some((c) => c.event.startsWith("updates|research:") && "confirm" in c.data), "the subgraph's confirm update", names(rest));
}
const state = await client.threads.getState(t.thread_id);
check(state.values.booked === "yes" && state.next.length === 0, "the thread's state", state);

// 3. Without streamSubgraphs: no event names a namespace.
const t2 = await client.threads.create();
const plain = await collect(client.runs.stream(t2.thread_id, graph, { input: { request: "Lisbon" }, streamMode: everyMode }));
check(plain.length > 1 && !plain.some((c) => c.event.includes("|")), "no namespaced events without streamSubgraphs", names(plain));

// 4. The legacy messages mode: messages/metadata, then messages/partial with the message so far.
const t3 = await client.threads.create();
const legacy = await collect(
  client.runs.stream(t3.thread_id, graph, { input: { request: "Porto" }, streamMode: "messages", streamSubgraphs: true }),
);
const meta = legacy.filter((c) => c.event.startsWith("messages/metadata"));
const partial = legacy.filter((c) => c.event.startsWith("messages/partial"));
check(meta.length === 1 && "plan-1" in meta[0].data && meta[0].data["plan-1"].metadata.langgraph_node === "draft",
  "one messages/metadata naming the message and its node", meta);
check(partial.length === 3, "a messages/partial per chunk", names(legacy));
check(partial.map((c) => c.data[0].content).join("|") === "Fly |Fly to |Fly to Porto", "each partial holds the message so far", partial);
check(partial.every((c) => c.data[0].type === "ai" && c.data[0].id === "plan-1"), "a partial is the message, not the chunk", partial[0]);
check(!legacy.some((c) => c.event === "messages" || c.event.startsWith("messages|")), "no messages-tuple events in the legacy mode", names(legacy));

console.log(`subgraphs.mjs (${level}): ${checks()} checks passed`);
