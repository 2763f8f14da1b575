#!/usr/bin/env bash
# Installs the pinned @langchain/langgraph-sdk (package-lock.json) into tests/server/sdk/node_modules
# with `npm ci`. Safe to run twice: when node_modules matches the lock file (a stamp holds its
# hash) nothing is fetched, so a machine that installed it once runs the test offline.
# Exit 0 when installed, 77 when node or npm is missing or the registry is unreachable before the
# first install (the SDK test is then skipped), 1 on any other failure.
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "sdk/install.sh: node and npm are needed for the SDK test (node >= 20)" >&2
  exit 77
fi
stamp=node_modules/.stategraph-stamp
want="$(sha256sum package-lock.json | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -f node_modules/@langchain/langgraph-sdk/package.json ]; then
  exit 0
fi
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if ! npm ci --no-audit --no-fund >"$log" 2>&1; then
  # No registry here (offline machine) and nothing installed yet: the SDK test is skipped, loudly.
  if grep -qE 'ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ETIMEDOUT|ENETUNREACH' "$log"; then
    echo "sdk/install.sh: the npm registry is unreachable and the SDK is not installed yet: SDK test SKIPPED" >&2
    exit 77
  fi
  tail -n 30 "$log" >&2
  echo "sdk/install.sh: npm ci failed (log above)" >&2
  exit 1
fi
echo "$want" >"$stamp"
echo "sdk/install.sh: @langchain/langgraph-sdk $(node -p 'require("./node_modules/@langchain/langgraph-sdk/package.json").version') installed" >&2
