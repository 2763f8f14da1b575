#!/usr/bin/env bash
# Installs puppeteer-core, pinned in package-lock.json, for the browser test (studio_test.sh)
# through ../npm_install.sh (safe to run twice; offline once installed). The browser is Debian's
# chromium (scripts/install-deps installs it): puppeteer-core downloads none of its own.
# Exit 0 ready; 77 (the test is skipped) only when node, npm or the browser are not here, or the
# npm registry cannot be reached before the first install; 1 on any other failure.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
browser="${STATEGRAPH_CHROMIUM:-/usr/bin/chromium}"
[ -x "$browser" ] || { echo "studio/install.sh: no browser at $browser (apt-get install chromium): browser test SKIPPED" >&2; exit 77; }
exec "$here/../npm_install.sh" "$here" puppeteer-core
