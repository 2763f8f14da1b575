#!/usr/bin/env bash
# The server rows of scripts/bench: starts stategraph_bench_server and the LangGraph JS server
# (server.mjs) on free loopback ports, one after the other, drives each with load.mjs and stops it.
#
#   bench/langgraph-api/run.sh CPP_SERVER_BIN OUT_DIR [load.mjs options, e.g. --smoke --seconds 5]
#
# Writes OUT_DIR/cpp/server.memory.json and OUT_DIR/js/server.memory.json (one JSON line each, the
# shape of the other bench rows) and the servers' logs next to them. Exit 1 when a side fails.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="$1" out="$2"
shift 2
mkdir -p "$out/cpp" "$out/js"
say() { echo "bench: $*" >&2; }

pid=""
stop_server() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; pid=""; }
trap stop_server EXIT

load_opts=("$@")

# run_side SIDE DIR CMD...: start CMD (it prints "listening PORT"), drive it with load.mjs and
# the options given to this script, stop it.
run_side() {
  local side="$1" dir="$2"
  shift 2
  local log="$out/$dir/server.memory.server-log"
  "$@" >"$log" 2>&1 &
  pid=$!
  local port="" i
  for i in $(seq 1 600); do
    port="$(awk '/^listening [0-9]+$/{print $2; exit}' "$log")"
    [ -n "$port" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if [ -z "$port" ]; then
    say "  $side server did not start: $(tail -n 3 "$log")"; stop_server; return 1
  fi
  local f="$out/$dir/server.memory.json"
  if ! (cd "$here" && node load.mjs --url "http://127.0.0.1:$port" --side "$side" "${load_opts[@]}") >"$f" 2>"$f.err"; then
    say "  $side FAILED: $(tail -n 3 "$f.err")"; rm -f "$f"; stop_server; return 1
  fi
  stop_server
}

failed=0
say "server / memory (C++: stategraph_bench_server)"
run_side cpp cpp "$bin" --port 0 || failed=1
say "server / memory (LangGraph.js: @langchain/langgraph-api, in-memory)"
# LOG_LEVEL=warn: the server's per-request info log off, in its favour.
run_side langgraphjs js env LOG_LEVEL=warn node "$here/server.mjs" --port 0 || failed=1
exit "$failed"
