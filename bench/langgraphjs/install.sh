#!/usr/bin/env bash
# Install what the LangGraph.js half of the benchmark needs, offline from
# registries only (Debian apt + npm):
#   1. apt: python3, make, g++ (node-gyp builds better-sqlite3 from source)
#   2. node headers that match the running node (node-gyp would download them
#      from nodejs.org, which is not reachable; the nodejs package ships them
#      in <prefix>/include/node, and npm_config_nodedir points node-gyp there)
#   3. npm ci with build-from-source, so better-sqlite3's install script skips
#      its prebuilt-binary download and compiles with node-gyp.
#
# Idempotent: when node_modules already matches package-lock.json and this
# node, and better-sqlite3 loads, nothing is reinstalled. --force reinstalls.
set -euo pipefail
cd "$(dirname "$0")"

force=0
for a in "$@"; do
  case "$a" in
    --force) force=1 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown argument $a" >&2; exit 2 ;;
  esac
done

say() { echo "install.sh: $*" >&2; }

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  say "node (>= 20) and npm are required"; exit 2
fi
node_version="$(node -p 'process.versions.node')"
if [ "${node_version%%.*}" -lt 20 ]; then
  say "node >= 20 is required (found $node_version)"; exit 2
fi

# ---- 1. build tools ----------------------------------------------------------
apt_updated=0
apt_install() {
  [ "$#" -eq 0 ] && return 0
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else say "need root to apt-get install $*"; exit 1; fi
  fi
  if [ "$apt_updated" -eq 0 ]; then
    say "apt-get update"
    $sudo apt-get update -qq
    apt_updated=1
  fi
  say "apt-get install $*"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@" >&2
}

missing=()
command -v python3 >/dev/null 2>&1 || missing+=(python3)
command -v make >/dev/null 2>&1 || missing+=(make)
command -v g++ >/dev/null 2>&1 || missing+=(g++)
apt_install "${missing[@]}"

# ---- 2. node headers matching this node ----------------------------------------
# A candidate prefix P is good when P/include/node/node_version.h has the
# running node's version and P/include/node/common.gypi exists.
headers_match() {
  local h="$1/include/node/node_version.h"
  [ -f "$h" ] && [ -f "$1/include/node/common.gypi" ] || return 1
  local v
  v="$(awk '/define NODE_MAJOR_VERSION/{a=$3} /define NODE_MINOR_VERSION/{b=$3} /define NODE_PATCH_VERSION/{c=$3} END{print a"."b"."c}' "$h")"
  [ "$v" = "$node_version" ]
}
find_nodedir() {
  local exec_prefix
  exec_prefix="$(dirname "$(dirname "$(node -p 'process.execPath')")")"
  for p in "${npm_config_nodedir:-}" "$exec_prefix" /usr /usr/local; do
    [ -n "$p" ] && headers_match "$p" && { echo "$p"; return 0; }
  done
  return 1
}
if ! nodedir="$(find_nodedir)"; then
  # Debian's own node headers (libnode-dev) only help if Debian's node is the
  # same major version as this one; installing them otherwise would pull in a
  # different nodejs, so check first.
  cand="$(apt-cache policy libnode-dev 2>/dev/null | awk '/Candidate:/{print $2}')"
  if [ -n "$cand" ] && [ "${cand%%.*}" = "${node_version%%.*}" ]; then
    apt_install libnode-dev
    nodedir="$(find_nodedir)" || true
  fi
fi
if [ -z "${nodedir:-}" ]; then
  say "no node headers for node $node_version found (looked for <prefix>/include/node/node_version.h"
  say "under \$npm_config_nodedir, node's own prefix, /usr and /usr/local). Install the headers that"
  say "belong to this node (the nodejs package from the same source usually ships them) and set"
  say "npm_config_nodedir=<prefix>; node-gyp cannot download them here."
  exit 1
fi
say "node $node_version, headers in $nodedir/include/node"

# ---- 3. npm ci ----------------------------------------------------------------
stamp="node_modules/.bench-install-stamp"
want="$(sha256sum package-lock.json | cut -d' ' -f1) node-$node_version"
sqlite_ok() {
  node -e 'const D = require("better-sqlite3"); new D(":memory:").prepare("select 1").get();' >/dev/null 2>&1
}
if [ "$force" -eq 0 ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && sqlite_ok; then
  say "node_modules is up to date (--force to reinstall)"
  exit 0
fi

say "npm ci (better-sqlite3 builds from source; takes a minute or two)"
export npm_config_nodedir="$nodedir"
export npm_config_build_from_source=true
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if ! npm ci --no-audit --no-fund --foreground-scripts >"$log" 2>&1; then
  tail -n 60 "$log" >&2
  say "npm ci failed (last 60 lines of its log above)"
  exit 1
fi
grep -E '^(added|gyp info ok|gyp ERR)' "$log" >&2 || true

if ! sqlite_ok; then
  say "better-sqlite3 did not build or does not load:"
  node -e 'require("better-sqlite3")' || true
  exit 1
fi
echo "$want" > "$stamp"
say "done: $(node -p 'require("better-sqlite3/package.json").version' 2>/dev/null || echo '?') better-sqlite3 built for node $node_version"
