// Recorder of the project's LangGraph.js conformance cases (issue 12's fixes).
//
// Writes one JSON document per case in the layout of ../shared/conformance/golden/ (see
// ../README.md), so that tests/support/golden.hpp compares them the same way:
//
//   { "case": "NN_name", "description": "...", "runs": [ {label?, graph?, call, updates,
//     values?, result, state, pending_writes?, history_len, side_counters}, ... ] }
//
// It only watches LangGraph; nothing here changes how a graph runs.
//
// * Each invoke is made as graph.stream(input, {streamMode: [..., "values", "checkpoints"]}).
//   The "checkpoints" events are used for nothing but step labels: an update or values event
//   gets the step of the checkpoint that records its writes, i.e. the step of the last
//   checkpoint seen + 1. The result is rebuilt as Pregel.invoke() builds it: the last
//   "values" chunk, plus "__interrupt__" with every interrupt of the call.
// * Random ids (checkpoint ids = uuid v6, task ids = uuid v5, interrupt ids = 32 hex digits)
//   become "<checkpoint:N>", "<task:N>", "<interrupt:N>", numbered per kind in order of first
//   appearance in the printed document. `undefined` prints as null.
// * An `Overwrite` prints as {"__overwrite__": value} (its own toJSON form).

import { isCommand, Send, Overwrite } from "@langchain/langgraph";

/** Plain JSON data of any LangGraph value. */
export function toPlain(v) {
  if (v === undefined || v === null) return null;
  if (typeof v === "function") return `<function ${v.name || "anonymous"}>`;
  if (typeof v !== "object") return v;
  if (Array.isArray(v)) return v.map(toPlain);
  if (Overwrite.isInstance(v)) return { __overwrite__: toPlain(v instanceof Overwrite ? v.value : v.__overwrite__) };
  if (isCommand(v)) {
    const c = {};
    for (const k of ["graph", "update", "resume", "goto"]) {
      const x = v[k];
      if (x === undefined || x === null || (k === "goto" && Array.isArray(x) && x.length === 0)) continue;
      c[k] = toPlain(x);
    }
    return { Command: c };
  }
  if (v instanceof Send) return { Send: { node: v.node, arg: toPlain(v.args) } };
  if (v instanceof Error) return errorOf(v);
  return Object.fromEntries(Object.keys(v).map((k) => [k, toPlain(v[k])]));
}

export function errorOf(e) {
  const o = { error: e?.name ?? String(e), message: e?.message ?? String(e) };
  if (e?.lc_error_code) o.lc_error_code = e.lc_error_code;
  return o;
}

const threadOf = (config) => ({ configurable: { thread_id: config.configurable.thread_id } });

function callConfig(config) {
  const c = config?.configurable ?? {};
  const o = { thread_id: c.thread_id };
  if (c.checkpoint_id !== undefined) o.checkpoint_id = c.checkpoint_id;
  if (config?.recursionLimit !== undefined) o.recursionLimit = config.recursionLimit;
  return o;
}

function taskOf(t) {
  const o = { name: t.name, interrupts: (t.interrupts ?? []).map((i) => toPlain(i.value)) };
  if (t.error) o.error = errorOf(t.error);
  if (t.result !== undefined) o.result = toPlain(t.result);
  return o;
}

/** The golden `state`: getState's values, next, tasks, step and source. */
export function stateOf(s) {
  if (!s) return null;
  return {
    values: toPlain(s.values),
    next: [...(s.next ?? [])],
    tasks: (s.tasks ?? []).map(taskOf),
    step: s.metadata?.step ?? null,
    source: s.metadata?.source ?? null,
  };
}

/** Every checkpoint of a thread, newest first: id, parent, step, source, values, next. */
export async function history(graph, threadId) {
  const out = [];
  for await (const s of graph.getStateHistory({ configurable: { thread_id: threadId } })) {
    out.push({
      checkpoint_id: s.config.configurable.checkpoint_id,
      parent_checkpoint_id: s.parentConfig?.configurable?.checkpoint_id ?? null,
      step: s.metadata?.step ?? null,
      source: s.metadata?.source ?? null,
      values: toPlain(s.values),
      next: [...s.next],
    });
  }
  return out;
}

export class Recording {
  constructor(name, description) {
    this.name = name;
    this.description = description.replace(/\s+/g, " ").trim();
    this.runs = [];
    this.counters = {};
  }

  /** Counts a node body's start (the golden `side_counters`). */
  count(key) {
    this.counters[key] = (this.counters[key] ?? 0) + 1;
    return this.counters[key];
  }

  /**
   * One invoke, recorded. opts: label, graph (variant name), values (record the "values"
   * stream too), pendingWrites (record the head checkpoint's pending writes).
   * Returns {result, error, interrupts} (interrupts: the raw Interrupt objects).
   */
  async invoke(graph, input, config, opts = {}) {
    let step = -2;
    try {
      step = (await graph.getState(config)).metadata?.step ?? -2;
    } catch {}
    const updates = [];
    const values = [];
    const interrupts = [];
    let last;
    let interrupted = false; // a values chunk {"__interrupt__": [...]} was seen (static breakpoints: [])
    let error = null;
    try {
      const stream = await graph.stream(input, { ...config, streamMode: ["updates", "values", "checkpoints"] });
      for await (const [mode, chunk] of stream) {
        if (mode === "checkpoints") {
          step = chunk.metadata?.step ?? step;
        } else if (mode === "values") {
          if (chunk && typeof chunk === "object" && "__interrupt__" in chunk) {
            interrupted = true;
            interrupts.push(...chunk.__interrupt__);
          } else last = chunk;
          values.push({ step: step + 1, value: toPlain(chunk) });
        } else if (mode === "updates") {
          const label = step + 1;
          if (!updates.length || updates[updates.length - 1].step !== label) updates.push({ step: label, events: [] });
          updates[updates.length - 1].events.push(toPlain(chunk));
        }
      }
    } catch (e) {
      error = e;
    }
    let result;
    if (error) result = errorOf(error);
    else if (interrupted) result = toPlain({ ...(last ?? {}), __interrupt__: interrupts });
    else result = toPlain(last);

    const run = this._head(opts);
    run.call = { method: "invoke", input: toPlain(input), config: callConfig(config) };
    run.updates = updates;
    if (opts.values) run.values = values;
    run.result = result;
    await this._after(run, graph, config, opts);
    return { result, error, interrupts };
  }

  /** One getStateHistory, recorded: `result` is the history (newest first). */
  async history(graph, config, opts = {}) {
    const run = this._head(opts);
    run.call = { method: "getStateHistory", config: callConfig(config) };
    const h = await history(graph, config.configurable.thread_id);
    run.result = toPlain(h);
    await this._after(run, graph, config, opts);
    return h;
  }

  _head(opts) {
    const run = {};
    if (opts.label) run.label = opts.label;
    if (opts.graph) run.graph = opts.graph;
    return run;
  }

  async _after(run, graph, config, opts) {
    const thread = threadOf(config);
    try {
      run.state = stateOf(await graph.getState(thread));
    } catch (e) {
      run.state = errorOf(e);
    }
    if (opts.pendingWrites) {
      const tuple = await graph.checkpointer.getTuple(thread);
      const snap = tuple ? await graph.getState({ configurable: { ...thread.configurable, checkpoint_id: tuple.config.configurable.checkpoint_id } }) : null;
      const names = new Map((snap?.tasks ?? []).map((t) => [t.id, t.name]));
      run.pending_writes = (tuple?.pendingWrites ?? []).map(([task, channel, value]) => [names.get(task) ?? task, channel, toPlain(value)]);
    }
    let n = 0;
    for await (const _ of graph.getStateHistory(thread)) n++;
    run.history_len = n;
    run.side_counters = { ...this.counters };
    this.runs.push(run);
  }

  /** Prints the case as one JSON document, ids replaced by placeholders. */
  print() {
    const doc = { case: this.name, description: this.description, runs: this.runs };
    process.stdout.write(JSON.stringify(placeholders(doc), null, 2) + "\n");
  }
}

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-([0-9a-f])[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}/gi;

/** Replaces LangGraph's random ids by placeholders numbered per kind in document order. */
export function placeholders(doc) {
  const seen = { checkpoint: new Map(), task: new Map(), interrupt: new Map(), uuid: new Map() };
  const name = (kind, id) => {
    const m = seen[kind];
    if (!m.has(id)) m.set(id, `<${kind}:${m.size + 1}>`);
    return m.get(id);
  };
  const kindOf = (version) => (version === "6" ? "checkpoint" : version === "5" ? "task" : "uuid");
  const str = (s) => {
    if (typeof s !== "string") return s;
    if (/^[0-9a-f]{32}$/i.test(s)) return name("interrupt", s);
    return s.replace(UUID, (u, version) => name(kindOf(version), u));
  };
  const walk = (x) => {
    if (Array.isArray(x)) return x.map(walk);
    if (x && typeof x === "object") return Object.fromEntries(Object.entries(x).map(([k, v]) => [str(k), walk(v)]));
    return str(x);
  };
  return walk(doc);
}
