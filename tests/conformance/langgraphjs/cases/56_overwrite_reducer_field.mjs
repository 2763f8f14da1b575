// Case 56 (issue 12, feature 10): Overwrite on a reducer field replaces the value instead of reducing.
import { StateGraph, Annotation, START, END, MemorySaver, Overwrite } from "@langchain/langgraph";
import { Recording } from "./_harness.mjs";

const rec = new Recording(
  "56_overwrite_reducer_field",
  `State: "log" (list, reducer concat, default []). Overwrite(v) (exported by @langchain/langgraph)
   wraps a value written to a reducer field so that it replaces the field's value instead of
   going through the reducer; in update events and call inputs it is written here as
   {"__overwrite__": v}. Checkpointer: MemorySaver; every graph runs on its own thread.
   Graph "chain": nodes "a" returns {log: ["a"]}, "reset" returns {log: Overwrite(["reset"])},
   "c" returns {log: ["c"]}; edges START -> a -> reset -> c -> END. Thread "chain", run 0: invoke
   {log: ["in"]}: after a ["in", "a"], after reset ["reset"], after c ["reset", "c"].
   Graph "input": node "a" returns {log: ["a"]}; edges START -> a -> END. Thread "input":
   run 1 invoke {log: ["x"]}: ["x", "a"]; run 2 invoke with input {log: Overwrite(["fresh"])}
   (a new turn resets the field): ["fresh", "a"]; run 3 invoke {log: ["more"]}: appended again,
   ["fresh", "a", "more", "a"].
   Graph "parallel": nodes "m" returns {log: ["m"]}, "p" returns {log: Overwrite(["p"])}, "q"
   returns {log: ["q"]}; edges START -> m, START -> p, START -> q (all in step 1), each -> END.
   Thread "parallel", run 4: invoke {log: ["in"]}: the step's writes are applied in node-name order
   (m, p, q): m's append, then p's Overwrite replaces everything, and q's plain write, coming after
   an Overwrite in the same step, is dropped: the result is ["p"].
   Graph "double": nodes "p" returns {log: Overwrite(["p"])} and "q" returns {log: Overwrite(["q"])},
   edges START -> p, START -> q, each -> END. Thread "double", run 5: invoke {log: ["in"]}: two
   Overwrites of one field in one step are an InvalidUpdateError ("Can receive only one Overwrite
   value per step."), raised when the step is applied; both writes stay saved as pending writes of step 1, so getState on the thread head throws the same error (as in the shared case 03).`
);

const State = Annotation.Root({ log: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }) });
const mem = () => ({ checkpointer: new MemorySaver() });

const chain = new StateGraph(State)
  .addNode("a", () => ({ log: ["a"] }))
  .addNode("reset", () => ({ log: new Overwrite(["reset"]) }))
  .addNode("c", () => ({ log: ["c"] }))
  .addEdge(START, "a").addEdge("a", "reset").addEdge("reset", "c").addEdge("c", END)
  .compile(mem());
const input = new StateGraph(State)
  .addNode("a", () => ({ log: ["a"] }))
  .addEdge(START, "a").addEdge("a", END)
  .compile(mem());
const parallel = new StateGraph(State)
  .addNode("m", () => ({ log: ["m"] }))
  .addNode("p", () => ({ log: new Overwrite(["p"]) }))
  .addNode("q", () => ({ log: ["q"] }))
  .addEdge(START, "m").addEdge(START, "p").addEdge(START, "q")
  .addEdge("m", END).addEdge("p", END).addEdge("q", END)
  .compile(mem());
const double = new StateGraph(State)
  .addNode("p", () => ({ log: new Overwrite(["p"]) }))
  .addNode("q", () => ({ log: new Overwrite(["q"]) }))
  .addEdge(START, "p").addEdge(START, "q").addEdge("p", END).addEdge("q", END)
  .compile(mem());

const th = (id) => ({ configurable: { thread_id: id } });
await rec.invoke(chain, { log: ["in"] }, th("chain"), { graph: "chain", label: "a node overwrites the list" });
await rec.invoke(input, { log: ["x"] }, th("input"), { graph: "input", label: "first turn" });
await rec.invoke(input, { log: new Overwrite(["fresh"]) }, th("input"), { graph: "input", label: "new turn, input overwrites the list" });
await rec.invoke(input, { log: ["more"] }, th("input"), { graph: "input", label: "plain input appends again" });
await rec.invoke(parallel, { log: ["in"] }, th("parallel"), { graph: "parallel", label: "overwrite and appends in one step" });
await rec.invoke(double, { log: ["in"] }, th("double"), { graph: "double", label: "two overwrites in one step" });
rec.print();
