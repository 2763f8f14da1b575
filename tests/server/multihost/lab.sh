#!/usr/bin/env bash
# The multi-host lab of issue 24: hosts as network namespaces on one machine, one PostgreSQL,
# instances of multihost_server and HAProxy in front. Sourced by multihost_test.sh and bench.sh;
# run as a command by the driver to restart or stop one instance:
#
#   source lab.sh; lab_up BIN WORK [INSTANCES...]      # namespaces, PostgreSQL, HAProxy (no instance)
#   lab_start a; lab_kill a; lab_stop_instance a        # one instance (SIGKILL / SIGTERM)
#   lab_down                                            # everything lab_up made (also from a trap)
#   bash lab.sh WORK start|kill|term NAME               # the same from another process
#
#      root namespace                       namespaces <p>-pg, <p>-a, <p>-b, <p>-c
#   ┌──────────────────────────┐   veth   ┌────────────────────────────────────────┐
#   │ bridge <p>br 10.231.N.1  ├──────────┤ pg 10.231.N.10:5432 (trust for the /24) │
#   │ HAProxy 10.231.N.1:8080  ├──────────┤ a  10.231.N.11:8123  multihost_server   │
#   │ (round robin, no sticky) ├──────────┤ b  10.231.N.12:8123                     │
#   │ driver (node, the SDK)   ├──────────┤ c  10.231.N.13:8123                     │
#   └──────────────────────────┘          └────────────────────────────────────────┘
#
# N is the first of 7..99 whose 10.231.N.1 is not on this machine yet (so two labs, say in two
# checkouts, do not meet), or STATEGRAPH_MULTIHOST_SUBNET (e.g. 10.231.7). Names start with
# "mh" and the shell's pid. Everything made is written down in WORK/lab.env and removed by lab_down,
# which kills every process left in the lab's namespaces. Each wait is bounded.
#
# Settings (environment): MH_WORKERS (per instance, default 64), MH_LEASE_MS (default 2000),
# MH_NODE_MS (default 50), MH_POOL (default 16), MH_PGBIN (PostgreSQL's bin folder).

lab_say() { echo "lab: $*" >&2; }

# The PostgreSQL server binaries, or "" (the caller skips).
lab_pgbin() {
  local d
  for d in "${MH_PGBIN:-}" /usr/lib/postgresql/15/bin /usr/lib/postgresql/*/bin; do
    [ -n "$d" ] && [ -x "$d/pg_ctl" ] && [ -x "$d/initdb" ] && { echo "$d"; return 0; }
  done
  return 1
}

lab_balancer() { command -v haproxy 2>/dev/null || true; }

# Writes a variable to WORK/lab.env (read again by `bash lab.sh WORK ...`).
lab_keep() { printf '%s=%q\n' "$1" "$2" >>"$LAB_WORK/lab.env"; eval "$1=\$2"; }

lab_pick_subnet() {
  if [ -n "${STATEGRAPH_MULTIHOST_SUBNET:-}" ]; then echo "$STATEGRAPH_MULTIHOST_SUBNET"; return 0; fi
  local n
  for n in $(seq 7 99); do
    ip -4 -o addr show | grep -q " 10\.231\.$n\.1/" || { echo "10.231.$n"; return 0; }
  done
  return 1
}

# lab_up BIN WORK [NAMES...]: the namespaces, the bridge, PostgreSQL and HAProxy (routing to the
# instances NAMES, default a b c, started later with lab_start). Returns 1 with a message on failure
# (the caller's trap calls lab_down).
lab_up() {
  LAB_BIN="$1" LAB_WORK="$2"
  shift 2
  local names=("$@")
  [ "${#names[@]}" -gt 0 ] || names=(a b c)
  mkdir -p "$LAB_WORK"
  : >"$LAB_WORK/lab.env"
  lab_keep LAB_BIN "$LAB_BIN"
  lab_keep LAB_WORK "$LAB_WORK"
  lab_keep LAB_PREFIX "mh$(($$ % 100000))"
  lab_keep LAB_NAMES "${names[*]}"
  lab_keep LAB_TMP "$(mktemp -d /tmp/stategraph-multihost.XXXXXX)"
  local subnet
  subnet="$(lab_pick_subnet)" || { lab_say "no free 10.231.N.0/24 (7..99)"; return 1; }
  lab_keep LAB_SUBNET "$subnet"
  lab_keep LAB_BRIDGE "${LAB_PREFIX}br"
  lab_keep LAB_NAMESPACES ""
  lab_keep LAB_WORKERS "${MH_WORKERS:-64}"
  lab_keep LAB_LEASE_MS "${MH_LEASE_MS:-2000}"
  lab_keep LAB_NODE_MS "${MH_NODE_MS:-50}"
  lab_keep LAB_POOL "${MH_POOL:-16}"

  ip link add "$LAB_BRIDGE" type bridge || { lab_say "cannot make a bridge"; return 1; }
  lab_keep LAB_HAVE_BRIDGE 1
  ip addr add "$subnet.1/24" dev "$LAB_BRIDGE" && ip link set "$LAB_BRIDGE" up || return 1

  local host i=10
  for host in pg "${names[@]}"; do
    lab_host "$host" "$subnet.$i" || { lab_say "cannot make the namespace of $host"; return 1; }
    i=$((i + 1))
  done
  lab_pg_up || return 1
  lab_haproxy_up || return 1
  : >"$LAB_WORK/trace.log"
  lab_keep LAB_TRACE "$LAB_WORK/trace.log"
}

# lab_host NAME ADDRESS: a namespace <prefix>-NAME whose eth0 (a veth on the bridge) has ADDRESS.
lab_host() {
  local name="$1" addr="$2" ns="$LAB_PREFIX-$1"
  ip netns add "$ns" || return 1
  lab_keep LAB_NAMESPACES "$LAB_NAMESPACES $ns"
  lab_keep "LAB_ADDR_$name" "$addr"
  ip link add "${LAB_PREFIX}$name" type veth peer name "${LAB_PREFIX}${name}p" || return 1
  ip link set "${LAB_PREFIX}$name" master "$LAB_BRIDGE" up &&
    ip link set "${LAB_PREFIX}${name}p" netns "$ns" &&
    ip -n "$ns" link set "${LAB_PREFIX}${name}p" name eth0 &&
    ip -n "$ns" addr add "$addr/24" dev eth0 &&
    ip -n "$ns" link set eth0 up &&
    ip -n "$ns" link set lo up
}

lab_pg_up() {
  local pgbin
  pgbin="$(lab_pgbin)" || { lab_say "no PostgreSQL server binaries"; return 1; }
  local data="$LAB_TMP/pg" user=postgres addr="$LAB_ADDR_pg"
  id "$user" >/dev/null 2>&1 || { lab_say "no user postgres (Debian's postgresql package makes it)"; return 1; }
  mkdir -p "$data" && chown "$user" "$LAB_TMP" "$data" && chmod 700 "$data" && chmod 755 "$LAB_TMP"
  lab_keep LAB_PGBIN "$pgbin"
  lab_keep LAB_PGDATA "$data"
  su -s /bin/sh "$user" -c "$(printf '%q ' "$pgbin/initdb" -D "$data" -A trust -U postgres -E UTF8 --no-sync)" \
    >"$LAB_WORK/initdb.log" 2>&1 || { tail -n 20 "$LAB_WORK/initdb.log" >&2; return 1; }
  echo "host all all $LAB_SUBNET.0/24 trust" >>"$data/pg_hba.conf"
  ip netns exec "$LAB_PREFIX-pg" su -s /bin/sh "$user" -c "$(printf '%q ' "$pgbin/pg_ctl" -D "$data" \
    -l "$LAB_TMP/pg.log" -w -t 60 -o "-p 5432 -k $LAB_TMP -c listen_addresses=$addr -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300" start)" \
    >/dev/null || { tail -n 20 "$LAB_TMP/pg.log" >&2; return 1; }
  lab_keep LAB_PG_STARTED 1
  # Reached from an instance's namespace, over the lab's network, as the instances will.
  ip netns exec "$LAB_PREFIX-${LAB_NAMES%% *}" "$pgbin/psql" -h "$addr" -p 5432 -U postgres -d postgres -qtAc \
    "CREATE DATABASE stategraph" >/dev/null || { lab_say "PostgreSQL at $addr is not reachable from the namespace of ${LAB_NAMES%% *}"; return 1; }
  lab_keep LAB_PG_URL "postgresql://postgres@$addr:5432/stategraph"
}

lab_haproxy_up() {
  local bin
  bin="$(lab_balancer)"
  [ -n "$bin" ] || { lab_say "no load balancer: install Debian's haproxy (scripts/install-deps)"; return 1; }
  local cfg="$LAB_WORK/haproxy.cfg" name
  lab_keep LAB_LB_URL "http://$LAB_SUBNET.1:8080"
  {
    echo "global"
    echo "  maxconn 4096"
    echo "defaults"
    echo "  mode http"
    echo "  timeout connect 1s"
    echo "  timeout client 300s"
    echo "  timeout server 300s"
    echo "  retries 3"
    echo "  option redispatch 1"
    echo "frontend api"
    echo "  bind $LAB_SUBNET.1:8080"
    echo "  default_backend instances"
    echo "backend instances"
    echo "  balance roundrobin"
    # Chunked replies (runs/wait, SSE) forwarded at once: without it HAProxy holds a reply's small
    # last chunk back (MSG_MORE) and 3 instances behind it served 66 runs/s instead of 197.
    echo "  option http-no-delay"
    echo "  option httpchk GET /ok"
    echo "  http-response set-header x-multihost-backend %s"
    for name in $LAB_NAMES; do
      eval "echo \"  server $name \$LAB_ADDR_$name:8123 check inter 300 fall 2 rise 1\""
    done
  } >"$cfg"
  "$bin" -c -f "$cfg" >"$LAB_WORK/haproxy.check" 2>&1 || { cat "$LAB_WORK/haproxy.check" >&2; return 1; }
  "$bin" -db -f "$cfg" >"$LAB_WORK/haproxy.log" 2>&1 &
  lab_keep LAB_HAPROXY_PID $!
  local _
  for _ in $(seq 1 50); do
    (exec 3<>"/dev/tcp/$LAB_SUBNET.1/8080") 2>/dev/null && return 0
    kill -0 "$LAB_HAPROXY_PID" 2>/dev/null || break
    sleep 0.1
  done
  lab_say "HAProxy did not start: $(tail -n 5 "$LAB_WORK/haproxy.log")"
  return 1
}

# lab_start NAME [extra flags]: starts instance NAME (its id in the run store: NAME.<ms since the
# epoch>, new at each start) in its namespace and waits (bounded) for
# "listening on"; its stdout goes to WORK/NAME.out (truncated), stderr appended to WORK/NAME.log.
lab_start() {
  local name="$1"
  shift
  local addr
  eval "addr=\$LAB_ADDR_$name"
  [ -n "$addr" ] || { lab_say "no instance $name"; return 1; }
  : >"$LAB_WORK/$name.out"
  echo "--- start $(date +%T.%N)" >>"$LAB_WORK/$name.log"
  ip netns exec "$LAB_PREFIX-$name" "$LAB_BIN" --host "$addr" --port 8123 --checkpointer "$LAB_PG_URL" \
    --runs "$LAB_PG_URL" --instance "$name.$(date +%s%3N)" --workers "$LAB_WORKERS" --lease-ms "$LAB_LEASE_MS" --max-attempts "${LAB_MAX_ATTEMPTS:-1000}" \
    --node-ms "$LAB_NODE_MS" --pool "$LAB_POOL" --trace "$LAB_TRACE" "$@" \
    >"$LAB_WORK/$name.out" 2>>"$LAB_WORK/$name.log" </dev/null &
  local pid=$!
  disown "$pid" 2>/dev/null || true # no "Killed" line from this shell when it is SIGKILLed
  echo "$pid" >"$LAB_WORK/$name.pid"
  local _
  for _ in $(seq 1 150); do
    grep -q "^listening on " "$LAB_WORK/$name.out" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  lab_say "instance $name did not start: $(tail -n 5 "$LAB_WORK/$name.log")"
  return 1
}

# lab_wait_lb: until HAProxy answers GET /ok with 200, i.e. its health checks (every 300 ms) have
# seen an instance up since it started listening; bounded (10 s). Without it a slow start (a
# sanitized build) met 503s.
lab_wait_lb() {
  node -e '
    const url = process.argv[1] + "/ok", start = Date.now();
    function again() {
      if (Date.now() - start > 10000) { console.error("lab: HAProxy routed to no instance within 10 s"); process.exit(1); }
      setTimeout(probe, 100);
    }
    function probe() {
      require("http").get(url, (r) => { r.resume(); if (r.statusCode === 200) process.exit(0); again(); }).on("error", again);
    }
    probe();' "$LAB_LB_URL"
}

lab_pid() { cat "$LAB_WORK/$1.pid" 2>/dev/null || true; }

# lab_kill NAME: SIGKILL, and waits (bounded) until it is gone.
lab_kill() { lab_signal "$1" KILL; }
# lab_stop_instance NAME: SIGTERM (drain), and waits (bounded) until it is gone.
lab_stop_instance() { lab_signal "$1" TERM; }
lab_signal() {
  local pid _
  pid="$(lab_pid "$1")"
  [ -n "$pid" ] || return 0
  kill "-$2" "$pid" 2>/dev/null || true
  for _ in $(seq 1 300); do
    kill -0 "$pid" 2>/dev/null || { rm -f "$LAB_WORK/$1.pid"; return 0; }
    sleep 0.05
  done
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$LAB_WORK/$1.pid"
}

# lab_down: removes everything lab_up and lab_start made, whatever state they are in.
lab_down() {
  [ -n "${LAB_WORK:-}" ] && [ -f "$LAB_WORK/lab.env" ] || return 0
  # shellcheck disable=SC1091
  source "$LAB_WORK/lab.env"
  [ -n "${LAB_HAPROXY_PID:-}" ] && { kill "$LAB_HAPROXY_PID" 2>/dev/null; wait "$LAB_HAPROXY_PID" 2>/dev/null; }
  if [ -n "${LAB_PG_STARTED:-}" ]; then
    su -s /bin/sh postgres -c "$(printf '%q ' "$LAB_PGBIN/pg_ctl" -D "$LAB_PGDATA" -m immediate -w -t 20 stop)" \
      >/dev/null 2>&1 || true
  fi
  local ns pids _
  for ns in ${LAB_NAMESPACES:-}; do
    for _ in 1 2 3; do
      pids="$(ip netns pids "$ns" 2>/dev/null || true)"
      [ -n "$pids" ] || break
      # shellcheck disable=SC2086
      kill -KILL $pids 2>/dev/null || true
      sleep 0.2
    done
    ip netns del "$ns" 2>/dev/null || true
    # The veth's root end: gone with the namespace as a rule, but a namespace the kernel frees
    # late (seen once: a veth left behind) would keep it.
    ip link del "${LAB_PREFIX}${ns#"$LAB_PREFIX"-}" 2>/dev/null || true
  done
  [ -n "${LAB_HAVE_BRIDGE:-}" ] && ip link del "$LAB_BRIDGE" 2>/dev/null
  [ -n "${LAB_TMP:-}" ] && [ -d "$LAB_TMP" ] && rm -rf "$LAB_TMP"
  rm -f "$LAB_WORK/lab.env"
  return 0
}

# As a command: bash lab.sh WORK start|kill|term NAME
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -uo pipefail
  [ "$#" -eq 3 ] || { echo "usage: lab.sh WORK start|kill|term NAME" >&2; exit 2; }
  # shellcheck disable=SC1091
  source "$1/lab.env"
  case "$2" in
    start) lab_start "$3" ;;
    kill) lab_kill "$3" ;;
    term) lab_stop_instance "$3" ;;
    *) echo "lab.sh: unknown command $2" >&2; exit 2 ;;
  esac
fi
