#!/usr/bin/env bash
# bench_server_smoke: stategraph_bench_server (the server rows' C++ side) serves the benchmark
# supervisor graph: one stateless /runs/wait runs the complex turn (21 nodes, its answer), one
# /runs/stream starts with the metadata event and ends with those values, a bad checkpointer is
# refused with exit 2 naming it, and --in-process (the rate the server rows are compared with)
# runs the same turn on memory and on an SQLite file and prints both rates under its label. The
# load itself (scripts/bench --only server) is not run here.
#
#   bench_server_smoke.sh STATEGRAPH_BENCH_SERVER WORK_DIR
set -uo pipefail
bin="$1" dir="$2"
mkdir -p "$dir"
log="$dir/bench_server_smoke.log"
command -v curl >/dev/null 2>&1 || { echo "bench_server_smoke: curl is needed: SKIPPED"; exit 77; }
fail() { echo "bench_server_smoke: FAILED: $*" >&2; exit 1; }

"$bin" --port 0 >"$log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null' EXIT
port=""
for _ in $(seq 1 100); do
  port="$(awk '/^listening [0-9]+$/{print $2; exit}' "$log")"
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || fail "the server did not print 'listening PORT': $(cat "$log")"

body='{"assistant_id":"supervisor","input":{"user_message":"Plan my week: book flights to Zurich and review my portfolio","chat_id":"smoke-1","user_id":"u1","hitl_resume_type":"none"},"config":{"recursion_limit":100}}'
wait_out="$(curl -sS --max-time 20 -H 'content-type: application/json' -d "$body" "http://127.0.0.1:$port/runs/wait")" ||
  fail "POST /runs/wait: curl failed"
grep -q '"ui_response":"synthesized 3 agent results"' <<<"$wait_out" || fail "/runs/wait: not the complex turn's answer: ${wait_out:0:300}"
nodes="$(grep -o '"trace":\[[^]]*\]' <<<"$wait_out" | grep -o '","' | wc -l)"
[ "$((nodes + 1))" -eq 21 ] || fail "/runs/wait: the trace has $((nodes + 1)) nodes, not 21"

stream_out="$(curl -sS -N --max-time 20 -H 'content-type: application/json' \
  -d "${body%\}},\"stream_mode\":[\"values\"]}" "http://127.0.0.1:$port/runs/stream")" || fail "POST /runs/stream: curl failed"
first="$(grep -m1 '^event:' <<<"$stream_out")"
[ "$first" = "event: metadata" ] || fail "/runs/stream: the first event is '$first', not metadata"
grep -q 'synthesized 3 agent results' <<<"$stream_out" || fail "/runs/stream: the values do not end with the turn's answer"

"$bin" --checkpointer nonsense >"$dir/bad.out" 2>&1
rc=$?
[ "$rc" -eq 2 ] || fail "an unknown checkpointer exited $rc, not 2"
grep -q "unknown checkpointer 'nonsense'" "$dir/bad.out" || fail "the usage error does not name the checkpointer: $(cat "$dir/bad.out")"
# --in-process: one JSON line, both rates counted from turns that ran (each turn's answer is checked).
for kind in memory sqlite; do
  args=(--label "smoke_$kind" --in-process 0.4)
  [ "$kind" = sqlite ] && { rm -f "$dir/in_process.db"*; args=(--checkpointer sqlite --db "$dir/in_process.db" "${args[@]}"); }
  out="$("$bin" "${args[@]}" 2>"$dir/in_process.err")" || fail "--in-process on $kind: exit $?: $(tail -n 3 "$dir/in_process.err")"
  grep -q "\"checkpointer\":\"smoke_$kind\"" <<<"$out" || fail "--in-process on $kind: not labelled smoke_$kind: $out"
  for metric in in_process_runs_per_s in_process_runs_per_s_64_in_flight; do
    n="$(grep -o "\"metric\":\"$metric\",[^}]*\"n\":[0-9]*" <<<"$out" | grep -o '[0-9]*$')"
    [ -n "$n" ] && [ "$n" -gt 0 ] || fail "--in-process on $kind: no turns counted for $metric: $out"
  done
done
rm -f "$dir/in_process.db"*
"$bin" --checkpointer postgres --in-process 1 >"$dir/bad_pg.out" 2>&1
rc=$?
[ "$rc" -eq 2 ] || fail "--checkpointer postgres without --postgres exited $rc, not 2"
grep -Eq "needs --postgres URL|unknown checkpointer 'postgres'" "$dir/bad_pg.out" || fail "postgres without a URL: $(cat "$dir/bad_pg.out")"
echo "bench_server_smoke: ok (port $port)"
