// Case 51 (issue 12, fix 2): replaying from a checkpoint whose next step has several tasks runs them again.
import { StateGraph, Annotation, START, END, MemorySaver } from "@langchain/langgraph";
import { Recording } from "./_harness.mjs";

const rec = new Recording(
  "51_replay_parallel_step",
  `State: "log" (list, reducer concat, default []). Nodes "a", "b", "c": each bumps side counter
   <name> and returns {log: [<name>]}. Edges: START -> a, START -> b, a -> c, b -> c, c -> END
   (a and b run together in step 1, c in step 2). Checkpointer: MemorySaver. Thread "t".
   Run 0: invoke {log: []}: log ["a", "b", "c"]. Run 1: getStateHistory (every checkpoint newest
   first: checkpoint_id, parent_checkpoint_id, step, source, values, next): the step-0 checkpoint
   has next ["a", "b"]. Run 2: invoke with input null and checkpoint_id = the step-0 checkpoint:
   a fork of it is written (source "fork", step 1), then a and b run again (their update events
   are plain, not cached: the writes they saved on the first branch are not reused) in step 2 and
   c in step 3; the side counters show a, b and c started twice. Run 3: getStateHistory.`
);

const State = Annotation.Root({ log: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }) });
const node = (n) => () => {
  rec.count(n);
  return { log: [n] };
};
const graph = new StateGraph(State)
  .addNode("a", node("a")).addNode("b", node("b")).addNode("c", node("c"))
  .addEdge(START, "a").addEdge(START, "b").addEdge("a", "c").addEdge("b", "c").addEdge("c", END)
  .compile({ checkpointer: new MemorySaver() });

const t = { configurable: { thread_id: "t" } };
await rec.invoke(graph, { log: [] }, t, { label: "run to the end" });
const h = await rec.history(graph, t, { label: "history before the replay" });
const start = h.find((c) => c.step === 0).checkpoint_id;
await rec.invoke(graph, null, { configurable: { thread_id: "t", checkpoint_id: start } }, { label: "replay from the step-0 checkpoint (next a, b)" });
await rec.history(graph, t, { label: "history after the replay" });
rec.print();
