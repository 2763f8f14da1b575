// The Global Supervisor benchmark graph, node for node as specified in
// shared/bench/supervisor_topology.md: 22 nodes, 25 state channels, trivial
// deterministic node bodies, the same routing functions and turn messages as
// the C++ version.
//
//   START -> session_init -> summarization_check -?-> summarization -> context_loader
//                                                 \-> context_loader -> hitl_handler
//   hitl_handler -?-> agent_execution | intent_classification -> retrieval_router
//   retrieval_router -?-> memory_assembly | entity_resolution
//   entity_resolution -> semantic_retrieval -> temporal_retrieval -> memory_assembly
//   memory_assembly -> fact_extraction -> extraction_merge
//   extraction_merge -?-> disambiguation_blocking | disambiguation_simple | global_planner | ui_router
//   disambiguation_blocking -> message_persist;  disambiguation_simple -> message_persist
//   global_planner -> agent_execution -?-> global_planner | ui_router
//   ui_router -?-> simple_text | complex_text | hitl_text -> message_persist -> END

import { Annotation, Command, END, START, StateGraph, interrupt } from "@langchain/langgraph";
import { check, sameList } from "./util.mjs";

export const CONTACTS = { Thomas: ["Thomas A", "Thomas B"], Anna: ["Anna K"], Marco: ["Marco R"] };
export const AGENTS = ["productivity", "wealth", "research"];
export const PLANNER_ITERATIONS = 3;
export const HISTORY = [
  "user: hi",
  "assistant: hello, how can I help?",
  "user: what is on my calendar?",
  "assistant: two meetings tomorrow",
  "user: thanks",
  "assistant: you are welcome",
];

export const COMPLEX_MESSAGE = "Plan my week: book flights to Zurich and review my portfolio";
export const BLOCKING_MESSAGE = "Thomas is traveling to Mallorca next week";
export const BLOCKING_QUESTION = "which Thomas?";
export const BLOCKING_ANSWER = "Thomas A";
export const RECURSION_LIMIT = 100;

const append = () => Annotation({ reducer: (a, b) => a.concat(b), default: () => [] });

// 25 channels. All keep the last value except agent_results and trace.
export const SupervisorState = Annotation.Root({
  user_message: Annotation(),
  chat_id: Annotation(),
  user_id: Annotation(),
  hitl_resume_type: Annotation(),
  messages_history: Annotation(),
  needs_summarization: Annotation(),
  presentation_rules: Annotation(),
  intent: Annotation(),
  retrieval_path: Annotation(),
  resolved_entities: Annotation(),
  ambiguous_entities: Annotation(),
  semantic_facts: Annotation(),
  temporal_facts: Annotation(),
  memory_context: Annotation(),
  extracted_facts: Annotation(),
  entity_ambiguity: Annotation(),
  persisted_facts: Annotation(),
  hitl_user_response: Annotation(),
  planner_decision: Annotation(),
  planner_iterations: Annotation(),
  agent_results: append(),
  response_type: Annotation(),
  ui_response: Annotation(),
  persisted: Annotation(),
  trace: append(),
});

// ---- node bodies (each appends its own name to trace) ----------------------

const nodes = {
  session_init: (s) => ({
    messages_history: HISTORY,
    hitl_resume_type: s.hitl_resume_type ?? "none",
    planner_iterations: 0,
  }),
  summarization_check: (s) => ({ needs_summarization: (s.messages_history ?? []).length > 20 }),
  summarization: (s) => ({ messages_history: [`summary of ${(s.messages_history ?? []).length} messages`] }),
  context_loader: () => ({ presentation_rules: { avatar: "default", modality: "text", max_len: 800 } }),
  hitl_handler: () => ({}),
  intent_classification: (s) => {
    const msg = s.user_message ?? "";
    let route = "simple";
    if (/^(hi|hello|hey)\b/i.test(msg)) route = "greeting";
    else if (/\b(plan|book|schedule|research|review)\b/i.test(msg)) route = "complex";
    const entities = msg.split(/[^A-Za-z]+/).filter((w) => Object.hasOwn(CONTACTS, w));
    return {
      intent: {
        route,
        entities,
        has_extractable_facts: !msg.endsWith("?") && /\b(is|are|will)\b/.test(msg),
        has_preferences: /\blikes?\b/i.test(msg),
        needs_semantic_retrieval: route !== "greeting",
      },
    };
  },
  retrieval_router: (s) => {
    const { route, entities, needs_semantic_retrieval } = s.intent;
    let retrieval_path = "semantic";
    if (!needs_semantic_retrieval) retrieval_path = "skip";
    else if (route === "complex" || entities.length > 0) retrieval_path = "parallel";
    return { retrieval_path };
  },
  entity_resolution: (s) => ({
    resolved_entities: s.intent.entities.filter((e) => CONTACTS[e].length === 1).map((e) => CONTACTS[e][0]),
    ambiguous_entities: s.intent.entities.filter((e) => CONTACTS[e].length > 1),
  }),
  semantic_retrieval: (s) => {
    const about = s.intent.entities.length > 0 ? s.intent.entities : ["user"];
    return { semantic_facts: about.map((e) => `semantic fact about ${e}`) };
  },
  temporal_retrieval: (s) => ({
    temporal_facts: s.retrieval_path === "parallel" ? ["upcoming: dentist on Friday"] : [],
  }),
  memory_assembly: (s) => {
    const facts = [...(s.semantic_facts ?? []), ...(s.temporal_facts ?? [])];
    return { memory_context: { facts, n: facts.length } };
  },
  fact_extraction: (s) => ({
    extracted_facts: s.intent.has_extractable_facts
      ? [{ text: s.user_message, entity: s.intent.entities[0] ?? null }]
      : [],
  }),
  extraction_merge: (s) => {
    const ambiguous = s.ambiguous_entities ?? [];
    const extracted = s.extracted_facts ?? [];
    let entity_ambiguity = "non_blocking";
    if (ambiguous.length === 0) entity_ambiguity = "none";
    else if (extracted.some((f) => ambiguous.includes(f.entity))) entity_ambiguity = "blocking";
    return { entity_ambiguity, persisted_facts: extracted.filter((f) => !ambiguous.includes(f.entity)).length };
  },
  disambiguation_blocking: (s) => {
    const answer = interrupt(`which ${s.ambiguous_entities[0]}?`);
    return {
      hitl_user_response: answer,
      resolved_entities: [...(s.resolved_entities ?? []), answer],
      persisted_facts: (s.persisted_facts ?? 0) + (s.extracted_facts ?? []).length,
      ui_response: `Got it: ${answer}. Saved.`,
    };
  },
  disambiguation_simple: (s) => ({
    ui_response: `Here is what I found. By the way, which ${s.ambiguous_entities[0]} did you mean?`,
  }),
  global_planner: (s) => {
    const iter = s.planner_iterations ?? 0;
    return { planner_decision: { agent: AGENTS[iter % AGENTS.length], step: iter } };
  },
  agent_execution: (s) => ({
    agent_results: [
      { agent: s.planner_decision?.agent ?? "resume", ok: true, needs_input: /\bconfirm\b/i.test(s.user_message ?? "") },
    ],
    planner_iterations: (s.planner_iterations ?? 0) + 1,
  }),
  ui_router: (s) => {
    let response_type = "simple";
    if ((s.agent_results ?? []).some((r) => r.needs_input)) response_type = "hitl";
    else if (s.intent?.route === "complex") response_type = "complex";
    return { response_type };
  },
  simple_text: (s) => ({ ui_response: `reply to: ${s.user_message}` }),
  complex_text: (s) => ({ ui_response: `synthesized ${(s.agent_results ?? []).length} agent results` }),
  hitl_text: () => ({ ui_response: "Please confirm before I go on." }),
  message_persist: () => ({ persisted: true }),
};

// ---- routing functions ------------------------------------------------------

const routes = {
  summarization_check: [(s) => (s.needs_summarization ? "summarization" : "context_loader"), ["summarization", "context_loader"]],
  hitl_handler: [
    (s) => (s.hitl_resume_type === "agent" ? "agent_execution" : "intent_classification"),
    ["agent_execution", "intent_classification"],
  ],
  retrieval_router: [
    (s) => (s.retrieval_path === "skip" ? "memory_assembly" : "entity_resolution"),
    ["memory_assembly", "entity_resolution"],
  ],
  extraction_merge: [
    (s) => {
      if (s.entity_ambiguity === "blocking") return "disambiguation_blocking";
      if (s.entity_ambiguity === "non_blocking") return "disambiguation_simple";
      return s.intent?.route === "complex" ? "global_planner" : "ui_router";
    },
    ["disambiguation_blocking", "disambiguation_simple", "global_planner", "ui_router"],
  ],
  agent_execution: [
    (s) => (s.planner_iterations < PLANNER_ITERATIONS ? "global_planner" : "ui_router"),
    ["global_planner", "ui_router"],
  ],
  ui_router: [(s) => `${s.response_type}_text`, ["simple_text", "complex_text", "hitl_text"]],
};

const edges = [
  [START, "session_init"],
  ["session_init", "summarization_check"],
  ["summarization", "context_loader"],
  ["context_loader", "hitl_handler"],
  ["intent_classification", "retrieval_router"],
  ["entity_resolution", "semantic_retrieval"],
  ["semantic_retrieval", "temporal_retrieval"],
  ["temporal_retrieval", "memory_assembly"],
  ["memory_assembly", "fact_extraction"],
  ["fact_extraction", "extraction_merge"],
  ["disambiguation_blocking", "message_persist"],
  ["disambiguation_simple", "message_persist"],
  ["global_planner", "agent_execution"],
  ["simple_text", "message_persist"],
  ["complex_text", "message_persist"],
  ["hitl_text", "message_persist"],
  ["message_persist", END],
];

export const NODE_NAMES = Object.keys(nodes);
check(NODE_NAMES.length === 22, "the supervisor graph has 22 nodes");
check(Object.keys(SupervisorState.spec).length === 25, "the supervisor state has 25 channels");

export function buildSupervisor(checkpointer) {
  let g = new StateGraph(SupervisorState);
  for (const [name, body] of Object.entries(nodes)) {
    g = g.addNode(name, (s) => ({ ...body(s), trace: [name] }));
  }
  for (const [a, b] of edges) g = g.addEdge(a, b);
  for (const [src, [fn, targets]] of Object.entries(routes)) g = g.addConditionalEdges(src, fn, targets);
  return g.compile(checkpointer ? { checkpointer } : {});
}

export const turnInput = (message, threadId, resumeType = "none") => ({
  user_message: message,
  chat_id: threadId,
  user_id: "u1",
  hitl_resume_type: resumeType,
});

export const turnConfig = (threadId) => ({ configurable: { thread_id: threadId }, recursionLimit: RECURSION_LIMIT });

const FRONT = [
  "session_init",
  "summarization_check",
  "context_loader",
  "hitl_handler",
  "intent_classification",
  "retrieval_router",
  "entity_resolution",
  "semantic_retrieval",
  "temporal_retrieval",
  "memory_assembly",
  "fact_extraction",
  "extraction_merge",
];
export const COMPLEX_TRACE = [
  ...FRONT,
  "global_planner",
  "agent_execution",
  "global_planner",
  "agent_execution",
  "global_planner",
  "agent_execution",
  "ui_router",
  "complex_text",
  "message_persist",
];
export const BLOCKING_TRACE = [...FRONT, "disambiguation_blocking", "message_persist"];

async function historyLen(graph, threadId) {
  let n = 0;
  for await (const _ of graph.getStateHistory({ configurable: { thread_id: threadId } })) n++;
  return n;
}

/** Cheap checks done on every timed complex turn. */
export function checkComplexResult(r) {
  check(!r.__interrupt__, "complex turn: no interrupt");
  check(r.trace.length === 21, `complex turn ran 21 nodes (got ${r.trace.length})`);
  check(r.ui_response === "synthesized 3 agent results", `complex turn ui_response (got ${r.ui_response})`);
}

/** Cheap checks done on every timed blocking turn. */
export function checkBlockingInterrupt(r) {
  const intr = r.__interrupt__;
  check(Array.isArray(intr) && intr.length === 1, "blocking turn: invoke returned one __interrupt__");
  check(intr[0].value === BLOCKING_QUESTION, `blocking turn interrupted with "${BLOCKING_QUESTION}" (got ${JSON.stringify(intr[0].value)})`);
}
export function checkBlockingEnd(r) {
  check(!r.__interrupt__, "blocking turn: resume ran to the end");
  check(r.trace.length === 14, `blocking turn: trace has 14 entries after resume (got ${r.trace.length})`);
  check(r.hitl_user_response === BLOCKING_ANSWER && r.persisted === true, "blocking turn: resume value stored and persisted");
}

/**
 * Untimed full check of the graph against the topology document: node
 * sequences of both measured turns and of the checked-only paths, and (with
 * a checkpointer) the number of checkpoints each turn writes.
 */
export async function validateSupervisor(graph, hasCheckpointer, threadPrefix) {
  let n = 0;
  const tid = () => `${threadPrefix}-validate-${++n}`;

  let t = tid();
  let r = await graph.invoke(turnInput(COMPLEX_MESSAGE, t), turnConfig(t));
  checkComplexResult(r);
  sameList(r.trace, COMPLEX_TRACE, "complex turn trace");
  check(r.retrieval_path === "parallel" && r.intent.route === "complex", "complex turn: parallel retrieval, complex route");
  sameList(r.agent_results.map((a) => a.agent), AGENTS, "complex turn agents");
  if (hasCheckpointer) check((await historyLen(graph, t)) === 23, "complex turn writes 23 checkpoints");

  if (hasCheckpointer) {
    t = tid();
    r = await graph.invoke(turnInput(BLOCKING_MESSAGE, t), turnConfig(t));
    checkBlockingInterrupt(r);
    sameList(r.trace, BLOCKING_TRACE.slice(0, 12), "blocking turn trace at the interrupt");
    check((await historyLen(graph, t)) === 14, "blocking turn: 14 checkpoints at the interrupt");
    r = await graph.invoke(new Command({ resume: BLOCKING_ANSWER }), turnConfig(t));
    checkBlockingEnd(r);
    sameList(r.trace, BLOCKING_TRACE, "blocking turn trace after resume");
    sameList(r.resolved_entities, [BLOCKING_ANSWER], "blocking turn resolved entities");
    check(r.persisted_facts === 1, "blocking turn persisted_facts = 1");
    check((await historyLen(graph, t)) === 16, "blocking turn: 16 checkpoints after resume");
  }

  // Checked, not timed.
  const paths = [
    [
      "What does Thomas like for dinner?",
      "none",
      [...FRONT, "disambiguation_simple", "message_persist"],
      (s) => s.entity_ambiguity === "non_blocking" && s.ui_response.includes("which Thomas did you mean?"),
    ],
    [
      "Hi there",
      "none",
      [
        "session_init",
        "summarization_check",
        "context_loader",
        "hitl_handler",
        "intent_classification",
        "retrieval_router",
        "memory_assembly",
        "fact_extraction",
        "extraction_merge",
        "ui_router",
        "simple_text",
        "message_persist",
      ],
      (s) => s.intent.route === "greeting" && s.retrieval_path === "skip" && s.response_type === "simple",
    ],
    [
      "Tell me a fun fact about Anna",
      "none",
      [...FRONT, "ui_router", "simple_text", "message_persist"],
      (s) => s.retrieval_path === "parallel" && s.entity_ambiguity === "none" && s.resolved_entities[0] === "Anna K",
    ],
    [
      "Yes, please confirm the booking",
      "agent",
      [
        "session_init",
        "summarization_check",
        "context_loader",
        "hitl_handler",
        "agent_execution",
        "global_planner",
        "agent_execution",
        "global_planner",
        "agent_execution",
        "ui_router",
        "hitl_text",
        "message_persist",
      ],
      (s) =>
        s.response_type === "hitl" &&
        JSON.stringify(s.agent_results.map((a) => a.agent)) === JSON.stringify(["resume", "wealth", "research"]),
    ],
  ];
  for (const [message, resumeType, trace, ok] of paths) {
    t = tid();
    r = await graph.invoke(turnInput(message, t, resumeType), turnConfig(t));
    check(!r.__interrupt__, `"${message}": no interrupt`);
    sameList(r.trace, trace, `"${message}" trace`);
    check(ok(r), `"${message}": final state as specified`);
    check(r.persisted === true && r.needs_summarization === false, `"${message}": persisted, no summarization`);
  }
}
