// Case 59 (issue 27, item 3): Command.PARENT from a subgraph's node, a handoff to a sibling of the
// subgraph node in the parent graph.
import { StateGraph, Annotation, START, END, MemorySaver, Command } from "@langchain/langgraph";
import { Recording } from "./_harness.mjs";

const rec = new Recording(
  "59_command_parent",
  `State (parent and subgraph alike): "trail" (list, reducer concat, default []), "note" (string,
   last value, default "").
   Subgraph: START -> s1 -> s2 -> s3 -> END. s1 and s3 bump their counters and return
   {trail: [<name>]}; s2 bumps counter s2 and returns Command({graph: Command.PARENT, goto: "c",
   update: {trail: ["s2-handoff"], note: "from-sub"}}). Compiled without a checkpointer.
   Parent: START -> a -> sub (the subgraph, ends ["c"]) -> b -> END; c -> END. a, b, c bump their
   counters and return {trail: [<name>]}. Checkpointer: MemorySaver.
   Thread "t1": run 0 invoke {trail: []}: a runs, then sub: s1 runs, s2 hands off to the parent
   (s3 never runs; s1's write is dropped, the parent takes the command's update as sub's writes),
   then b (sub's edge) and c (the goto) run in one step.`
);

const State = Annotation.Root({
  trail: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }),
  note: Annotation({ reducer: (_a, b) => b, default: () => "" }),
});
const node = (n) => () => {
  rec.count(n);
  return { trail: [n] };
};
const sub = new StateGraph(State)
  .addNode("s1", node("s1"))
  .addNode("s2", () => {
    rec.count("s2");
    return new Command({ graph: Command.PARENT, goto: "c", update: { trail: ["s2-handoff"], note: "from-sub" } });
  })
  .addNode("s3", node("s3"))
  .addEdge(START, "s1").addEdge("s1", "s2").addEdge("s2", "s3").addEdge("s3", END)
  .compile();
const graph = new StateGraph(State)
  .addNode("a", node("a"))
  .addNode("sub", sub, { ends: ["c"] })
  .addNode("b", node("b"))
  .addNode("c", node("c"))
  .addEdge(START, "a").addEdge("a", "sub").addEdge("sub", "b").addEdge("b", END).addEdge("c", END)
  .compile({ checkpointer: new MemorySaver() });

await rec.invoke(graph, { trail: [] }, { configurable: { thread_id: "t1" } }, { label: "s2 hands off to c" });
rec.print();
