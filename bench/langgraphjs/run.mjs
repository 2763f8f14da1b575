#!/usr/bin/env node
// Run ONE benchmark scenario with ONE checkpointer in this process and print
// ONE JSON line on stdout:
//
//   node run.mjs <scenario> <checkpointer> [--runs N] [--warmup N] [--smoke]
//                [--db-dir DIR] [--durability sync|async|exit]
//   node run.mjs --list        # every applicable "<scenario> <checkpointer>" pair
//
// {"scenario","checkpointer","metrics":[{"metric","unit","median","p90","runs"}],
//  "versions":{...},"config":{...},"detail":{...}}
//
// Without --runs the number of timed runs is chosen from the warm-up's speed
// so that the timed part takes about the scenario's targetSeconds.
// --smoke = --runs 2 --warmup 0 (and a smaller throughput batch), for CI.
// Exit status: 0 ok, 1 a check or the run failed, 2 bad arguments.

import { CHECKPOINTERS, SERVER_CHECKPOINTERS, makeCheckpointer } from "./lib/checkpointers.mjs";
import { BenchError, median, now, percentile, us, versions } from "./lib/util.mjs";
import { SCENARIOS } from "./scenarios.mjs";

const USAGE = `usage: node run.mjs <scenario> <checkpointer> [--runs N] [--warmup N] [--smoke] [--db-dir DIR] [--durability sync|async|exit]
       node run.mjs --list
scenarios: ${Object.keys(SCENARIOS).join(", ")}
checkpointers: ${[...CHECKPOINTERS, ...SERVER_CHECKPOINTERS].join(", ")}`;

function usage(msg) {
  if (msg) process.stderr.write(`run.mjs: ${msg}\n`);
  process.stderr.write(`${USAGE}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const o = { positional: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) usage(`${a} needs a value`);
      return argv[++i];
    };
    const count = () => {
      const v = value();
      if (!/^\d+$/.test(v)) usage(`${a} needs a whole number, got "${v}"`);
      return Number(v);
    };
    if (a === "--runs") o.runs = count();
    else if (a === "--warmup") o.warmup = count();
    else if (a === "--smoke") o.smoke = true;
    else if (a === "--list") o.list = true;
    else if (a === "--db-dir") o.dbDir = value();
    else if (a === "--durability") {
      o.durability = value();
      if (!["sync", "async", "exit"].includes(o.durability)) usage(`bad --durability "${o.durability}"`);
    } else if (a === "-h" || a === "--help") {
      process.stdout.write(`${USAGE}\n`);
      process.exit(0);
    } else if (a.startsWith("-")) usage(`unknown option ${a}`);
    else o.positional.push(a);
  }
  return o;
}

const round = (x) => (x == null ? null : Math.round(x * 1000) / 1000);

async function main() {
  const args = parseArgs(process.argv.slice(2));
  if (args.list) {
    for (const [name, s] of Object.entries(SCENARIOS)) for (const c of s.checkpointers) process.stdout.write(`${name} ${c}\n`);
    return;
  }
  if (args.positional.length !== 2) usage("need <scenario> <checkpointer>");
  const [name, kind] = args.positional;
  const scenario = SCENARIOS[name];
  if (!scenario) usage(`unknown scenario "${name}"`);
  if (!CHECKPOINTERS.includes(kind) && !SERVER_CHECKPOINTERS.includes(kind)) usage(`unknown checkpointer "${kind}"`);
  if (!scenario.checkpointers.includes(kind)) usage(`scenario ${name} does not run with checkpointer "${kind}" (it runs with: ${scenario.checkpointers.join(", ")})`);

  const smoke = !!args.smoke;
  const warmup = args.warmup ?? (smoke ? 0 : scenario.warmup);
  const metrics = scenario.metricsFor?.(kind) ?? scenario.metrics;

  const cpOpts = { dbDir: args.dbDir };
  const cp = await makeCheckpointer(kind, cpOpts);
  const ctx = {
    kind,
    cp,
    smoke,
    makeCp: () => makeCheckpointer(kind, cpOpts),
    invokeConfig: (threadId) => {
      const c = { configurable: { thread_id: threadId }, recursionLimit: 100 };
      if (args.durability) c.durability = args.durability;
      return c;
    },
  };

  try {
    const bench = await scenario.setup(ctx);

    const warmupRun = bench.warmupRun ?? bench.run;
    const warmupTimes = [];
    for (let i = 0; i < warmup; i++) {
      const w0 = now();
      await warmupRun();
      warmupTimes.push(us(w0, now()));
    }

    let runs = args.runs ?? (smoke ? 2 : scenario.defaultRuns ?? null);
    if (runs == null) {
      // Mean of the late warm-up runs (warm JIT, GC pauses included).
      const late = warmupTimes.slice(Math.floor(warmup / 2));
      let perRun = late.length > 0 && !bench.warmupRun ? late.reduce((a, b) => a + b, 0) / late.length : null;
      if (perRun == null) {
        const c0 = now();
        await bench.run();
        perRun = us(c0, now());
      }
      runs = Math.ceil((scenario.targetSeconds * 1e6) / Math.max(perRun, 1));
      runs = Math.min(scenario.maxRuns, Math.max(scenario.minRuns, runs));
    }
    if (runs < 1) usage("--runs must be at least 1");

    const samples = Object.fromEntries(metrics.map(([m]) => [m, []]));
    const t0 = now();
    for (let i = 0; i < runs; i++) {
      const s = await bench.run();
      for (const [m] of metrics) if (m in s) samples[m].push(s[m]);
    }
    const timedSeconds = us(t0, now()) / 1e6;
    const fin = bench.finish?.() ?? {};
    for (const [m, v] of Object.entries(fin)) samples[m] = [v];

    const out = {
      scenario: name,
      checkpointer: kind,
      metrics: metrics.map(([m, unit]) => {
        const xs = samples[m];
        if (!xs || xs.length === 0) throw new BenchError(`no samples for metric ${m}`);
        const single = m in fin;
        return { metric: m, unit, median: round(median(xs)), p90: round(percentile(xs, 90)), runs: single ? runs : xs.length };
      }),
      versions: versions(cp.config.sqlite ? { sqlite: cp.config.sqlite } : {}),
      config: {
        runs,
        warmup,
        smoke,
        timed_seconds: round(timedSeconds),
        durability: args.durability ?? "async (LangGraph default)",
        ...(cp.config.journal_mode ? { journal_mode: cp.config.journal_mode, synchronous: cp.config.synchronous } : {}),
      },
    };
    const detail = bench.detail?.();
    if (detail) out.detail = detail;
    process.stdout.write(`${JSON.stringify(out)}\n`);
    await bench.close?.();
  } finally {
    await cp.close();
  }
}

main().catch((e) => {
  process.stderr.write(`run.mjs: ${e instanceof BenchError ? e.message : e?.stack ?? e}\n`);
  process.exit(1);
});
