// Case 57 (issue 12, fix 5): the order of getState's tasks when a step has Sends and triggered nodes.
import { StateGraph, Annotation, START, END, MemorySaver, Command, Send, interrupt } from "@langchain/langgraph";
import { Recording } from "./_harness.mjs";

const rec = new Recording(
  "57_tasks_order_with_sends",
  `State: "log" (list, reducer concat, default []). Nodes, declared in this order: "fan" returns {}
   (no write); "zeta" returns {log: ["zeta"]}; "worker" receives the Send payload {item} (a string
   item; not the state), bumps side counter "worker.<item>", calls answer = interrupt("check " +
   item) and returns {log: [item + ":" + answer]}; "alpha" returns {log: ["alpha"]}. Edges: START ->
   fan; fan -> zeta and fan -> alpha (static edges); a conditional edge from fan returning
   [Send("worker", {item: "w1"}), Send("worker", {item: "w2"})] (path map ["worker"]); zeta, worker
   and alpha -> END. Checkpointer: MemorySaver. Thread "t". Run 0: invoke {log: []}: fan runs in
   step 1; in step 2 zeta and alpha finish and both workers interrupt ("check w1", "check w2");
   getState's tasks list the two Send tasks first (worker w1, worker w2, in Send order), then the
   triggered nodes in declaration order (zeta, alpha); next is ["worker", "worker"] (one entry per
   task, Sends included). Run 1: invoke Command({resume: "ok"}) (one plain value resumes both
   interrupts): step 2 completes; writes are applied triggered nodes first by name (alpha, zeta),
   then the Sends in order: log ["alpha", "zeta", "w1:ok", "w2:ok"].`
);

const State = Annotation.Root({ log: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }) });
const graph = new StateGraph(State)
  .addNode("fan", () => ({}))
  .addNode("zeta", () => ({ log: ["zeta"] }))
  .addNode("worker", ({ item }) => {
    rec.count(`worker.${item}`);
    const answer = interrupt(`check ${item}`);
    return { log: [`${item}:${answer}`] };
  })
  .addNode("alpha", () => ({ log: ["alpha"] }))
  .addEdge(START, "fan")
  .addEdge("fan", "zeta").addEdge("fan", "alpha")
  .addConditionalEdges("fan", () => [new Send("worker", { item: "w1" }), new Send("worker", { item: "w2" })], ["worker"])
  .addEdge("zeta", END).addEdge("worker", END).addEdge("alpha", END)
  .compile({ checkpointer: new MemorySaver() });

const t = { configurable: { thread_id: "t" } };
await rec.invoke(graph, { log: [] }, t, { label: "workers interrupt, zeta and alpha finish" });
await rec.invoke(graph, new Command({ resume: "ok" }), t, { label: "resume both with one value" });
rec.print();
