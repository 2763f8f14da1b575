// Case 54 (issue 12, fix 5, and README difference 3): a node with two interrupt() calls, resumed once.
import { StateGraph, Annotation, START, END, MemorySaver, Command, interrupt } from "@langchain/langgraph";
import { Recording } from "./_harness.mjs";

const rec = new Recording(
  "54_two_interrupts_one_node",
  `State: "log" (list, reducer concat, default []). Nodes, declared in this order: "form" bumps
   side counter "form.start", calls name = interrupt("name?"), bumps "form.name", calls
   age = interrupt("age?"), bumps "form.age" and returns {log: ["form=" + name + "/" + age]};
   "audit" bumps "audit" and returns {log: ["audit"]} (no interrupt); "after" returns
   {log: ["after"]}. Note the declaration order (form before audit) is not the name order.
   Edges: START -> form, START -> audit (both in step 1); form -> after, audit -> after; after ->
   END. Checkpointer: MemorySaver. Thread "t", with pending writes recorded after each call.
   Run 0: invoke {log: []}: audit finishes (its write is kept as a pending write), form interrupts
   with "name?"; state.tasks lists form (interrupts ["name?"]) then audit (result {log: ["audit"]})
   in declaration order, and next is ["form"] (audit has finished). Run 1: invoke
   Command({resume: "ann"}): form runs again from its start, its first interrupt returns "ann",
   the second interrupts with "age?" (a new interrupt id: the two interrupts of one task have
   different ids); audit is not re-run, its saved write comes back as a cached update event; the
   state's next is [] (form holds a saved resume value and is left out of next, though step 1 is
   still unfinished), tasks form (interrupts ["age?"]) and audit. Run 2: invoke
   Command({resume: 41}): form completes (log entry "form=ann/41"), after runs in step 2.`
);

const State = Annotation.Root({ log: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }) });
const graph = new StateGraph(State)
  .addNode("form", () => {
    rec.count("form.start");
    const name = interrupt("name?");
    rec.count("form.name");
    const age = interrupt("age?");
    rec.count("form.age");
    return { log: [`form=${name}/${age}`] };
  })
  .addNode("audit", () => {
    rec.count("audit");
    return { log: ["audit"] };
  })
  .addNode("after", () => ({ log: ["after"] }))
  .addEdge(START, "form").addEdge(START, "audit")
  .addEdge("form", "after").addEdge("audit", "after").addEdge("after", END)
  .compile({ checkpointer: new MemorySaver() });

const t = { configurable: { thread_id: "t" } };
const o = { pendingWrites: true };
await rec.invoke(graph, { log: [] }, t, { ...o, label: "form asks for the name, audit finishes" });
await rec.invoke(graph, new Command({ resume: "ann" }), t, { ...o, label: "resume once: form asks for the age" });
await rec.invoke(graph, new Command({ resume: 41 }), t, { ...o, label: "resume again: form finishes, after runs" });
rec.print();
