// Case 53 (issue 12, fix 4): the __interrupt__ update of interruptAfter belongs to the step that ran.
import { StateGraph, Annotation, START, END, MemorySaver } from "@langchain/langgraph";
import { Recording } from "./_harness.mjs";

const rec = new Recording(
  "53_interrupt_after",
  `State: "trail" (list, reducer concat, default []). Nodes "a", "b", "c": each bumps side
   counter <name> and returns {trail: [<name>]}. Edges: START -> a -> b -> c -> END. Compiled with
   interruptAfter: ["a"]. Checkpointer: MemorySaver. Thread "t". Run 0: invoke {trail: []}: a runs
   in step 1 and the run stops after it; the update events are a's update and then
   {"__interrupt__": []}, both labelled step 1 (the interrupt belongs to the step that ran, not to
   step 2); the result carries "__interrupt__": [] and the state is the step-1 checkpoint with next
   ["b"] (task b, no interrupts). Run 1: invoke null: b (step 2) and c (step 3) run; the breakpoint
   is not hit again. Run 2: invoke {trail: ["again"]} on the finished thread: input step 4,
   applied step 5, a runs in step 6 and the run stops after it again (the __interrupt__ event is
   labelled step 6).`
);

const State = Annotation.Root({ trail: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }) });
const node = (n) => () => {
  rec.count(n);
  return { trail: [n] };
};
const graph = new StateGraph(State)
  .addNode("a", node("a")).addNode("b", node("b")).addNode("c", node("c"))
  .addEdge(START, "a").addEdge("a", "b").addEdge("b", "c").addEdge("c", END)
  .compile({ checkpointer: new MemorySaver(), interruptAfter: ["a"] });

const t = { configurable: { thread_id: "t" } };
await rec.invoke(graph, { trail: [] }, t, { label: "stops after a" });
await rec.invoke(graph, null, t, { label: "continue with null input" });
await rec.invoke(graph, { trail: ["again"] }, t, { label: "new input: stops after a again" });
rec.print();
