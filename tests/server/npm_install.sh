#!/usr/bin/env bash
# Installs the npm packages pinned in DIR/package-lock.json into DIR/node_modules with `npm ci`,
# for the tests that run node (sdk/, studio/). Safe to run twice: a stamp holds the lock file's
# hash, and when it matches (and DIR/node_modules/PACKAGE is there) nothing is fetched, so a
# machine that installed once runs the tests offline.
#   npm_install.sh DIR PACKAGE
# Exit 0 ready; 77 (the test is skipped) when node or npm is missing, or the npm registry cannot be
# reached before the first install; 1 on any other failure.
set -euo pipefail
dir="$1"
package="$2"
cd "$dir"
for tool in node npm; do
  command -v "$tool" >/dev/null 2>&1 || { echo "npm_install.sh: $tool is not installed: the test of $dir is SKIPPED" >&2; exit 77; }
done
lock_hash="$(sha256sum package-lock.json | cut -d' ' -f1)"
stamp=node_modules/.stategraph-stamp
if [ -f "node_modules/$package/package.json" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$lock_hash" ]; then
  exit 0
fi
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
if npm ci --no-audit --no-fund >"$out" 2>&1; then
  echo "$lock_hash" >"$stamp"
  echo "npm_install.sh: $package $(node -p "require('./node_modules/$package/package.json').version") installed in $dir" >&2
  exit 0
fi
if grep -qE 'ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ETIMEDOUT|ENETUNREACH' "$out"; then
  echo "npm_install.sh: the npm registry cannot be reached and $package is not installed yet: the test of $dir is SKIPPED" >&2
  exit 77
fi
tail -n 30 "$out" >&2
echo "npm_install.sh: npm ci failed in $dir (above)" >&2
exit 1
