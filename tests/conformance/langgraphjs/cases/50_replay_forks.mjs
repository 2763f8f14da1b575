// Case 50 (issue 12, fix 1): invoking with the checkpoint_id of an earlier checkpoint forks.
import { StateGraph, Annotation, START, END, MemorySaver } from "@langchain/langgraph";
import { Recording } from "./_harness.mjs";

const rec = new Recording(
  "50_replay_forks",
  `State: "value" (last-value string, default "") and "log" (list, reducer concat, default []).
   Nodes "a", "b", "c": each bumps side counter <name> and returns {value: state.value + <name>,
   log: [<name>]}. Edges: START -> a -> b -> c -> END. Checkpointer: MemorySaver. Thread "t".
   Run 0: invoke {value: "x"}: a, b, c run in steps 1..3; value "xabc". Run 1: getStateHistory
   (result = every checkpoint newest first: checkpoint_id, parent_checkpoint_id, step, source,
   values, next): input (-1, next ["__start__"]), 0, 1 (after a, next ["b"]), 2, 3.
   Run 2: invoke with input null and checkpoint_id = the step-1 checkpoint (after a, next ["b"],
   <checkpoint:3> in this file): LangGraph first writes a copy of that checkpoint with source
   "fork", step 2, parent = the step-1 checkpoint, then runs b (step 3) and c (step 4) under it;
   a does not run again. Run 3: getStateHistory: 8 checkpoints, the fork among them.
   Run 4: invoke with input null and checkpoint_id = the thread's newest checkpoint (the end of
   the replayed branch, next []): nothing runs and no fork is written (history still 8).`
);

const State = Annotation.Root({
  value: Annotation({ reducer: (_, b) => b, default: () => "" }),
  log: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }),
});
const letter = (n) => (s) => {
  rec.count(n);
  return { value: s.value + n, log: [n] };
};
const graph = new StateGraph(State)
  .addNode("a", letter("a")).addNode("b", letter("b")).addNode("c", letter("c"))
  .addEdge(START, "a").addEdge("a", "b").addEdge("b", "c").addEdge("c", END)
  .compile({ checkpointer: new MemorySaver() });

const t = { configurable: { thread_id: "t" } };
await rec.invoke(graph, { value: "x" }, t, { label: "run to the end" });
const h = await rec.history(graph, t, { label: "history before the replay" });
const afterA = h.find((c) => c.step === 1).checkpoint_id;
await rec.invoke(graph, null, { configurable: { thread_id: "t", checkpoint_id: afterA } }, { label: "replay from the checkpoint after a: forks" });
const h2 = await rec.history(graph, t, { label: "history after the replay" });
await rec.invoke(graph, null, { configurable: { thread_id: "t", checkpoint_id: h2[0].checkpoint_id } }, { label: "continue from the newest checkpoint: no fork" });
rec.print();
