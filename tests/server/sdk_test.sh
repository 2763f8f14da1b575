#!/usr/bin/env bash
# The SDK-driven test: starts `global_supervisor serve` on a free loopback port with a fresh
# database, runs sdk/flow.mjs (the official @langchain/langgraph-sdk) against it, stops it; then,
# given SUBGRAPH_SERVER, serves its graph with a subgraph at each verbosity level (full, events,
# result) and runs sdk/subgraphs.mjs against each.
#   sdk_test.sh GLOBAL_SUPERVISOR_BINARY WORK_DIR [SUBGRAPH_SERVER]
# Exit 0 pass, 1 fail, 77 skipped (no node/npm: CTest's SKIP_RETURN_CODE).
set -euo pipefail
bin="$1"
work="$2"
subgraph_server="${3:-}"
here="$(cd "$(dirname "$0")" && pwd)"
status=0
"$here/sdk/install.sh" || status=$?
[ "$status" -eq 0 ] || exit "$status"

rm -rf "$work" && mkdir -p "$work"
pid=""
stop() { [ -n "$pid" ] && { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }; return 0; }
trap stop EXIT
# Starts the server (the supervisor, or the command given) on a free port; sets pid and port.
start() {
  : >"$work/serve.out"
  if [ "$#" -eq 0 ]; then set -- "$bin" serve --db "$work/chat.db" --port 0; fi
  "$@" >"$work/serve.out" 2>>"$work/serve.log" &
  pid=$!
  port=""
  for _ in $(seq 1 100); do
    port="$(grep -o '127.0.0.1:[0-9]*' "$work/serve.out" 2>/dev/null | head -1 | cut -d: -f2 || true)"
    [ -n "$port" ] && return 0
    kill -0 "$pid" 2>/dev/null || { echo "sdk_test: the server exited:"; cat "$work/serve.log"; exit 1; }
    sleep 0.1
  done
  echo "sdk_test: the server did not print its address"
  exit 1
}
fail() {
  echo "sdk_test: $1; the server's log (last 40 lines):"
  tail -n 40 "$work/serve.log"
  exit 1
}

start
node "$here/sdk/flow.mjs" "http://127.0.0.1:$port" "$work/thread.txt" || fail "flow.mjs failed"
# SIGTERM: the server drains and exits 0.
kill -TERM "$pid"
code=0
wait "$pid" || code=$?
pid=""
[ "$code" -eq 0 ] || fail "serve exited with $code after SIGTERM"
grep -q "draining" "$work/serve.log" || fail "no drain message after SIGTERM"
start
node "$here/sdk/restart.mjs" "http://127.0.0.1:$port" "$(cat "$work/thread.txt")" || fail "restart.mjs failed"
stop
pid=""

# serve --metrics (issue 28), with an API key set: keyed (the default) answers /metrics to a
# caller with the key only, open to anyone, off to no one (404).
status_of() { # URL [KEY]: the HTTP status of a GET (0: no answer)
  node -e 'const [u, k] = process.argv.slice(1);
fetch(u, {headers: k ? {"x-api-key": k} : {}}).then(r => console.log(r.status), () => console.log(0));' "$@"
}
export STATEGRAPH_API_KEYS=metrics-key
for mode in keyed open off; do
  start "$bin" serve --db "$work/metrics-$mode.db" --port 0 --metrics "$mode"
  without="$(status_of "http://127.0.0.1:$port/metrics")"
  with="$(status_of "http://127.0.0.1:$port/metrics" metrics-key)"
  case "$mode" in
    keyed) want="401 200" ;;
    open) want="200 200" ;;
    off) want="404 404" ;;
  esac
  [ "$without $with" = "$want" ] || fail "--metrics $mode: /metrics answered $without without the key and $with with it (wanted $want)"
  stop
  pid=""
done
unset STATEGRAPH_API_KEYS
if "$bin" serve --db "$work/metrics-bad.db" --port 0 --metrics sometimes >/dev/null 2>"$work/bad.err"; then
  fail "--metrics sometimes was accepted"
fi
grep -q "keyed, open or off" "$work/bad.err" || fail "--metrics sometimes: no message naming the choices ($(cat "$work/bad.err"))"

# A graph with a subgraph, at each verbosity level.
if [ -n "$subgraph_server" ]; then
  for level in full events result; do
    start "$subgraph_server" --port 0 --verbosity "$level"
    node "$here/sdk/subgraphs.mjs" "http://127.0.0.1:$port" "$level" || fail "subgraphs.mjs failed at verbosity $level"
    stop
    pid=""
  done
fi
