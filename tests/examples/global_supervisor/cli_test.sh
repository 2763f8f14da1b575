#!/usr/bin/env bash
# The global_supervisor command line, each call a separate process:
#   chat / resume / state / history / dot, --json output parsed with python3,
#   an interrupt in one process and its resume in another,
#   error exits (missing thread, nothing pending, bad flag) that lose nothing,
#   the DOT output rendered by dot -Tsvg, --json output that stays valid UTF-8, break-lease, and
#   the checkpoints on Redis or PostgreSQL (--checkpointer, when STATEGRAPH_TEST_REDIS /
#   STATEGRAPH_TEST_POSTGRES are set).
# usage: cli_test.sh path/to/global_supervisor path/to/libstategraph_checksum.so
set -euo pipefail

bin=${1:?usage: cli_test.sh path/to/global_supervisor path/to/libstategraph_checksum.so}
checksum_ext=${2:?usage: cli_test.sh path/to/global_supervisor path/to/libstategraph_checksum.so}
work=$(mktemp -d "${TMPDIR:-/tmp}/gs_cli.XXXXXX")
trap 'rm -rf "$work"' EXIT
db="$work/chat.db"
failures=0

fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
ok() { echo "ok: $*"; }

# json FILE EXPR: evaluates a Python expression on the parsed JSON object `j`.
json() { python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1"; }

# expect_error CODE DESCRIPTION -- command...: the command fails with CODE and one line on stderr.
expect_error() {
  local want=$1 what=$2; shift 3
  local rc=0
  "$@" >"$work/out" 2>"$work/err" || rc=$?
  if [ "$rc" -ne "$want" ]; then fail "$what: exit $rc, expected $want"; return; fi
  if [ "$(wc -l <"$work/err")" -ne 1 ]; then fail "$what: expected one line on stderr, got: $(cat "$work/err")"; return; fi
  ok "$what ($(cat "$work/err"))"
}

# 1. A greeting takes the fast path.
"$bin" chat --db "$db" --thread t1 --json "Hi there!" >"$work/greet.json"
[ "$(json "$work/greet.json" 'j["status"]')" = done ] || fail "greeting status"
[ "$(json "$work/greet.json" '",".join(j["nodes"])')" = \
  "session_init,summarization_check,context_loader,hitl_handler,intent_classification,retrieval_router,memory_assembly,extraction_merge,ui_router,simple_text,message_persist" ] \
  || fail "greeting nodes: $(json "$work/greet.json" 'j["nodes"]')"
[ "$(json "$work/greet.json" 'sorted(j.keys())')" = "['interrupts', 'nodes', 'output', 'recovered', 'reply', 'status', 'thread_id']" ] \
  || fail "greeting keys"
ok "greeting"

# 2. A multi-agent request: two agents in parallel.
"$bin" chat --db "$db" --thread t1 --json "Plan my week: book flights to Zurich and review my portfolio" >"$work/plan.json"
[ "$(json "$work/plan.json" 'j["nodes"].count("agent_execution")')" = 2 ] || fail "two agents"
[ "$(json "$work/plan.json" 'j["nodes"][-2]')" = complex_text ] || fail "complex_text"
ok "multi-agent request"

# 3. The Thomas message pauses with a question (process A) ...
"$bin" chat --db "$db" --thread t1 --json "Thomas is traveling to Mallorca" >"$work/thomas.json"
[ "$(json "$work/thomas.json" 'j["status"]')" = interrupted ] || fail "Thomas: not interrupted"
[ "$(json "$work/thomas.json" 'j["nodes"][-1]')" = disambiguation_blocking ] || fail "Thomas: last node"
[ "$(json "$work/thomas.json" 'j["interrupts"][0]["value"]["options"]')" = "['Thomas Anderson', 'Thomas Berger']" ] \
  || fail "Thomas: options"
[ -n "$(json "$work/thomas.json" 'j["interrupts"][0]["id"]')" ] || fail "Thomas: interrupt id"
ok "interrupt: $(json "$work/thomas.json" 'j["reply"]')"

"$bin" state --db "$db" --thread t1 --json >"$work/state.json"
[ "$(json "$work/state.json" 'j["status"]')" = interrupted ] || fail "state: interrupted"
[ "$(json "$work/state.json" 'j["next"]')" = "['disambiguation_blocking']" ] || fail "state: next"
"$bin" state --db "$db" --thread t1 | grep -q "waiting: Which Thomas" || fail "state text"
ok "state while waiting"

# ... and a second process resumes it.
"$bin" resume --db "$db" --thread t1 --json "Thomas Berger" >"$work/resume.json"
[ "$(json "$work/resume.json" 'j["status"]')" = done ] || fail "resume status"
[ "$(json "$work/resume.json" '",".join(j["nodes"])')" = "disambiguation_blocking,message_persist" ] || fail "resume nodes"
json "$work/resume.json" 'j["reply"]' | grep -q "Thomas Berger" || fail "resume reply"
ok "resume: $(json "$work/resume.json" 'j["reply"]')"

# The fact is stored against the chosen contact (read with sqlite3 when it is installed).
if command -v sqlite3 >/dev/null; then
  # (facts are Store items: JSON values in store_items)
  who=$(sqlite3 "$db" "SELECT c.full_name FROM store_items f JOIN contacts c ON c.id = json_extract(f.value, '$.contact_id') WHERE json_extract(f.value, '$.text') LIKE 'Thomas is traveling%'")
  [ "$who" = "Thomas Berger" ] || fail "fact stored for '$who'"
  ok "fact stored for Thomas Berger"
fi

# 4. History and state after the turn.
"$bin" history --db "$db" --thread t1 --json >"$work/history.json"
[ "$(json "$work/history.json" 'len(j) > 20')" = True ] || fail "history length"
[ "$(json "$work/history.json" 'j[0]["writers"]')" = "['message_persist']" ] || fail "history newest"
"$bin" history --db "$db" --thread t1 | head -1 | grep -q "message_persist" || fail "history text"
ok "history ($(json "$work/history.json" 'len(j)') checkpoints)"

# 5. Errors: one line, non-zero, nothing lost.
before=$(json "$work/history.json" 'len(j)')
expect_error 1 "resume with nothing pending" -- "$bin" resume --db "$db" --thread t1 "2"
expect_error 1 "missing thread (state)" -- "$bin" state --db "$db" --thread nobody
expect_error 1 "missing thread (resume)" -- "$bin" resume --db "$db" --thread nobody "2"
expect_error 1 "missing thread (history)" -- "$bin" history --db "$db" --thread nobody
expect_error 2 "bad flag" -- "$bin" chat --db "$db" --thread t1 --colour "Hi"
expect_error 2 "missing --thread" -- "$bin" chat --db "$db" "Hi"
expect_error 2 "missing message" -- "$bin" chat --db "$db" --thread t1
expect_error 2 "unknown command" -- "$bin" chatter --db "$db" --thread t1 "Hi"
expect_error 1 "missing database" -- "$bin" state --db "$work/none.db" --thread t1
"$bin" history --db "$db" --thread t1 --json >"$work/history2.json"
[ "$(json "$work/history2.json" 'len(j)')" = "$before" ] || fail "errors changed the history"
[ "$(json "$work/history2.json" 'j[0]["checkpoint_id"]')" = "$(json "$work/history.json" 'j[0]["checkpoint_id"]')" ] \
  || fail "errors changed the head checkpoint"
ok "errors lose nothing"

# 6. Permission: asked in one process, approved in another.
"$bin" chat --db "$db" --thread t2 --json "Send an email to Anna about dinner on Friday" >"$work/mail.json"
[ "$(json "$work/mail.json" 'j["interrupts"][0]["value"]["action"]')" = send_email ] || fail "permission asked"
"$bin" resume --db "$db" --thread t2 --json approve >"$work/approve.json"
json "$work/approve.json" 'j["reply"]' | grep -q "Done, with your approval" || fail "approved"
ok "permission approved from a second process"

# 7. DOT: the whole graph, and a thread's path; both render with dot -Tsvg.
"$bin" dot >"$work/graph.dot"
grep -q "extraction_merge" "$work/graph.dot" || fail "dot: nodes"
"$bin" dot --db "$db" --thread t1 >"$work/t1.dot"
grep -q "#ffd966" "$work/t1.dot" || fail "dot: current position"
if command -v dot >/dev/null; then
  dot -Tsvg "$work/graph.dot" -o "$work/graph.svg" || fail "dot -Tsvg graph"
  dot -Tsvg "$work/t1.dot" -o "$work/t1.svg" || fail "dot -Tsvg thread"
  grep -q "<svg" "$work/t1.svg" || fail "svg"
  ok "dot -Tsvg"
else
  echo "note: graphviz not installed, SVG not rendered"
fi

# 8. Text output.
"$bin" chat --db "$db" --thread t3 "Hello" | grep -q "^assistant: Hello" || fail "text output"
ok "text output"

# 9. --json output is valid UTF-8 even when the input holds invalid bytes (issue 11): each invalid
#    sequence is written as U+FFFD, so a strict parser (UTF-8 decoding without replacement) takes
#    every output. The message has a truncated sequence (\xc3 before a space and at the end) and
#    bytes that never start one (\xff\xfe); the thread id has one too.
bad=$'Anna likes caf\xc3 and \xff\xfe cake \xc3'
bad_thread=$'t4\xfe'
# strict_json FILE [RAW]: prints whether FILE holds U+FFFD; fails unless FILE is valid UTF-8 and
# valid JSON. With RAW, also whether the state's user message is RAW with U+FFFD replacing.
strict_json() {
  python3 -c '
import json, os, sys
text = open(sys.argv[1], "rb").read().decode("utf-8")
j = json.loads(text)
ok = "\ufffd" in text
if len(sys.argv) > 2:
    ok = ok and j["values"]["conversation"]["user_message"] == os.fsencode(sys.argv[2]).decode("utf-8", "replace")
print(ok)' "$@"
}
"$bin" chat --db "$db" --thread "$bad_thread" --json "$bad" >"$work/bad_chat.json"
[ "$(strict_json "$work/bad_chat.json")" = True ] || fail "chat --json with invalid UTF-8: $(head -c 300 "$work/bad_chat.json")"
"$bin" state --db "$db" --thread "$bad_thread" --json >"$work/bad_state.json"
[ "$(strict_json "$work/bad_state.json" "$bad")" = True ] || fail "state --json with invalid UTF-8"
"$bin" history --db "$db" --thread "$bad_thread" --json >"$work/bad_history.json"
python3 -c 'import json,sys; json.loads(open(sys.argv[1], "rb").read().decode("utf-8"))' "$work/bad_history.json" \
  || fail "history --json with invalid UTF-8"
"$bin" chat --db "$db" --thread "$bad_thread" --json "Send an email to Anna: $bad" >"$work/bad_ask.json"
"$bin" resume --db "$db" --thread "$bad_thread" --json $'approve \xe2\x82' >"$work/bad_resume.json"
[ "$(strict_json "$work/bad_resume.json")" = True ] || fail "resume --json with invalid UTF-8"
ok "--json output is valid UTF-8"

# 10. A lease held by a process on another host (written into the checkpoint file as that host
#     would) keeps the chat busy; break-lease removes it, names its holder, and the chat goes on.
#     (A dead process on this host needs no break-lease: the next call takes its lease over.)
#     The file's pages carry checksums: a hand-made write goes through the checksum VFS, loaded
#     into the sqlite3 shell as an extension (a write without it would make the page read as
#     damaged); the file is opened after the load, so through it.
expires=$(( ($(date +%s) + 3600) * 1000 ))
sqlite3 -cmd ".load ${checksum_ext%.so}" -cmd ".open $db.checkpoints" :memory: \
  "INSERT OR REPLACE INTO leases(thread_id, owner, expires_at) VALUES('t5', 'crashed-host:4242:0123456789abcdef:1', $expires)"
expect_error 1 "chat on a chat held by another host" -- "$bin" chat --db "$db" --thread t5 "Hello"
grep -q "busy: held by crashed-host:4242" "$work/err" || fail "the busy error names the holder: $(cat "$work/err")"
"$bin" break-lease --db "$db" --thread t5 | grep -q "removed the lease held by crashed-host:4242" || fail "break-lease names the holder"
"$bin" break-lease --db "$db" --thread t5 | grep -q "no lease was held" || fail "break-lease twice"
"$bin" chat --db "$db" --thread t5 "Hello" | grep -q "^assistant: Hello" || fail "chat after break-lease"
ok "break-lease frees a chat held by a crashed host"

# 11. --stream: the turn's task and checkpoint events as JSON lines, then the turn (issue 12,
#     stream modes). Every task's result follows its start; each checkpoint names the thread; the
#     resume first shows the checkpoint it goes on from, waiting on the permission question.
"$bin" chat --db "$db" --thread t6 --json --stream tasks,checkpoints "Send an email to Anna about lunch" >"$work/stream.jsonl"
"$bin" resume --db "$db" --thread t6 --json --stream checkpoints approve >"$work/stream_resume.jsonl"
python3 - "$work/stream.jsonl" "$work/stream_resume.jsonl" <<'PY' || fail "--stream events"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
*events, turn = lines
assert turn["status"] == "interrupted", turn
starts = [e for e in events if e["mode"] == "tasks" and "input" in e["data"]]
results = {e["data"]["id"]: e for e in events if e["mode"] == "tasks" and "result" in e["data"]}
assert starts and all(s["data"]["id"] in results for s in starts), "a task without its result"
names = [s["node"] for s in starts]
assert names[0] == "session_init" and "global_planner" in names and names[-1] == "agent_execution", names
cps = [e for e in events if e["mode"] == "checkpoints"]
assert cps[0]["data"]["metadata"]["source"] == "input" and cps[0]["data"]["next"] == ["__start__"], cps[0]
assert all(c["data"]["config"]["configurable"]["thread_id"] == "t6" for c in cps)
steps = [c["data"]["metadata"]["step"] for c in cps]
assert steps == sorted(steps) and len(set(steps)) == len(steps), steps
*again, done = [json.loads(l) for l in open(sys.argv[2])]
assert done["status"] == "done", done
first = again[0]["data"]
assert first["config"]["configurable"]["checkpoint_id"] == cps[-1]["data"]["config"]["configurable"]["checkpoint_id"]
assert any(t["interrupts"] for t in first["tasks"]), first["tasks"]
assert again[-1]["data"]["next"] == [], again[-1]
PY
expect_error 2 "--stream with an unknown mode" -- "$bin" chat --db "$db" --thread t6 --stream tasks,tokens "Hi"
ok "--stream prints task and checkpoint events"

# 12. --checkpointer redis:// and postgresql://: the checkpoints on the server of
#     STATEGRAPH_TEST_REDIS / STATEGRAPH_TEST_POSTGRES (both set by scripts/test), the memory in the
#     file; interrupted in one process, resumed in another.
# remote_checks NAME URL [ARGS...]: runs the checks against the saver at URL ("" when the server
# is not set), with ARGS added to every call. For "tiered" (Redis in front of PostgreSQL), Redis
# loses the chat between the interrupt and the state/resume calls, as an eviction would.
remote_checks() {
  local name=$1 url=$2
  shift 2
  if [ -z "$url" ]; then
    echo "skip: --checkpointer $name (its server is not set)"
    return
  fi
  local rdb="$work/$name-chat.db" rthread="cli-$name-$$-$(date +%s%N)" rc=0
  local remote=(--checkpointer "$url" "$@")
  "$bin" chat --db "$rdb" --thread "$rthread" "${remote[@]}" --json "Thomas is traveling to Mallorca" \
    >"$work/r_thomas.json" 2>"$work/r_err" || rc=$?
  if [ "$rc" -eq 2 ] && grep -q "this build has no" "$work/r_err"; then
    echo "skip: --checkpointer $name (built without that saver)"
    return
  fi
  [ "$rc" -eq 0 ] || fail "$name chat: exit $rc: $(cat "$work/r_err")"
  [ "$(json "$work/r_thomas.json" 'j["status"]')" = interrupted ] || fail "$name: not interrupted"
  [ ! -e "$rdb.checkpoints" ] || fail "$name: a checkpoint file was written beside the memory"
  if [ "$name" = tiered ]; then
    [ -n "$(forget_in_redis "$rthread")" ] || fail "tiered: the chat was not in Redis"
  fi
  "$bin" state --db "$rdb" --thread "$rthread" "${remote[@]}" --json >"$work/r_state.json"
  [ "$(json "$work/r_state.json" 'j["next"]')" = "['disambiguation_blocking']" ] || fail "$name: state next"
  "$bin" resume --db "$rdb" --thread "$rthread" "${remote[@]}" --json "Thomas Berger" >"$work/r_resume.json"
  [ "$(json "$work/r_resume.json" 'j["status"]')" = done ] || fail "$name: resume status"
  json "$work/r_resume.json" 'j["reply"]' | grep -q "Thomas Berger" || fail "$name: resume reply"
  "$bin" history --db "$rdb" --thread "$rthread" "${remote[@]}" --json >"$work/r_history.json"
  [ "$(json "$work/r_history.json" 'len(j) > 10')" = True ] || fail "$name: history length"
  "$bin" break-lease --db "$rdb" --thread "$rthread" "${remote[@]}" | grep -q "no lease was held" || fail "$name: break-lease"
  ok "--checkpointer $name (interrupt and resume in two processes, state, history, break-lease)"
}
remote_checks redis "${STATEGRAPH_TEST_REDIS:-}"
if [ -n "${STATEGRAPH_TEST_REDIS:-}" ] && command -v redis-cli >/dev/null; then
  redis-cli -u "$STATEGRAPH_TEST_REDIS" --scan --pattern "global_supervisor:{cli-redis-$$-*" | \
    while read -r k; do redis-cli -u "$STATEGRAPH_TEST_REDIS" del "$k" >/dev/null; done
fi
remote_checks postgresql "${STATEGRAPH_TEST_POSTGRES:-}"
# forget_in_redis THREAD: deletes the chat's keys from Redis (from this process, as an eviction
# or FLUSHDB would) and prints how many there were.
forget_in_redis() {
  redis-cli -u "$STATEGRAPH_TEST_REDIS" --scan --pattern "global_supervisor:{$1}:*" | while read -r k; do
    redis-cli -u "$STATEGRAPH_TEST_REDIS" del "$k" >/dev/null
    echo "$k"
  done
  redis-cli -u "$STATEGRAPH_TEST_REDIS" srem global_supervisor:threads "$1" >/dev/null
}
if [ -n "${STATEGRAPH_TEST_POSTGRES:-}" ] && command -v redis-cli >/dev/null; then
  remote_checks tiered "${STATEGRAPH_TEST_REDIS:-}" --fallback "$STATEGRAPH_TEST_POSTGRES"
else
  echo "skip: --checkpointer redis:// --fallback postgresql:// (needs both servers and redis-cli)"
fi
expect_error 2 "--fallback without a Redis front" -- "$bin" state --db "$db" --thread t1 --fallback postgresql://x
expect_error 2 "--checkpointer with an unknown scheme" -- "$bin" state --db "$db" --thread t1 --checkpointer mysql://x

# 13. A damaged page (issue 23, break 3): one bit flipped in the last leaf page of the
#     checkpoints table of a file holding thread b. b reads as corrupt_checkpoint naming the page;
#     a chat on thread a then either succeeds without touching that page or is refused as
#     corrupt; b never reads as anything but corrupt afterwards (before, it read exit 0 with a
#     wrong state once a's write had rebalanced over the broken page).
dmg="$work/damaged.db"
"$bin" chat --db "$dmg" --thread b --json "Thomas is traveling to Mallorca" >/dev/null
leaf=$(sqlite3 -cmd ".load ${checksum_ext%.so}" -cmd ".open $dmg.checkpoints" :memory: \
  "SELECT max(pageno) FROM dbstat WHERE name = 'checkpoints' AND pagetype = 'leaf'")
page_size=$(sqlite3 -cmd ".load ${checksum_ext%.so}" -cmd ".open $dmg.checkpoints" :memory: "PRAGMA page_size")
python3 - "$dmg.checkpoints" $(( leaf * page_size - 200 )) <<'PY'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(int(sys.argv[2])); b = f.read(1); f.seek(int(sys.argv[2])); f.write(bytes([b[0] ^ 0x10]))
PY
expect_error 1 "state of a thread on a damaged page" -- "$bin" state --db "$dmg" --thread b
grep -q "page $leaf of the file is damaged" "$work/err" && grep -q "corrupt_checkpoint" "$work/err" \
  || fail "the damaged page is named: $(cat "$work/err")"
rc=0; "$bin" chat --db "$dmg" --thread a --json "Hi there!" >"$work/out" 2>"$work/err" || rc=$?
[ "$rc" -eq 0 ] || grep -q "corrupt_checkpoint" "$work/err" || fail "chat beside a damaged page: exit $rc, $(cat "$work/err")"
expect_error 1 "the damaged thread after a write on another thread" -- "$bin" state --db "$dmg" --thread b
grep -q "corrupt_checkpoint" "$work/err" || fail "b after a's write: $(cat "$work/err")"
ok "a damaged page is found before any write builds on it (chat on a: exit $rc)"

if [ "$failures" -ne 0 ]; then
  echo "$failures failure(s)" >&2
  exit 1
fi
echo "all CLI checks passed"
