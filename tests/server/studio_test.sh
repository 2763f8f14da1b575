#!/usr/bin/env bash
# The studio page in a real browser: installs puppeteer-core (studio/install.sh), then
# studio/studio.mjs starts `global_supervisor serve` on a free loopback port with a fresh database,
# drives Debian's headless chromium through /studio and saves screenshots.
#   studio_test.sh GLOBAL_SUPERVISOR_BINARY WORK_DIR ARTIFACT_DIR
# Exit 0 pass, 1 fail, 77 skipped (no node, npm or chromium: CTest's SKIP_RETURN_CODE).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
code=0
"$here/studio/install.sh" || code=$?
[ "$code" -eq 0 ] || exit "$code"
rm -rf "$2" && mkdir -p "$2" "$3"
rm -f "$3"/studio-*.png # no screenshot of an earlier run is taken for this one
exec node "$here/studio/studio.mjs" "$1" "$2" "$3"
