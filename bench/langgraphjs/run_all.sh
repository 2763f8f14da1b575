#!/usr/bin/env bash
# Run every scenario with every checkpointer it applies to, each in its own
# node process, and print their JSON lines on stdout (one per pair).
#
#   bash bench/langgraphjs/run_all.sh              # full runs (minutes)
#   bash bench/langgraphjs/run_all.sh --smoke      # CI: runs=2, warmup=0, a few seconds per pair
#   bash bench/langgraphjs/run_all.sh --smoke -- chain20 hitl   # only these scenarios
#
# Options before "--" go to run.mjs unchanged. Needs install.sh to have run.
# Exit status is non-zero if any pair failed; a summary line goes to stderr.
set -euo pipefail
cd "$(dirname "$0")"

opts=()
only=()
while [ "$#" -gt 0 ]; do
  if [ "$1" = "--" ]; then shift; only=("$@"); break; fi
  opts+=("$1"); shift
done

if [ ! -d node_modules/@langchain/langgraph ]; then
  echo "run_all.sh: run bench/langgraphjs/install.sh first" >&2
  exit 2
fi

pass=0
fail=0
while read -r scenario checkpointer; do
  if [ "${#only[@]}" -gt 0 ] && [[ ! " ${only[*]} " == *" $scenario "* ]]; then continue; fi
  if node run.mjs "$scenario" "$checkpointer" "${opts[@]}"; then
    pass=$((pass + 1))
  else
    echo "run_all.sh: FAILED $scenario $checkpointer" >&2
    fail=$((fail + 1))
  fi
done < <(node run.mjs --list)

echo "langgraphjs bench: $pass passed, $fail failed" >&2
[ "$fail" -eq 0 ]
