#!/usr/bin/env bash
# The SDK-driven test: starts `global_supervisor serve` on a free loopback port with a fresh
# database, runs sdk/flow.mjs (the official @langchain/langgraph-sdk) against it, stops it.
#   sdk_test.sh GLOBAL_SUPERVISOR_BINARY WORK_DIR
# Exit 0 pass, 1 fail, 77 skipped (no node/npm: CTest's SKIP_RETURN_CODE).
set -euo pipefail
bin="$1"
work="$2"
here="$(cd "$(dirname "$0")" && pwd)"
status=0
"$here/sdk/install.sh" || status=$?
[ "$status" -eq 0 ] || exit "$status"

rm -rf "$work" && mkdir -p "$work"
"$bin" serve --db "$work/chat.db" --port 0 >"$work/serve.out" 2>"$work/serve.log" &
pid=$!
stop() { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
trap stop EXIT
port=""
for _ in $(seq 1 100); do
  port="$(grep -o '127.0.0.1:[0-9]*' "$work/serve.out" 2>/dev/null | head -1 | cut -d: -f2 || true)"
  [ -n "$port" ] && break
  kill -0 "$pid" 2>/dev/null || { echo "sdk_test: the server exited:"; cat "$work/serve.log"; exit 1; }
  sleep 0.1
done
[ -n "$port" ] || { echo "sdk_test: the server did not print its address"; exit 1; }
if ! node "$here/sdk/flow.mjs" "http://127.0.0.1:$port"; then
  echo "sdk_test: the server's log (last 40 lines):"
  tail -n 40 "$work/serve.log"
  exit 1
fi
