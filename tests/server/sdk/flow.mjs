// The official LangGraph JS SDK (@langchain/langgraph-sdk, pinned in package-lock.json) drives
// `global_supervisor serve` through the Global Supervisor flow, unchanged:
//
//   assistants.search ─► threads.create ─► runs.stream "Hi there!" (metadata, values, updates)
//        ─► runs.stream "Thomas is traveling to Mallorca" ─► __interrupt__ (which Thomas?)
//        ─► runs.wait {command: {resume: "Thomas Berger"}} ─► getHistory ─► updateState ─► patchState
//        ─► two threads in parallel ─► a second run on a busy thread refused (409) ─► a fork
//           from the checkpoint that ended a thread's first turn
//        ─► one turn streamed in every stream mode (values, updates, custom, messages-tuple,
//           tasks, checkpoints, debug, events)
//        ─► store.putItem / getItem / searchItems / listNamespaces / deleteItem
//
// usage: node flow.mjs http://127.0.0.1:PORT [THREAD_FILE]   (exit 0: every check passed; the
// first thread's id is written to THREAD_FILE for restart.mjs)
import { Client } from "@langchain/langgraph-sdk";
import { check, checks, collect } from "./checks.mjs";

const apiUrl = process.argv[2];
if (!apiUrl) {
  console.error("usage: node flow.mjs http://127.0.0.1:PORT");
  process.exit(2);
}
const client = new Client({ apiUrl, apiKey: null });
const graph = "global_supervisor";

// 1. The assistant and its graph.
const assistants = await client.assistants.search({ graphId: graph });
check(assistants.length === 1 && assistants[0].graph_id === graph, "assistants.search finds the graph", assistants);
const shape = await client.assistants.getGraph(assistants[0].assistant_id);
check(shape.nodes.some((n) => n.id === "disambiguation_blocking"), "getGraph lists disambiguation_blocking");
const schemas = await client.assistants.getSchemas(assistants[0].assistant_id);
check(schemas.input_schema.title === "supervisor_input" && "user_message" in schemas.input_schema.properties,
  "getSchemas: the flat input", schemas.input_schema);
check(schemas.output_schema.title === "supervisor_output" && "reply" in schemas.output_schema.properties,
  "getSchemas: the flat output", schemas.output_schema);
check("conversation" in schemas.state_schema.properties, "getSchemas: the namespaced state", schemas.state_schema);
check(shape.edges.length > 10, "getGraph has edges", shape.edges.length);

// 2. A thread and a first turn, streamed.
const thread = await client.threads.create({ metadata: { user: "sdk-test" } });
check(typeof thread.thread_id === "string" && thread.status === "idle", "threads.create", thread);
let created = null;
const hi = await collect(
  client.runs.stream(thread.thread_id, graph, {
    input: { user_message: "Hi there!", avatar_id: "owl" }, // chat_id: the thread; user_id: the served user
    streamMode: ["values", "updates"],
    onRunCreated: (meta) => (created = meta),
  }),
);
check(hi[0].event === "metadata" && typeof hi[0].data.run_id === "string", "metadata first", hi[0]);
check(created && created.run_id === hi[0].data.run_id && created.thread_id === thread.thread_id, "onRunCreated", created);
check(hi.some((c) => c.event === "values"), "values events");
check(hi.some((c) => c.event === "updates" && "session_init" in c.data), "updates events name the node");
const lastValues = hi.filter((c) => c.event === "values").at(-1).data;
check(lastValues.reply.length > 0 && lastValues.user_id === "demo" && lastValues.avatar_id === "owl",
  "the turn's output: the reply beside the identity fields", lastValues);
check(lastValues.chat_id === thread.thread_id && lastValues.path.includes("session_init"), "output chat_id and path", lastValues);
check((await client.threads.get(thread.thread_id)).status === "idle", "thread idle after the turn");

// 3. The disambiguation interrupt.
const thomas = await collect(
  client.runs.stream(thread.thread_id, graph, {
    input: { user_message: "Thomas is traveling to Mallorca" },
    streamMode: ["values", "updates"],
  }),
);
const interruptUpdate = thomas.find((c) => c.event === "updates" && "__interrupt__" in c.data);
check(interruptUpdate, "an __interrupt__ update", thomas.map((c) => c.event));
const finalValues = thomas.filter((c) => c.event === "values").at(-1).data;
check(Array.isArray(finalValues.__interrupt__) && finalValues.__interrupt__.length === 1, "__interrupt__ in the last values");
check(/Which Thomas/.test(finalValues.__interrupt__[0].value.question), "the question", finalValues.__interrupt__[0]);
check(/Which Thomas/.test(finalValues.question) && finalValues.options.length > 1, "the pending question in the output", finalValues);
const waiting = await client.threads.get(thread.thread_id);
check(waiting.status === "interrupted", "thread interrupted", waiting.status);
const state = await client.threads.getState(thread.thread_id);
check(state.next.includes("disambiguation_blocking"), "state.next", state.next);
check(state.tasks.some((t) => t.interrupts.length === 1), "state.tasks[].interrupts", state.tasks);

// 4. Resume by thread id with a Command.
const resumed = await client.runs.wait(thread.thread_id, graph, { command: { resume: "Thomas Berger" } });
check(/Thomas Berger/.test(resumed.reply) && resumed.question === null, "the resumed reply", resumed);
check((await client.threads.get(thread.thread_id)).status === "idle", "thread idle after the resume");

// 5. History, newest first, linked by parent checkpoints.
const history = await client.threads.getHistory(thread.thread_id, { limit: 5 });
check(history.length === 5, "getHistory limit", history.length);
check(history[0].parent_checkpoint.checkpoint_id === history[1].checkpoint.checkpoint_id, "history newest first");
check(history[0].created_at >= history[1].created_at, "history timestamps descend");

// 6. updateState as a node: a new checkpoint that getState shows.
const before = await client.threads.getState(thread.thread_id);
// A nested struct's members left out keep the thread's values (stategraph merges; LangGraph would replace).
const updated = await client.threads.updateState(thread.thread_id, {
  values: { response: { reply: "edited by the SDK test" } },
  asNode: "message_persist",
});
check(updated.checkpoint && updated.checkpoint.checkpoint_id !== before.checkpoint.checkpoint_id, "updateState checkpoint", updated);
const after = await client.threads.getState(thread.thread_id);
check(after.values.response.reply === "edited by the SDK test", "updateState visible", after.values.response);
check(after.values.response.presentation.avatar === "owl" && after.values.response.kind === before.values.response.kind,
  "updateState kept the members left out", after.values.response);
let unknownMember = null;
try {
  await client.threads.updateState(thread.thread_id, { values: { response: { replie: "x" } } });
} catch (e) {
  unknownMember = e;
}
check(unknownMember && /'replie' is not a member of response_state/.test(String(unknownMember.message ?? unknownMember)),
  "an unknown member is a 422 naming it and the struct", String(unknownMember));

// 6b. patchState: the newest checkpoint's metadata takes the keys (by id or by config); the values stay.
await client.threads.patchState(thread.thread_id, { reviewed_by: "sdk" });
const patched = await client.threads.getState(thread.thread_id);
check(patched.metadata.reviewed_by === "sdk" && patched.checkpoint.checkpoint_id === after.checkpoint.checkpoint_id,
  "patchState sets the newest checkpoint's metadata", patched.metadata);
check(JSON.stringify(patched.values) === JSON.stringify(after.values), "patchState keeps the values", patched.values);
await client.threads.patchState({ configurable: { thread_id: thread.thread_id } }, { round: 2 });
const repatched = await client.threads.getState(thread.thread_id);
check(repatched.metadata.reviewed_by === "sdk" && repatched.metadata.round === 2, "patchState by config merges", repatched.metadata);

// 7. Two threads in parallel.
const [a, b] = await Promise.all([client.threads.create(), client.threads.create()]);
const [ra, rb] = await Promise.all([
  client.runs.wait(a.thread_id, graph, { input: { user_message: "Hi there!" } }),
  client.runs.wait(b.thread_id, graph, { input: { user_message: "What does Thomas like?" } }),
]);
check(ra.chat_id === a.thread_id && rb.chat_id === b.thread_id, "parallel threads keep apart");
check(ra.reply.length > 0 && rb.reply.length > 0, "parallel replies");

// 8. A second run on a busy thread is refused (409), not queued or retried.
const first = await client.runs.create(a.thread_id, graph, { input: { user_message: "Hi again" }, afterSeconds: 1 });
check(first.status === "pending", "a delayed run is pending", first);
let refused = null;
try {
  await client.runs.create(a.thread_id, graph, { input: { user_message: "me too" } });
} catch (e) {
  refused = e;
}
check(refused && (refused.status === 409 || /409/.test(String(refused))), "second run refused with 409", String(refused));
check(/already running/.test(String(refused?.message ?? refused)), "the refusal says why", String(refused));
const joined = await client.runs.join(a.thread_id, first.run_id);
check(joined.reply.length > 0, "join returns the final output");
const run = await client.runs.get(a.thread_id, first.run_id);
check(run.status === "success", "runs.get agrees with join", run.status);
const runs = await client.runs.list(a.thread_id);
check(runs.length === 2 && runs[0].run_id === first.run_id, "runs.list newest first", runs.map((r) => r.run_id));

// 8b. Fork: a new turn from the checkpoint that ended the thread's first turn, not from its newest.
const histA = await client.threads.getHistory(a.thread_id, { limit: 100 });
const ends = histA.filter((h) => h.next.length === 0);
check(ends.length === 2, "two finished turns in the history", ends.length);
const firstEnd = ends[1]; // newest first: the first turn's end is the older one
const forked = await client.runs.wait(a.thread_id, graph, {
  input: { user_message: "Hi from a fork" },
  checkpointId: firstEnd.checkpoint.checkpoint_id,
});
check(forked.reply.length > 0, "the forked turn replies", forked);
const forkState = await client.threads.getState(a.thread_id);
check(forkState.values.conversation.user_message === "Hi from a fork", "the fork's state", forkState.values.conversation);
// Its ancestors: the chosen checkpoint and the first turn's, none of the second turn's.
const byId = new Map();
for (const h of await client.threads.getHistory(a.thread_id, { limit: 200 })) byId.set(h.checkpoint.checkpoint_id, h);
const ancestors = new Set();
for (let cur = forkState, steps = 0; cur && steps < 200; steps++) {
  ancestors.add(cur.checkpoint.checkpoint_id);
  cur = cur.parent_checkpoint ? byId.get(cur.parent_checkpoint.checkpoint_id) : null;
}
check(ancestors.has(firstEnd.checkpoint.checkpoint_id) && !ancestors.has(ends[0].checkpoint.checkpoint_id),
  "the fork descends from the first turn's end, not from the second turn", ancestors.size);

// 9. Join a finished run's stream again (replay).
const replay = await collect(client.runs.joinStream(thread.thread_id, created.run_id));
check(replay.some((c) => c.event === "values"), "joinStream replays the run's events", replay.length);

// 10. Every stream mode on one complex turn, each event as the SDK hands it over.
const everyMode = ["values", "updates", "custom", "messages-tuple", "tasks", "checkpoints", "debug", "events"];
const all = await collect(
  client.runs.stream(b.thread_id, graph, {
    input: { user_message: "Research flights to Mallorca and book a hotel" },
    streamMode: everyMode,
  }),
);
const byEvent = (name) => all.filter((c) => c.event === name);
const finalOut = byEvent("values").at(-1)?.data;
check(finalOut && finalOut.reply.length > 0, "every mode: the final values", finalOut);
check(byEvent("updates").some((c) => "global_planner" in c.data), "every mode: updates name the node", byEvent("updates").length);
const progress = byEvent("custom").map((c) => c.data);
check(progress.some((p) => p.status === "working" && typeof p.agent === "string") && progress.some((p) => p.status === "done"),
  "every mode: custom events report the agents at work", progress);
const tokens = byEvent("messages").map((c) => c.data);
check(tokens.length > 1 && tokens.every(([chunk, meta]) => chunk.type === "AIMessageChunk" && meta.langgraph_node === "message_persist"),
  "every mode: messages-tuple events are [AIMessageChunk, metadata]", tokens[0]);
check(tokens.map(([chunk]) => chunk.content).join("") === finalOut.reply, "every mode: the reply's tokens add up to the reply",
  tokens.map(([chunk]) => chunk.content).join(""));
const tasks = byEvent("tasks").map((c) => c.data);
check(tasks.some((t) => t.name === "global_planner" && "input" in t) && tasks.some((t) => t.name === "global_planner" && "result" in t),
  "every mode: tasks start and finish", tasks.length);
const cps = byEvent("checkpoints").map((c) => c.data);
check(cps.length > 2 && cps.every((c) => c.config?.configurable?.checkpoint_id && "values" in c && Array.isArray(c.next)),
  "every mode: checkpoints carry config, values and next", cps[0]);
const debugTypes = new Set(byEvent("debug").map((c) => c.data.type));
check(["checkpoint", "task", "task_result"].every((t) => debugTypes.has(t)), "every mode: debug has checkpoints and tasks", [...debugTypes]);
const lc = byEvent("events").map((c) => c.data);
check(lc[0]?.event === "on_chain_start" && lc[0].name === "LangGraph" && lc.at(-1)?.event === "on_chain_end" &&
  lc.at(-1).data.output.reply === finalOut.reply, "every mode: events open and close with the graph's on_chain_start/end",
  [lc[0], lc.at(-1)]);
check(lc.some((e) => e.event === "on_chain_end" && e.name === "global_planner") && lc.some((e) => e.event === "on_chat_model_stream"),
  "every mode: events have each node's on_chain_end and the reply's on_chat_model_stream", lc.length);

// 11. The long-term memory Store (client.store.*).
await client.store.putItem(["users", "thomas", "facts"], "trip", { text: "travels to Mallorca in May", month: 5 });
await client.store.putItem(["users", "thomas", "facts"], "drink", { text: "likes strong coffee", month: 1 }, { index: false });
await client.store.putItem(["users", "anna", "facts"], "trip", { text: "travels to Lisbon", month: 7 });
const trip = await client.store.getItem(["users", "thomas", "facts"], "trip");
check(trip && trip.value.text === "travels to Mallorca in May" && trip.key === "trip", "store.getItem returns the item", trip);
check(JSON.stringify(trip.namespace) === JSON.stringify(["users", "thomas", "facts"]) && trip.createdAt, "store item has namespace and createdAt", trip);
const byQuery = await client.store.searchItems(["users"], { query: "travels" });
check(byQuery.items.length === 2 && byQuery.items.every((i) => typeof i.score === "number"), "store.searchItems ranks by query", byQuery);
const byFilter = await client.store.searchItems(["users"], { filter: { month: { $gte: 5 } }, limit: 1 });
check(byFilter.items.length === 1, "store.searchItems filters and limits", byFilter);
const ns = await client.store.listNamespaces({ prefix: ["users"], maxDepth: 2 });
check(JSON.stringify(ns.namespaces) === JSON.stringify([["users", "anna"], ["users", "thomas"]]), "store.listNamespaces", ns);
await client.store.deleteItem(["users", "thomas", "facts"], "trip");
check((await client.store.getItem(["users", "thomas", "facts"], "trip")) === null, "store.deleteItem removes the item");
let badStore = null;
try {
  await client.store.putItem([], "k", { a: 1 });
} catch (e) {
  badStore = e;
}
check(badStore && badStore.status === 422 && /namespace/.test(String(badStore.message)), "an empty namespace is a 422 naming it", String(badStore));

// For restart.mjs: the thread a restarted server must find again.
if (process.argv[3]) (await import("node:fs")).writeFileSync(process.argv[3], thread.thread_id);
console.log(`sdk flow: ${checks()} checks passed against ${apiUrl}`);
