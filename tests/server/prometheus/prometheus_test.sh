#!/usr/bin/env bash
# GET /metrics scraped by a real Prometheus (Debian's package): starts metrics_server (an API key
# set; Prometheus sends it as a bearer token), makes one run, starts Prometheus on 127.0.0.1 with
# its own config and data dir (in WORKDIR), scrape interval 1 s, and asks its HTTP API until the
# series appear (30 s at most). Stops both at the end, however it ends.
#   prometheus_test.sh METRICS_SERVER WORKDIR
# Exit 77 (skipped) when prometheus is not installed.
set -u
server_bin=$1
work=$2
prom=$(command -v prometheus || true)
if [[ -z $prom ]]; then
  echo "SKIP: prometheus is not installed (scripts/install-deps installs Debian's package)"
  exit 77
fi
command -v curl >/dev/null || { echo "SKIP: curl is not installed"; exit 77; }

rm -rf "$work"
mkdir -p "$work/data"
key=metrics-test-key
server_pid=
prom_pid=
cleanup() {
  [[ -n $prom_pid ]] && kill "$prom_pid" 2>/dev/null && wait "$prom_pid" 2>/dev/null
  [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  echo "--- prometheus log (last lines)"
  tail -20 "$work/prometheus.log" 2>/dev/null
  exit 1
}

"$server_bin" "$key" >"$work/server.out" 2>&1 &
server_pid=$!
port=
for _ in $(seq 100); do
  port=$(sed -n 's/^listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$work/server.out")
  [[ -n $port ]] && break
  sleep 0.1
done
[[ -n $port ]] || fail "metrics_server did not start: $(cat "$work/server.out")"

# One run, so that the counters and histograms have samples.
out=$(curl -sS -X POST -H "x-api-key: $key" -H 'content-type: application/json' \
      -d '{"assistant_id":"counter","input":{"log":[]}}' "http://127.0.0.1:$port/runs/wait") ||
  fail "the run failed"
echo "run: $out"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/metrics")
[[ $code == 401 ]] || fail "GET /metrics without the key answered $code, not 401"

# A port for Prometheus: one nothing answers on, below Linux's ephemeral range (32768-60999) so
# that no client socket of a test running beside this one takes it. Another test may still bind it
# between the probe and Prometheus's listen: then Prometheus exits with "address already in use"
# and is started again on another port (5 attempts).
pick_port() {
  local p
  for _ in $(seq 50); do
    p=$((20000 + RANDOM % 12000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return 0; fi
  done
  return 1
}

cat >"$work/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: stategraph
    scrape_interval: 1s
    authorization:
      credentials: $key
    static_configs:
      - targets: ['127.0.0.1:$port']
YML
prom_port=
for attempt in 1 2 3 4 5; do
  prom_port=$(pick_port) || fail "no free port found"
  "$prom" --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/data" \
    --web.listen-address="127.0.0.1:$prom_port" >"$work/prometheus.log" 2>&1 &
  prom_pid=$!
  # Listening, or exited on a taken port: whichever comes first (5 s at most).
  for _ in $(seq 50); do
    grep -q 'address already in use' "$work/prometheus.log" && break
    curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$prom_port/-/ready" && break
    kill -0 "$prom_pid" 2>/dev/null || break
    sleep 0.1
  done
  if grep -q 'address already in use' "$work/prometheus.log"; then
    echo "port $prom_port was taken (attempt $attempt); trying another"
    kill "$prom_pid" 2>/dev/null; wait "$prom_pid" 2>/dev/null; prom_pid=
    continue
  fi
  break
done
[[ -n $prom_pid ]] || fail "prometheus could not listen on any of 5 ports"

query() { curl -s --max-time 2 --get "http://127.0.0.1:$prom_port/api/v1/query" --data-urlencode "query=$1"; }
# The instant value of a query with one series ("" while there is none).
value_of() { query "$1" | sed -n 's/.*"value":\[[0-9.]*,"\([^"]*\)"\].*/\1/p'; }

deadline=$((SECONDS + 30))
started=
while ((SECONDS < deadline)); do
  started=$(value_of 'stategraph_runs_started_total{job="stategraph"}')
  [[ -n $started ]] && break
  kill -0 "$prom_pid" 2>/dev/null || fail "prometheus exited"
  sleep 0.5
done
[[ -n $started ]] || fail "stategraph_runs_started_total did not appear in 30 s; up: $(query 'up')"
echo "stategraph_runs_started_total = $started"
[[ $started == 1 ]] || fail "stategraph_runs_started_total is $started, not 1"
ok=$(value_of 'stategraph_runs_ended_total{status="success"}')
[[ $ok == 1 ]] || fail "stategraph_runs_ended_total{status=\"success\"} is '$ok', not 1"
nodes=$(value_of 'stategraph_node_duration_seconds_count{graph="counter",node="tick"}')
[[ $nodes == 1 ]] || fail "stategraph_node_duration_seconds_count of tick is '$nodes', not 1"
inf=$(value_of 'stategraph_run_duration_seconds_bucket{le="+Inf"}')
[[ $inf == 1 ]] || fail "stategraph_run_duration_seconds_bucket{le=\"+Inf\"} is '$inf', not 1"
up=$(value_of 'up{job="stategraph"}')
[[ $up == 1 ]] || fail "up is '$up'"
success=$(value_of 'stategraph_runs{status="success"}')
[[ $success == 1 ]] || fail "stategraph_runs{status=\"success\"} is '$success', not 1"
echo "PASS: Prometheus scraped GET /metrics (runs, node and run histograms) with the bearer key"
