#!/usr/bin/env bash
# Installs the pinned @langchain/langgraph-sdk (package-lock.json) into tests/server/sdk/node_modules
# through ../npm_install.sh (`npm ci`; safe to run twice: when node_modules matches the lock file
# nothing is fetched, so a machine that installed it once runs the test offline).
# Exit 0 when installed, 77 when node or npm is missing or the registry is unreachable before the
# first install (the SDK test is then skipped), 1 on any other failure.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
exec "$here/../npm_install.sh" "$here" @langchain/langgraph-sdk
