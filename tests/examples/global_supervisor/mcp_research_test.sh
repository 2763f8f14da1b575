#!/usr/bin/env bash
# global_supervisor --mcp FILE (issue 28): the research agent asks the configured MCP servers
# (the real @modelcontextprotocol/server-everything over stdio, installed by tests/mcp/install.sh)
# after its notes; a server that cannot start is an error naming it, and a missing file one
# naming the file. Exit 77 (skipped) when the MCP servers cannot be installed here.
# usage: mcp_research_test.sh path/to/global_supervisor
set -uo pipefail

bin=${1:?usage: mcp_research_test.sh path/to/global_supervisor}
here="$(cd "$(dirname "$0")" && pwd)"
mcp_dir="$here/../../mcp"
"$mcp_dir/install.sh" >&2
rc=$?
[ "$rc" -eq 77 ] && { echo "skipped: the MCP servers cannot be installed here"; exit 77; }
[ "$rc" -eq 0 ] || { echo "FAIL: tests/mcp/install.sh exited $rc" >&2; exit 1; }
everything="$mcp_dir/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
[ -f "$everything" ] || { echo "FAIL: no $everything" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/gs_mcp.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
ok() { echo "ok: $*"; }

# 1. The research agent reports what the server's tool answered for the task.
cat >"$work/mcp.json" <<JSON
{"mcp_servers": [{"name": "everything", "type": "stdio", "command": "node", "args": ["$everything", "stdio"],
                  "description": "the MCP reference server"}]}
JSON
message="research quantum computing for me"
if "$bin" chat --db "$work/a.db" --thread r1 --mcp "$work/mcp.json" "$message" >"$work/out" 2>"$work/err"; then
  if grep -qF "From everything/echo: Echo: $message" "$work/out"; then ok "the research agent asked the MCP server"
  else fail "no MCP answer in: $(cat "$work/out")"; fi
else
  fail "chat --mcp failed: $(cat "$work/err")"
fi
# The same turn without --mcp: the notes only.
"$bin" chat --db "$work/b.db" --thread r2 "$message" >"$work/plain" 2>&1 || fail "chat without --mcp: $(cat "$work/plain")"
if grep -q "From everything" "$work/plain"; then fail "without --mcp the MCP server answered"; else ok "without --mcp: notes only"; fi

# 2. A server that cannot start: the error names it, nothing is run.
cat >"$work/broken.json" <<JSON
{"mcp_servers": [{"name": "broken-search", "type": "stdio", "command": "$work/no-such-program"}]}
JSON
rc=0
"$bin" chat --db "$work/c.db" --thread r3 --mcp "$work/broken.json" "$message" >"$work/out" 2>"$work/err" || rc=$?
if [ "$rc" -ne 0 ] && grep -q "broken-search" "$work/err"; then ok "a server that cannot start is an error naming it (exit $rc)"
else fail "broken server: exit $rc, stderr: $(cat "$work/err")"; fi

# 3. A configuration that is not valid: the file and the field are named.
echo '{"mcp_servers": [{"name": "x", "type": "stdio"}]}' >"$work/bad.json"
rc=0
"$bin" chat --db "$work/d.db" --thread r4 --mcp "$work/bad.json" "$message" >"$work/out" 2>"$work/err" || rc=$?
if [ "$rc" -ne 0 ] && grep -q "bad.json" "$work/err" && grep -q "command" "$work/err"; then ok "a bad configuration names the file and the field"
else fail "bad config: exit $rc, stderr: $(cat "$work/err")"; fi
rc=0
"$bin" chat --db "$work/e.db" --thread r5 --mcp "$work/missing.json" "$message" >"$work/out" 2>"$work/err" || rc=$?
if [ "$rc" -ne 0 ] && grep -q "missing.json" "$work/err"; then ok "a missing file is named"
else fail "missing file: exit $rc, stderr: $(cat "$work/err")"; fi

[ "$failures" -eq 0 ] || { echo "$failures failure(s)" >&2; exit 1; }
echo "all MCP research checks passed"
