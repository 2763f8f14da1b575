// The four checkpointer set-ups the benchmark compares, and how to measure
// what a saver has stored for one thread.
//
//   none           no checkpointer: compile() without one
//   memory         MemorySaver from @langchain/langgraph
//   sqlite_normal  SqliteSaver on a fresh file in a fresh temp dir, WAL, synchronous=NORMAL
//   sqlite_full    the same with synchronous=FULL
//
// SqliteSaver's constructor takes a better-sqlite3 Database, so the pragmas
// are set on our own handle before the saver's setup() creates its tables.
// (setup() itself also runs "PRAGMA journal_mode=WAL"; it does not touch
// synchronous.)
//
//   postgres       PostgresSaver (@langchain/langgraph-checkpoint-postgres) from
//                  STATEGRAPH_BENCH_POSTGRES (or STATEGRAPH_TEST_POSTGRES), in a
//                  fresh schema per process (setup() makes it; close() drops it)
//
// There is no "redis" kind here: @langchain/langgraph-checkpoint-redis needs
// the RedisJSON and RediSearch modules (JSON.SET, FT.CREATE), which a plain
// Redis server does not have; the C++ side runs "redis" alone.

import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { MemorySaver } from "@langchain/langgraph";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";

export const CHECKPOINTERS = ["none", "memory", "sqlite_normal", "sqlite_full"];
/** Checkpointers on a server (chain20 and supervisor run with them). */
export const SERVER_CHECKPOINTERS = ["postgres"];

const SYNC = { sqlite_normal: "NORMAL", sqlite_full: "FULL" };
const SYNC_CODE = { 0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA" };

const open = new Set();
process.on("exit", () => {
  for (const cp of open) cp.close();
});

/**
 * Create one checkpointer of the given kind.
 * Returns {kind, saver (undefined for "none"), db, dir, file, config, close()}.
 * opts.dbDir: parent directory for the SQLite temp dir (default: os.tmpdir()).
 */
export function makeCheckpointer(kind, opts = {}) {
  if (kind === "none") return { kind, saver: undefined, config: {}, close() {} };
  if (kind === "memory") return { kind, saver: new MemorySaver(), config: {}, close() {} };
  if (kind === "postgres") return makePostgres();
  if (!(kind in SYNC)) throw new Error(`unknown checkpointer "${kind}" (expected one of ${CHECKPOINTERS.join(", ")})`);

  const dir = mkdtempSync(join(opts.dbDir ?? tmpdir(), "lgjs-bench-"));
  const file = join(dir, "checkpoints.sqlite");
  const db = new Database(file);
  db.pragma("journal_mode = WAL");
  db.pragma(`synchronous = ${SYNC[kind]}`);
  const saver = new SqliteSaver(db);
  saver.setup();
  const journal = db.pragma("journal_mode", { simple: true });
  const sync = SYNC_CODE[db.pragma("synchronous", { simple: true })];
  if (journal !== "wal" || sync !== SYNC[kind]) {
    throw new Error(`SQLite pragmas not in effect: journal_mode=${journal} synchronous=${sync}`);
  }
  const cp = {
    kind,
    saver,
    db,
    dir,
    file,
    config: { journal_mode: journal, synchronous: sync, sqlite: db.prepare("select sqlite_version() v").get().v },
    closed: false,
    close() {
      if (cp.closed) return;
      cp.closed = true;
      open.delete(cp);
      try {
        db.close();
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
  open.add(cp);
  return cp;
}

/** Bytes of the database file plus its WAL, for information only. */
export function sqliteFileBytes(cp) {
  let n = 0;
  for (const f of [cp.file, `${cp.file}-wal`]) {
    try {
      n += statSync(f).size;
    } catch {
      /* no WAL yet */
    }
  }
  return n;
}

const len = (b) => (b == null ? 0 : typeof b === "string" ? Buffer.byteLength(b) : b.byteLength);

/**
 * What the saver stores for one thread: number of checkpoints, bytes of the
 * serialized checkpoints, of their metadata, and of the pending writes
 * (values only, no keys or ids).
 */
export function storedBytes(cp, threadId) {
  if (cp.kind === "memory") {
    const out = { checkpoints: 0, checkpoint_bytes: 0, metadata_bytes: 0, writes: 0, writes_bytes: 0 };
    for (const nsMap of Object.values(cp.saver.storage[threadId] ?? {})) {
      for (const [ckpt, meta] of Object.values(nsMap)) {
        out.checkpoints += 1;
        out.checkpoint_bytes += len(ckpt);
        out.metadata_bytes += len(meta);
      }
    }
    for (const [key, inner] of Object.entries(cp.saver.writes)) {
      if (JSON.parse(key)[0] !== threadId) continue;
      for (const [, , value] of Object.values(inner)) {
        out.writes += 1;
        out.writes_bytes += len(value);
      }
    }
    return out;
  }
  if (cp.db) {
    const c = cp.db
      .prepare(
        "SELECT count(*) AS n, coalesce(sum(length(checkpoint)),0) AS cb, coalesce(sum(length(metadata)),0) AS mb FROM checkpoints WHERE thread_id = ?",
      )
      .get(threadId);
    const w = cp.db
      .prepare("SELECT count(*) AS n, coalesce(sum(length(value)),0) AS wb FROM writes WHERE thread_id = ?")
      .get(threadId);
    return { checkpoints: c.n, checkpoint_bytes: c.cb, metadata_bytes: c.mb, writes: w.n, writes_bytes: w.wb };
  }
  throw new Error(`checkpointer "${cp.kind}" stores nothing`);
}

/** PostgresSaver in a fresh schema: "bench_js_<pid>_<ms>". Async (setup() talks to the server). */
async function makePostgres() {
  const url = process.env.STATEGRAPH_BENCH_POSTGRES || process.env.STATEGRAPH_TEST_POSTGRES;
  if (!url) throw new Error("no server: set STATEGRAPH_BENCH_POSTGRES (or STATEGRAPH_TEST_POSTGRES); scripts/bench starts one");
  const schema = `bench_js_${process.pid}_${Date.now()}`;
  const saver = PostgresSaver.fromConnString(url, { schema });
  await saver.setup();
  const cp = {
    kind: "postgres",
    saver,
    config: { postgres_schema: schema },
    closed: false,
    async close() {
      if (cp.closed) return;
      cp.closed = true;
      try {
        await saver.pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      } finally {
        await saver.end();
      }
    },
  };
  return cp;
}
