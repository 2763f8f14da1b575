// Case 52 (issue 12, fix 3): the input checkpoint holds the input; replaying from it runs the graph again.
import { StateGraph, Annotation, START, END, MemorySaver } from "@langchain/langgraph";
import { Recording } from "./_harness.mjs";

const rec = new Recording(
  "52_replay_input_checkpoint",
  `State: "value" (last-value string, default "") and "log" (list, reducer concat, default []).
   Nodes "a" and "b": each bumps side counter <name> and returns {value: state.value + <name>,
   log: [<name>]}. Edges: START -> a -> b -> END. Checkpointer: MemorySaver. Thread "t".
   Run 0: invoke {value: "in", log: ["in"]}: value "inab", log ["in", "a", "b"]. Run 1:
   getStateHistory (every checkpoint newest first: checkpoint_id, parent_checkpoint_id, step,
   source, values, next): the oldest checkpoint is the input checkpoint, step -1, source "input",
   values at their defaults (the input is not applied yet) and next ["__start__"].
   Run 2: invoke with input null and checkpoint_id = the input checkpoint: a fork of it is
   written (source "fork", step 0), the saved input is applied again (step 1, the __start__ task:
   value "in", log ["in"]) and a (step 2) and b (step 3) run again. Run 3: getStateHistory.`
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
  .addNode("a", letter("a")).addNode("b", letter("b"))
  .addEdge(START, "a").addEdge("a", "b").addEdge("b", END)
  .compile({ checkpointer: new MemorySaver() });

const t = { configurable: { thread_id: "t" } };
await rec.invoke(graph, { value: "in", log: ["in"] }, t, { label: "run to the end" });
const h = await rec.history(graph, t, { label: "history: the input checkpoint is next __start__" });
const input = h.find((c) => c.step === -1).checkpoint_id;
await rec.invoke(graph, null, { configurable: { thread_id: "t", checkpoint_id: input } }, { label: "replay from the input checkpoint" });
await rec.history(graph, t, { label: "history after the replay" });
rec.print();
