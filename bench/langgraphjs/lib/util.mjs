// Small helpers shared by the scenarios: timing, statistics, versions, checks.

import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

export const now = () => process.hrtime.bigint();
/** Microseconds between two hrtime.bigint() readings. */
export const us = (t0, t1) => Number(t1 - t0) / 1000;

export function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  if (n === 0) return null;
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

/** Nearest-rank percentile (p in 0..100). */
export function percentile(xs, p) {
  const s = [...xs].sort((a, b) => a - b);
  if (s.length === 0) return null;
  const rank = Math.max(1, Math.ceil((p / 100) * s.length));
  return s[rank - 1];
}

export class BenchError extends Error {}

export function check(cond, message) {
  if (!cond) throw new BenchError(`check failed: ${message}`);
}

export function sameList(actual, expected, what) {
  const a = JSON.stringify(actual);
  const e = JSON.stringify(expected);
  check(a === e, `${what}: expected ${e}, got ${a}`);
}

const require = createRequire(import.meta.url);

function pkgVersion(name) {
  // Package "exports" often hide package.json, so find it from the entry point.
  let dir = dirname(require.resolve(name));
  for (;;) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
      if (pkg.name === name) return pkg.version;
    } catch {
      /* keep walking up */
    }
    const up = dirname(dir);
    if (up === dir) return null;
    dir = up;
  }
}

export function versions(extra = {}) {
  const v = { node: process.versions.node };
  for (const name of [
    "@langchain/langgraph",
    "@langchain/core",
    "@langchain/langgraph-checkpoint",
    "@langchain/langgraph-checkpoint-sqlite",
    "better-sqlite3",
    "@langchain/langgraph-checkpoint-postgres",
    "pg",
  ]) {
    try {
      v[name] = pkgVersion(name);
    } catch {
      v[name] = null;
    }
  }
  return { ...v, ...extra };
}

let threadSeq = 0;
const runTag = `${process.pid.toString(36)}${Date.now().toString(36)}`;
/** A thread id never used before in this process (nor, in practice, in any other). */
export const freshThread = (prefix) => `${prefix}-${runTag}-${++threadSeq}`;
