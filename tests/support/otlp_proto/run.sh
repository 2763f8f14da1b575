#!/usr/bin/env bash
# CTest otlp_proto_check: the spans of docs/examples/tracing and of a Global Supervisor turn,
# decoded by OpenTelemetry's own OTLP protobuf classes (check.cjs). Installs the pinned
# @opentelemetry/otlp-transformer into WORK_DIR (npm ci, offline once installed).
#   run.sh WORK_DIR TRACING_PROGRAM GLOBAL_SUPERVISOR
# Exit 0 pass; 1 fail; 77 skipped (no node or npm, or the registry unreachable before the first install).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
work="$1" tracing="$2" supervisor="$3"
mkdir -p "$work/npm"
cp "$here/package.json" "$here/package-lock.json" "$here/check.cjs" "$work/npm/"
status=0
bash "$here/../../server/npm_install.sh" "$work/npm" @opentelemetry/otlp-transformer || status=$?
[ "$status" -eq 0 ] || exit "$status"
db="$(mktemp -d)"
trap 'rm -rf "$db"' EXIT
cd "$work/npm"
timeout -k 5 240 node check.cjs -- "$tracing" "{endpoint}" \
  -- "$supervisor" chat --db "$db/gs.db" --thread t1 --otlp "{endpoint}" "Plan my week: book flights to Zurich and review my portfolio" \
  -- "$supervisor" chat --db "$db/gs.db" --thread t2 --otlp "{endpoint}" "Thomas is traveling to Mallorca" \
  -- "$supervisor" resume --db "$db/gs.db" --thread t2 --otlp "{endpoint}" "Thomas Berger"
