#!/usr/bin/env bash
# Installs the pinned MCP servers (package-lock.json: @modelcontextprotocol/server-everything and
# server-filesystem) into tests/mcp/node_modules through ../server/npm_install.sh (`npm ci`; safe
# to run twice: when node_modules matches the lock file nothing is fetched, so a machine that
# installed them once runs the tests offline).
# Exit 0 when installed, 77 when node or npm is missing or the registry is unreachable before the
# first install (the MCP tests are then skipped), 1 on any other failure.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
"$here/../server/npm_install.sh" "$here" @modelcontextprotocol/server-everything
exec "$here/../server/npm_install.sh" "$here" @modelcontextprotocol/server-filesystem
