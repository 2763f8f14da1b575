// Case 55 (README difference 6): are saved writes streamed as cached events on a plain continue?
import { StateGraph, Annotation, START, END, MemorySaver, interrupt } from "@langchain/langgraph";
import { Recording } from "./_harness.mjs";

const rec = new Recording(
  "55_cached_writes_on_continue",
  `State: "log" (list, reducer concat, default []). Checkpointer: MemorySaver, pending writes
   recorded after each call. Graph "fail": nodes "a" bumps "fail.a" and returns {log: ["a"]};
   "b" bumps "fail.b" (attempt n) and throws an Error with message "b failed" on attempt 1,
   returns {log: ["b"]} from attempt 2 on; "c" returns {log: ["c"]}. Edges: START -> a, START ->
   b (step 1), a -> c, b -> c, c -> END. No retry policy. Thread "fail": run 0 invoke {log: []}:
   a finishes (its write is kept as a pending write), b fails, the call throws "b failed". Run 1:
   invoke null (a plain continue, no Command): a is not re-run and its saved write IS streamed
   again as an update event with "__metadata__": {"cached": true}; b runs (attempt 2), then c.
   Graph "interrupt": same shape but "b" bumps "interrupt.b" and calls interrupt("b?"), returning
   {log: ["b=" + answer]}. Thread "interrupt": run 2 invoke {log: []}: a finishes, b interrupts.
   Run 3: invoke null (plain continue while an interrupt is pending, no resume value): a's saved
   write is streamed as a cached update event, b runs again and interrupts again (same question).`
);

const State = Annotation.Root({ log: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }) });
const build = (name, b) =>
  new StateGraph(State)
    .addNode("a", () => {
      rec.count(`${name}.a`);
      return { log: ["a"] };
    })
    .addNode("b", b)
    .addNode("c", () => ({ log: ["c"] }))
    .addEdge(START, "a").addEdge(START, "b").addEdge("a", "c").addEdge("b", "c").addEdge("c", END)
    .compile({ checkpointer: new MemorySaver() });

const failing = build("fail", () => {
  if (rec.count("fail.b") === 1) throw new Error("b failed");
  return { log: ["b"] };
});
const asking = build("interrupt", () => {
  rec.count("interrupt.b");
  return { log: [`b=${interrupt("b?")}`] };
});

const o = { pendingWrites: true };
const tf = { configurable: { thread_id: "fail" } };
await rec.invoke(failing, { log: [] }, tf, { ...o, graph: "fail", label: "a finishes, b fails" });
await rec.invoke(failing, null, tf, { ...o, graph: "fail", label: "plain continue: a's saved write streamed as cached" });
const ti = { configurable: { thread_id: "interrupt" } };
await rec.invoke(asking, { log: [] }, ti, { ...o, graph: "interrupt", label: "a finishes, b interrupts" });
await rec.invoke(asking, null, ti, { ...o, graph: "interrupt", label: "plain continue: a cached, b interrupts again" });
rec.print();
