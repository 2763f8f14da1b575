#!/usr/bin/env bash
# CTest's test_mcp: installs the pinned MCP servers (install.sh), then runs the Boost.Test
# executable given as $1 (the rest of the arguments are its own). Exit 77 (skipped) when node,
# npm or the registry is missing before the first install.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bash "$here/install.sh"
status=$?
[ "$status" -eq 0 ] || exit "$status"
exec "$@"
