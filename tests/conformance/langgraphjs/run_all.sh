#!/usr/bin/env bash
# Record the project's LangGraph.js golden files (issue 12's fixes; layout of ../shared/conformance).
#
#   bash run_all.sh           # npm ci if node_modules/ is missing, run every case, rewrite golden/*.json
#   bash run_all.sh --check   # run every case and diff against golden/*.json; writes nothing
#   bash run_all.sh 53 54     # only the cases whose file name starts with these prefixes
#
# Exits non-zero when a case crashed, printed something that is not one JSON document, or (with
# --check) differs from its golden file. Needs node >= 20; npm only the first time.
set -euo pipefail
cd "$(dirname "$0")"

check=0
only=()
for a in "$@"; do
  case "$a" in
    --check) check=1 ;;
    -h | --help) sed -n '2,9p' "$0"; exit 0 ;;
    *) only+=("$a") ;;
  esac
done

command -v node >/dev/null || { echo "node (>= 20) is required" >&2; exit 2; }
[ -d node_modules/@langchain/langgraph ] || npm ci --no-audit --no-fund

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p golden

problems=0
ran=0
for script in cases/[0-9][0-9]_*.mjs; do
  name="$(basename "$script" .mjs)"
  if [ "${#only[@]}" -gt 0 ]; then
    wanted=0
    for p in "${only[@]}"; do [[ "$name" == "$p"* ]] && wanted=1; done
    [ "$wanted" -eq 1 ] || continue
  fi
  ran=$((ran + 1))
  out="$work/$name.json"
  if ! node "$script" >"$out" 2>"$work/$name.err"; then
    echo "FAIL  $name"; tail -20 "$work/$name.err" | sed 's/^/      /'
    problems=$((problems + 1)); continue
  fi
  if ! node -e 'JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"))' "$out"; then
    echo "FAIL  $name: stdout is not one JSON document"
    problems=$((problems + 1)); continue
  fi
  if [ "$check" -eq 0 ]; then
    cp "$out" "golden/$name.json"; echo "wrote golden/$name.json"
  elif [ ! -f "golden/$name.json" ]; then
    echo "MISS  $name"; problems=$((problems + 1))
  elif diff -u "golden/$name.json" "$out" >"$work/$name.diff"; then
    echo "same  $name"
  else
    echo "DIFF  $name"; head -40 "$work/$name.diff" | sed 's/^/      /'; problems=$((problems + 1))
  fi
done

echo "$ran case(s), $problems problem(s); @langchain/langgraph $(node -p 'require("./node_modules/@langchain/langgraph/package.json").version'), node $(node --version)"
[ "$problems" -eq 0 ]
