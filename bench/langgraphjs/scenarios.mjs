// The benchmark scenarios, LangGraph.js side. Trivial node bodies, a fresh
// thread id for every invoke. run.mjs drives them: warm-up runs, then timed
// runs; each run returns one sample per metric.
//
// A scenario is {checkpointers, warmup, targetSeconds, minRuns, maxRuns,
// metrics: [[name, unit]], setup(ctx) -> {run() -> {metric: value}, finish?()
// -> {metric: value}, detail?() -> object, close?()}}.
// ctx = {kind, cp (a checkpointer from lib/checkpointers.mjs, made by run.mjs),
// makeCp() (another one of the same kind), invokeConfig(threadId), smoke}.

import { Annotation, Command, END, START, StateGraph, interrupt } from "@langchain/langgraph";
import { CHECKPOINTERS, SERVER_CHECKPOINTERS, storedBytes } from "./lib/checkpointers.mjs";
import {
  BLOCKING_ANSWER,
  BLOCKING_MESSAGE,
  COMPLEX_MESSAGE,
  buildSupervisor,
  checkBlockingEnd,
  checkBlockingInterrupt,
  checkComplexResult,
  turnInput,
  validateSupervisor,
} from "./lib/supervisor.mjs";
import { check, freshThread, now, sameList, us } from "./lib/util.mjs";

const WITH_SAVER = CHECKPOINTERS.filter((c) => c !== "none");

// ---- chains: START -> n1 -> ... -> nN -> END --------------------------------
// count keeps the last value, log appends; each node adds 1 to count and
// appends its own name. The "big" variant adds payload, a 1 MB string that no
// node touches.

const ChainState = Annotation.Root({
  count: Annotation(),
  log: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }),
});
const BigChainState = Annotation.Root({
  count: Annotation(),
  log: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }),
  payload: Annotation(),
});
const MB = 1 << 20;

export const chainNames = (n) => Array.from({ length: n }, (_, i) => `n${i + 1}`);

export function buildChain(n, saver, state = ChainState) {
  let g = new StateGraph(state);
  const names = chainNames(n);
  for (const name of names) g = g.addNode(name, (s) => ({ count: s.count + 1, log: [name] }));
  g = g.addEdge(START, names[0]);
  for (let i = 1; i < n; i++) g = g.addEdge(names[i - 1], names[i]);
  g = g.addEdge(names[n - 1], END);
  return g.compile(saver ? { checkpointer: saver } : {});
}

function checkChain(r, n) {
  check(r.count === n, `chain${n}: count = ${n} (got ${r.count})`);
  check(r.log.length === n && r.log[n - 1] === `n${n}`, `chain${n}: log has ${n} entries`);
}

// ---- fanout8: START -> split -> p1..p8 (one superstep) -> join -> END --------
// Plain edges p_i -> join: all eight run in the same superstep, so join runs
// once, in the next one.

const FanState = Annotation.Root({
  log: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }),
});
const FAN = 8;

function buildFanout(saver) {
  const branches = Array.from({ length: FAN }, (_, i) => `p${i + 1}`);
  let g = new StateGraph(FanState).addNode("split", () => ({ log: ["split"] }));
  for (const b of branches) g = g.addNode(b, () => ({ log: [b] }));
  g = g.addNode("join", (s) => ({ log: [`join saw ${s.log.length}`] }));
  g = g.addEdge(START, "split");
  for (const b of branches) g = g.addEdge("split", b).addEdge(b, "join");
  g = g.addEdge("join", END);
  return g.compile(saver ? { checkpointer: saver } : {});
}

// ---- hitl: START -> prep -> ask (interrupt) -> done -> END -------------------

const HitlState = Annotation.Root({
  question: Annotation(),
  answer: Annotation(),
  log: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }),
});

function buildHitl(saver) {
  return new StateGraph(HitlState)
    .addNode("prep", () => ({ log: ["prep"] }))
    .addNode("ask", (s) => ({ answer: interrupt(s.question), log: ["ask"] }))
    .addNode("done", (s) => ({ log: [`done:${s.answer}`] }))
    .addEdge(START, "prep")
    .addEdge("prep", "ask")
    .addEdge("ask", "done")
    .addEdge("done", END)
    .compile({ checkpointer: saver });
}

/** Run fn(i) for i in 0..total-1 with at most `inflight` running at once. */
async function pool(total, inflight, fn) {
  let next = 0;
  const worker = async () => {
    while (next < total) await fn(next++);
  };
  await Promise.all(Array.from({ length: Math.min(inflight, total) }, worker));
}

// ---- the scenarios ------------------------------------------------------------

export const SCENARIOS = {
  durability: {
    // chain20 in each durability mode (invoke's `durability`), one invoke of
    // each per run, each on a fresh thread; the C++ side does the same with
    // run_config::durability.
    checkpointers: ["memory", "sqlite_normal"],
    warmup: 20,
    targetSeconds: 6,
    minRuns: 20,
    maxRuns: 5000,
    metrics: [
      ["us_per_node_sync", "us"],
      ["us_per_node_async", "us"],
      ["us_per_node_exit", "us"],
    ],
    async setup(ctx) {
      const graph = buildChain(20, ctx.cp.saver);
      const modes = ["sync", "async", "exit"];
      const stored = {};
      for (const mode of modes) {
        // untimed: the checkpoints one invoke stores in each mode
        const t = freshThread(`durability-${mode}`);
        checkChain(await graph.invoke({ count: 0 }, { ...ctx.invokeConfig(t), durability: mode }), 20);
        let n = 0;
        for await (const _ of ctx.cp.saver.list({ configurable: { thread_id: t } })) n++;
        stored[mode] = n;
      }
      return {
        async run() {
          const out = {};
          for (const mode of modes) {
            const cfg = { ...ctx.invokeConfig(freshThread(`durability-${mode}`)), durability: mode };
            const t0 = now();
            const r = await graph.invoke({ count: 0 }, cfg);
            const t1 = now();
            checkChain(r, 20);
            out[`us_per_node_${mode}`] = us(t0, t1) / 20;
          }
          return out;
        },
        detail: () => ({ checkpoints_per_invoke: stored }),
      };
    },
  },

  chain20: {
    checkpointers: [...CHECKPOINTERS, ...SERVER_CHECKPOINTERS],
    warmup: 50,
    targetSeconds: 4,
    minRuns: 30,
    maxRuns: 20000,
    metrics: [["us_per_node", "us"]],
    async setup(ctx) {
      const graph = buildChain(20, ctx.cp.saver);
      return {
        async run() {
          const t = freshThread("chain20");
          const cfg = ctx.invokeConfig(t);
          const t0 = now();
          const r = await graph.invoke({ count: 0 }, cfg);
          const t1 = now();
          checkChain(r, 20);
          return { us_per_node: us(t0, t1) / 20 };
        },
      };
    },
  },

  // chain20 streamed in "values" mode: the whole state after each step.
  chain20_values: {
    checkpointers: ["none", "memory"],
    warmup: 50,
    targetSeconds: 4,
    minRuns: 30,
    maxRuns: 20000,
    metrics: [["us_per_node", "us"], ["us_per_node_1mb_untouched", "us"]],
    async setup(ctx) {
      const graph = buildChain(20, ctx.cp.saver);
      const big = buildChain(20, ctx.cp.saver, BigChainState);
      const payload = "x".repeat(MB);
      const once = async (g, input) => {
        const cfg = { ...ctx.invokeConfig(freshThread("chain_values")), streamMode: "values" };
        let events = 0;
        let last;
        const t0 = now();
        for await (const chunk of await g.stream(input, cfg)) {
          events += 1;
          last = chunk;
        }
        const t1 = now();
        checkChain(last, 20);
        check(events === 21 && last.log.length === 20, `chain20_values: one values event per step with the whole log (got ${events})`);
        return us(t0, t1) / 20;
      };
      return {
        async run() {
          return {
            us_per_node: await once(graph, { count: 0 }),
            us_per_node_1mb_untouched: await once(big, { count: 0, payload }),
          };
        },
      };
    },
  },

  fanout8: {
    checkpointers: CHECKPOINTERS,
    warmup: 50,
    targetSeconds: 4,
    minRuns: 30,
    maxRuns: 20000,
    metrics: [["us_per_invoke", "us"]],
    async setup(ctx) {
      const graph = buildFanout(ctx.cp.saver);
      return {
        async run() {
          const cfg = ctx.invokeConfig(freshThread("fanout8"));
          const t0 = now();
          const r = await graph.invoke({ log: [] }, cfg);
          const t1 = now();
          check(r.log.length === FAN + 2 && r.log[FAN + 1] === `join saw ${FAN + 1}`, "fanout8: join ran once and saw split + 8 branches");
          return { us_per_invoke: us(t0, t1) };
        },
      };
    },
  },

  hitl: {
    checkpointers: WITH_SAVER,
    warmup: 50,
    targetSeconds: 4,
    minRuns: 30,
    maxRuns: 20000,
    metrics: [
      ["us_to_interrupt", "us"],
      ["us_resume_to_end", "us"],
    ],
    async setup(ctx) {
      const graph = buildHitl(ctx.cp.saver);
      return {
        async run() {
          const cfg = ctx.invokeConfig(freshThread("hitl"));
          const t0 = now();
          const r1 = await graph.invoke({ question: "continue?" }, cfg);
          const t1 = now();
          check(r1.__interrupt__?.[0]?.value === "continue?", "hitl: invoke stopped at the interrupt");
          const t2 = now();
          const r2 = await graph.invoke(new Command({ resume: "yes" }), cfg);
          const t3 = now();
          sameList(r2.log, ["prep", "ask", "done:yes"], "hitl: log after resume");
          return { us_to_interrupt: us(t0, t1), us_resume_to_end: us(t2, t3) };
        },
      };
    },
  },

  throughput: {
    // One run = one batch: THREADS invokes of a 10-node chain, each on its own
    // thread, INFLIGHT at a time, on a fresh checkpointer (a fresh SQLite file).
    // Warm-up is one smaller batch; the default is 3 timed batches (a batch
    // already averages over 2,000 runs), not a time-based count.
    checkpointers: CHECKPOINTERS,
    warmup: 1,
    defaultRuns: 3,
    metrics: [
      ["runs_per_s", "1/s"],
      ["nodes_per_s", "1/s"],
      ["peak_rss_mb", "MB"],
    ],
    async setup(ctx) {
      const threads = ctx.smoke ? 80 : 2000;
      const inflight = 64;
      const nodes = 10;
      const batch = async (n) => {
        const cp = ctx.makeCp();
        try {
          const graph = buildChain(nodes, cp.saver);
          let done = 0;
          const t0 = now();
          await pool(n, inflight, async () => {
            const r = await graph.invoke({ count: 0 }, ctx.invokeConfig(freshThread("tp")));
            if (r.count === nodes) done++;
          });
          const t1 = now();
          check(done === n, `throughput: all ${n} runs finished (got ${done})`);
          const s = us(t0, t1) / 1e6;
          return { runs_per_s: n / s, nodes_per_s: (n * nodes) / s };
        } finally {
          cp.close();
        }
      };
      return {
        run: () => batch(threads),
        warmupRun: () => batch(Math.min(threads, 256)),
        finish() {
          // maxRSS is in kilobytes; peak of the whole process.
          return { peak_rss_mb: process.resourceUsage().maxRSS / 1024 };
        },
        detail: () => ({ threads, inflight, nodes_per_run: nodes }),
      };
    },
  },

  supervisor: {
    // One run = one complex turn and one blocking turn (interrupt, then
    // resume), each on a fresh thread. Without a checkpointer only the
    // complex turn can run (interrupt() needs one).
    checkpointers: [...CHECKPOINTERS, ...SERVER_CHECKPOINTERS],
    warmup: 20,
    targetSeconds: 5,
    minRuns: 20,
    maxRuns: 5000,
    metrics: [
      ["us_complex_turn", "us"],
      ["us_blocking_turn", "us"],
    ],
    metricsFor: (kind) => (kind === "none" ? [["us_complex_turn", "us"]] : null),
    async setup(ctx) {
      const graph = buildSupervisor(ctx.cp.saver);
      const hasSaver = !!ctx.cp.saver;
      await validateSupervisor(graph, hasSaver, freshThread("sup"));
      return {
        async run() {
          const out = {};
          let t = freshThread("sup-complex");
          let cfg = ctx.invokeConfig(t);
          let t0 = now();
          const rc = await graph.invoke(turnInput(COMPLEX_MESSAGE, t), cfg);
          let t1 = now();
          checkComplexResult(rc);
          out.us_complex_turn = us(t0, t1);
          if (!hasSaver) return out;

          t = freshThread("sup-blocking");
          cfg = ctx.invokeConfig(t);
          t0 = now();
          const ri = await graph.invoke(turnInput(BLOCKING_MESSAGE, t), cfg);
          t1 = now();
          checkBlockingInterrupt(ri);
          const t2 = now();
          const rr = await graph.invoke(new Command({ resume: BLOCKING_ANSWER }), cfg);
          const t3 = now();
          checkBlockingEnd(rr);
          out.us_blocking_turn = us(t0, t1) + us(t2, t3);
          return out;
        },
        detail: () => ({ validated: "complex, blocking and checked-only paths, checkpoint counts 23/14/16" }),
      };
    },
  },

  checkpoint_size: {
    // One run = one chain20 invoke and one chain20 invoke whose state holds a
    // 1 MB string that no node touches, each on a fresh thread. Bytes stored =
    // serialized checkpoints + their metadata + pending-write values (blob
    // lengths, no keys), divided by the number of checkpoints of the thread.
    checkpointers: WITH_SAVER,
    warmup: 1,
    targetSeconds: 2,
    minRuns: 5,
    maxRuns: 20,
    metrics: [
      ["bytes_per_checkpoint_chain20", "bytes"],
      ["bytes_per_checkpoint_1mb_untouched", "bytes"],
    ],
    async setup(ctx) {
      const saver = ctx.cp.saver;
      const small = buildChain(20, saver);
      const big = buildChain(20, saver, BigChainState);
      const payload = "x".repeat(MB);
      let last = {};
      const measure = async (graph, input, key) => {
        const t = freshThread("size");
        const r = await graph.invoke(input, ctx.invokeConfig(t));
        checkChain(r, 20);
        const b = storedBytes(ctx.cp, t);
        check(b.checkpoints === 22, `${key}: 22 checkpoints per chain20 thread (got ${b.checkpoints})`);
        await saver.deleteThread(t);
        last[key] = b;
        return (b.checkpoint_bytes + b.metadata_bytes + b.writes_bytes) / b.checkpoints;
      };
      return {
        async run() {
          const a = await measure(small, { count: 0 }, "chain20");
          const b = await measure(big, { count: 0, payload }, "chain20_1mb_untouched");
          return { bytes_per_checkpoint_chain20: a, bytes_per_checkpoint_1mb_untouched: b };
        },
        detail: () => ({ payload_bytes: MB, last_run: last }),
      };
    },
  },
};
