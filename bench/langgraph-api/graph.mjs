// The benchmark supervisor graph (bench/langgraphjs/lib/supervisor.mjs, the one the LangGraph.js
// "supervisor" scenario runs), exported for @langchain/langgraph-api: the server gives it its own
// in-memory checkpointer, as `langgraph dev` does.
//
//   server.mjs --startServer({graphs: {supervisor: "graph.mjs:graph"}})--> graph (22 nodes)
import { buildSupervisor } from "../langgraphjs/lib/supervisor.mjs";

export const graph = buildSupervisor();
