#!/usr/bin/env bash
# The server rows of scripts/bench: starts stategraph_bench_server and the LangGraph JS server
# (server.mjs) on free loopback ports, one after the other, drives each with load.mjs and stops it.
#
#   bench/langgraph-api/run.sh CPP_SERVER_BIN OUT_DIR [load.mjs options, e.g. --smoke --seconds 5]
#
# Writes OUT_DIR/cpp/server.memory.json and OUT_DIR/js/server.memory.json (one JSON line each, the
# shape of the other bench rows) and the servers' logs next to them. Exit 1 when a side fails.
#
# The C++ server also runs with its checkpoints in SQLite (STATEGRAPH_BENCH_SERVER_CHECKPOINTERS,
# default "memory sqlite_normal postgres"; sqlite_normal is a file in OUT_DIR, postgres needs
# STATEGRAPH_BENCH_POSTGRES), C++ only: the LangGraph JS server keeps its checkpoints in memory.
# Before each C++ server, `stategraph_bench_server --in-process` measures the same graph on the
# same kind of store invoked in process (OUT_DIR/cpp/server_in_process.KIND.json): the rate the
# server's /runs/wait is compared with.
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
# run_side SIDE DIR KIND CMD...: as above, the row labelled with checkpointer KIND.
run_side() {
  local side="$1" dir="$2" kind="$3"
  shift 3
  local log="$out/$dir/server.$kind.server-log"
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
  local f="$out/$dir/server.$kind.json"
  if ! (cd "$here" && node load.mjs --url "http://127.0.0.1:$port" --side "$side" --checkpointer "$kind" "${load_opts[@]}") >"$f" 2>"$f.err"; then
    say "  $side FAILED: $(tail -n 3 "$f.err")"; rm -f "$f"; stop_server; return 1
  fi
  stop_server
}

# The in-process rate for KIND (ARGS: the checkpointer's arguments), before its server runs.
in_process() {
  local kind="$1"
  shift
  local secs=4 f="$out/cpp/server_in_process.$kind.json"
  [[ " ${load_opts[*]} " == *" --smoke "* ]] && secs=0.6
  if ! "$bin" "$@" --label "$kind" --in-process "$secs" >"$f" 2>"$f.err"; then
    say "  in process ($kind) FAILED: $(tail -n 3 "$f.err")"; rm -f "$f"; return 1
  fi
}

kinds="${STATEGRAPH_BENCH_SERVER_CHECKPOINTERS:-memory sqlite_normal postgres}"
failed=0
for kind in $kinds; do
  args=()
  case "$kind" in
    memory) ;;
    sqlite_normal) rm -f "$out/server-sqlite.db"*; args=(--checkpointer sqlite --db "$out/server-sqlite.db") ;;
    postgres)
      if [ -z "${STATEGRAPH_BENCH_POSTGRES:-}" ]; then say "server / postgres: no STATEGRAPH_BENCH_POSTGRES, skipped"; continue; fi
      args=(--checkpointer postgres --postgres "$STATEGRAPH_BENCH_POSTGRES") ;;
    *) say "server / $kind: unknown checkpointer (memory, sqlite_normal or postgres)"; failed=1; continue ;;
  esac
  say "server / $kind (C++: stategraph_bench_server; first the same graph in process)"
  in_process "$kind" "${args[@]}" || failed=1
  [ "$kind" = sqlite_normal ] && rm -f "$out/server-sqlite.db"*
  run_side cpp cpp "$kind" "$bin" "${args[@]}" --port 0 || failed=1
  if [ "$kind" = memory ]; then
    say "server / memory (LangGraph.js: @langchain/langgraph-api, in-memory)"
    # LOG_LEVEL=warn: the server's per-request info log off, in its favour.
    run_side langgraphjs js memory env LOG_LEVEL=warn node "$here/server.mjs" --port 0 || failed=1
  fi
done
rm -f "$out/server-sqlite.db"*
exit "$failed"
