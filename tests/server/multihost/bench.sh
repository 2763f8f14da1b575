#!/usr/bin/env bash
# Issue 24's benchmark rows, on the lab of lab.sh (namespaces, one PostgreSQL, HAProxy):
#   - runs/s through HAProxy with 1, 2 and 3 instances on PostgreSQL, 64 clients, the llm node
#     waiting 50 ms (stateless runs.wait: each run a thread of its own);
#   - takeover time p50/p99 after SIGKILL (driver.mjs kills);
#   - one instance, straight to it (no HAProxy): runs/s on memory, SQLite and PostgreSQL.
#
#   bench.sh MULTIHOST_SERVER_BIN WORK [--seconds 10] [--clients 64] [--workers 8] [--kills 20]
#
# --workers: runs one instance executes at once (server_options::max_runs_in_flight); the scaling
# rows need it below clients / 3, else one instance already takes every client's run.
# Prints a table and writes WORK/bench.json (one row per line: scenario, checkpointer, metric,
# unit, value, and the load average while it was measured). Needs what multihost_test.sh needs.
set -uo pipefail
bin="$(realpath "$1")"
work="$2"
shift 2
seconds=10 clients=64 workers=8 kills=20
while [ "$#" -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift ;;
    --clients) clients="$2"; shift ;;
    --workers) workers="$2"; shift ;;
    --kills) kills="$2"; shift ;;
    *) echo "bench.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=lab.sh
source "$here/lab.sh"
[ "$(id -u)" -eq 0 ] || { echo "bench.sh: needs root (network namespaces)" >&2; exit 77; }
"$here/../sdk/install.sh" || exit $?
rm -rf "$work" && mkdir -p "$work"
trap 'lab_down' EXIT
trap 'exit 1' INT TERM
say() { echo "bench: $*" >&2; }
out="$work/bench.json"
: >"$out"

loadavg() { cut -d' ' -f1 /proc/loadavg; }
# row SCENARIO CHECKPOINTER METRIC UNIT VALUE LOAD_BEFORE
row() {
  printf '{"scenario":"%s","checkpointer":"%s","metric":"%s","unit":"%s","value":%s,"load":"%s-%s"}\n' \
    "$1" "$2" "$3" "$4" "$5" "$6" "$(loadavg)" >>"$out"
  printf '%-22s %-11s %-34s %10s %-6s load %s-%s\n' "$1" "$2" "$3" "$5" "$4" "$6" "$(loadavg)"
}
# load URL: the driver's runs/s row (JSON) on stdout
load() { node "$here/driver.mjs" load --url "$1" --clients "$clients" --seconds "$seconds" --warmup 2; }
field() { node -e 'const r=JSON.parse(require("fs").readFileSync(0,"utf8"));console.log(eval("r."+process.argv[1]))' "$1"; }
# only NAMES...: exactly these instances running (the others stopped with SIGTERM)
only() {
  local n
  for n in $LAB_NAMES; do
    if [[ " $* " == *" $n "* ]]; then
      [ -n "$(lab_pid "$n")" ] || lab_start "$n" || return 1
    else
      lab_stop_instance "$n"
    fi
  done
  sleep 1.5 # HAProxy's health checks (every 300 ms, down after 2) see the change
}

MH_WORKERS="$workers" MH_LEASE_MS="${MH_LEASE_MS:-2000}" lab_up "$bin" "$work" a b c || { say "the lab did not come up"; exit 1; }
say "lab: PostgreSQL $LAB_PG_URL, HAProxy $LAB_LB_URL; $clients clients, $workers workers per instance, $seconds s per row"
echo "scenario               checkpointer metric                                  value unit"

# 1. Scaling through HAProxy.
declare -A rate
set_of=("a" "a b" "a b c")
for n in 1 2 3; do
  only ${set_of[$((n - 1))]} || { say "instances did not start"; exit 1; }
  l0="$(loadavg)"
  r="$(load "$LAB_LB_URL")" || { say "load failed ($n instances): $r"; exit 1; }
  rate[$n]="$(echo "$r" | field runs_per_s)"
  row multihost postgres "runs_per_s_${n}_instances_${clients}_clients" "runs/s" "$(printf '%.1f' "${rate[$n]}")" "$l0"
  row multihost postgres "p99_ms_${n}_instances" "ms" "$(printf '%.0f' "$(echo "$r" | field latency_ms.p99)")" "$l0"
  [ "$(echo "$r" | field errors)" = 0 ] || say "  $n instances: $(echo "$r" | field errors) errors, first: $(echo "$r" | field first_error)"
done
row multihost postgres "scaling_3_over_1" "x" "$(node -e "console.log((${rate[3]}/${rate[1]}).toFixed(2))")" "-"

# 2. Takeover after SIGKILL.
only a b c || exit 1
l0="$(loadavg)"
if node "$here/driver.mjs" kills --work "$work" --kills "$kills" 2>"$work/kills.log"; then
  k="$(cat "$work/killloop.json")"
  row multihost postgres "takeover_ms_p50_${kills}_kills" "ms" "$(printf '%.0f' "$(echo "$k" | field takeover_ms.p50)")" "$l0"
  row multihost postgres "takeover_ms_p99_${kills}_kills" "ms" "$(printf '%.0f' "$(echo "$k" | field takeover_ms.p99)")" "$l0"
else
  say "takeover: the kill loop failed, no takeover row ($(grep -m1 '^FAIL' "$work/kills.log" | cut -c1-300))"
fi

# 3. One instance, straight to it: memory, SQLite, PostgreSQL.
only || true
for cp in memory sqlite postgres; do
  case "$cp" in
    memory) extra=(--checkpointer memory --runs "") ;;
    sqlite) extra=(--checkpointer "sqlite:$LAB_TMP/one.db" --runs "sqlite:$LAB_TMP/one.db") ;;
    postgres) extra=() ;;
  esac
  lab_start a "${extra[@]}" || { say "instance a ($cp) did not start"; exit 1; }
  l0="$(loadavg)"
  r="$(load "http://$LAB_ADDR_a:8123")" || { say "load failed ($cp): $r"; exit 1; }
  row server "$cp" "runs_per_s_1_instance_${clients}_clients" "runs/s" "$(printf '%.1f' "$(echo "$r" | field runs_per_s)")" "$l0"
  lab_stop_instance a
done
say "rows written to $out"
