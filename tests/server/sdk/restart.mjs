// After `global_supervisor serve` stopped on SIGTERM and started again on the same database, the
// SDK finds the thread of flow.mjs again, with its state, and runs on it.
//
//   flow.mjs (thread T, state edited) ─► SIGTERM (drain, exit 0) ─► serve again ─► restart.mjs T
//
// usage: node restart.mjs http://127.0.0.1:PORT THREAD_ID
import { Client } from "@langchain/langgraph-sdk";
import { check } from "./checks.mjs";

const [apiUrl, threadId] = process.argv.slice(2);
const client = new Client({ apiUrl, apiKey: null });
const thread = await client.threads.get(threadId);
check(thread.status === "idle", "the thread is found again, idle", thread.status);
check(thread.metadata.graph_id === "global_supervisor", "its graph", thread.metadata);
const state = await client.threads.getState(threadId);
check(state.values.response.reply === "edited by the SDK test", "its state", state.values.response);
const found = await client.threads.search({ metadata: { graph_id: "global_supervisor" }, limit: 100 });
check(found.some((t) => t.thread_id === threadId), "threads.search lists it");
const next = await client.runs.wait(threadId, "global_supervisor", { input: { user_message: "What does Thomas like?" } });
check(next.chat_id === threadId && next.reply.length > 0, "a new turn on it", next);
check((await client.threads.getState(threadId)).values.conversation.turn > 1, "a later turn of the thread");
console.log(`sdk restart: thread ${threadId} found again after SIGTERM and a restart`);
