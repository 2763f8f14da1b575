#!/usr/bin/env bash
# Installs the LangGraph JS server (@langchain/langgraph-api 2.0.0 and the packages it runs on, all
# pinned in package-lock.json) into bench/langgraph-api/node_modules. Nothing is built from source.
# `npm install`, not `npm ci`: npm ci calls this lock file out of sync over optional platform
# packages (@tailwindcss/oxide-*, pulled in by @langchain/langgraph-ui) that it never lists; npm
# install takes the versions from the lock. The script fails if npm would change what the lock
# pins (a version, a resolved URL, an integrity, an entry gone); entries npm only adds, when every
# one of them is optional (platform packages the registry lists now, such as
# @tailwindcss/oxide-linux-x64-gnu), are tolerated: the lock is restored as it was and the
# additions are named. Idempotent: when node_modules matches the lock file and this node (a stamp
# holds both), nothing is fetched. --force reinstalls.
set -euo pipefail
cd "$(dirname "$0")"
[ "${1:-}" = "--force" ] && rm -f node_modules/.bench-install-stamp
command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 ||
  { echo "langgraph-api/install.sh: node (>= 20) and npm are required" >&2; exit 2; }
stamp=node_modules/.bench-install-stamp
want="$(sha256sum package-lock.json | cut -d' ' -f1) node-$(node -p process.versions.node)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -f node_modules/@langchain/langgraph-api/package.json ]; then
  echo "langgraph-api/install.sh: node_modules is up to date (--force to reinstall)" >&2
  exit 0
fi
log="$(mktemp)"
trap 'rm -f "$log" "$log.lock"' EXIT
cp package-lock.json "$log.lock"
if ! npm install --no-audit --no-fund >"$log" 2>&1; then
  tail -n 40 "$log" >&2
  echo "langgraph-api/install.sh: npm install failed (last 40 lines of its log above)" >&2
  exit 1
fi
if ! cmp -s package-lock.json "$log.lock"; then
  # What changed: pinned entries (fatal) or optional entries added (tolerated).
  verdict="$(node -e '
    const fs = require("fs");
    const [was, now] = process.argv.slice(1).map((f) => JSON.parse(fs.readFileSync(f, "utf8")).packages ?? {});
    const pin = (e) => JSON.stringify([e.version, e.resolved, e.integrity]);
    const changed = Object.keys(was).filter((k) => !(k in now) || pin(was[k]) !== pin(now[k]));
    const added = Object.keys(now).filter((k) => !(k in was));
    const required = added.filter((k) => !now[k].optional);
    if (changed.length || required.length) console.log("pins " + [...changed, ...required].slice(0, 8).join(" "));
    else console.log("optional " + added.join(" "));
  ' "$log.lock" package-lock.json 2>&1)" || verdict="pins (cannot compare: $verdict)"
  cp "$log.lock" package-lock.json
  case "$verdict" in
    optional*)
      echo "langgraph-api/install.sh: npm added optional packages the lock does not list (tolerated, lock left as it was):${verdict#optional}" >&2 ;;
    *)
      echo "langgraph-api/install.sh: npm install wanted to change package-lock.json (restored): ${verdict#pins }; update the pins" >&2
      exit 1 ;;
  esac
fi
echo "$want" >"$stamp"
echo "langgraph-api/install.sh: @langchain/langgraph-api $(node -p 'require("./node_modules/@langchain/langgraph-api/package.json").version') installed" >&2
