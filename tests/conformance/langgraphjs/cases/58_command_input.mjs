// Case 58 (issue 27, item 3): a Command as a call's input: update, goto and resume, alone and together.
import { StateGraph, Annotation, START, END, MemorySaver, Command, interrupt } from "@langchain/langgraph";
import { Recording } from "./_harness.mjs";

const rec = new Recording(
  "58_command_input",
  `State: "trail" (list, reducer concat, default []), "note" (string, last value, default "").
   Nodes: "a", "c", "d" each bump side counter <name> and return {trail: [<name>]}; "b" bumps
   counter b, calls interrupt("ask") and returns {trail: ["b:" + answer], note: answer}.
   Edges: START -> a; a -> a router that always answers "b" (its possible targets "b" and "d",
   so that d is reachable); b -> c -> END; d -> END (d is reached only by a goto).
   Checkpointer: MemorySaver.
   Thread "t1": run 0 invoke {trail: []}: a runs, b interrupts. Run 1: invoke Command {resume: "yes",
   update: {note: "from-command", trail: ["u"]}}: the update is applied before b runs again (it sees
   the resume value), b and c finish. Run 2: invoke Command {goto: "d", update: {trail: ["jump"]}}
   on the finished thread: the update is applied and d runs, then END. Run 3: invoke Command
   {goto: ["a", "d"]}: a and d run in one step, then b interrupts (a -> b). Run 4: invoke Command
   {update: {note: "only-update"}} while b waits: the update is applied, b runs again and interrupts
   again. Run 5: invoke Command {resume: "ok", goto: "d"}: b finishes and d runs beside c's step.
   Thread "t2" (new): run 6 invoke Command {goto: "c", update: {trail: ["fresh"]}} on a thread with no
   checkpoint. Thread "t3" (new): run 7 invoke Command {update: {trail: ["only"]}} on a thread with no
   checkpoint.`
);

const State = Annotation.Root({
  trail: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }),
  note: Annotation({ reducer: (_a, b) => b, default: () => "" }),
});
const node = (n) => () => {
  rec.count(n);
  return { trail: [n] };
};
const graph = new StateGraph(State)
  .addNode("a", node("a"))
  .addNode("b", () => {
    rec.count("b");
    const answer = interrupt("ask");
    return { trail: ["b:" + answer], note: answer };
  })
  .addNode("c", node("c"))
  .addNode("d", node("d"))
  .addEdge(START, "a").addConditionalEdges("a", () => "b", ["b", "d"]).addEdge("b", "c").addEdge("c", END).addEdge("d", END)
  .compile({ checkpointer: new MemorySaver() });

const t1 = { configurable: { thread_id: "t1" } };
await rec.invoke(graph, { trail: [] }, t1, { label: "a runs, b interrupts" });
await rec.invoke(graph, new Command({ resume: "yes", update: { note: "from-command", trail: ["u"] } }), t1, {
  label: "resume and update together",
});
await rec.invoke(graph, new Command({ goto: "d", update: { trail: ["jump"] } }), t1, {
  label: "goto and update on a finished thread",
});
await rec.invoke(graph, new Command({ goto: ["a", "d"] }), t1, { label: "goto two nodes" });
await rec.invoke(graph, new Command({ update: { note: "only-update" } }), t1, {
  label: "update alone while an interrupt waits",
});
await rec.invoke(graph, new Command({ resume: "ok", goto: "d" }), t1, { label: "resume and goto" });
await rec.invoke(graph, new Command({ goto: "c", update: { trail: ["fresh"] } }), { configurable: { thread_id: "t2" } }, {
  label: "goto on a new thread",
});
await rec.invoke(graph, new Command({ update: { trail: ["only"] } }), { configurable: { thread_id: "t3" } }, {
  label: "update alone on a new thread",
});
rec.print();
