#!/usr/bin/env bash
# ctest server_multihost (issue 24): three multihost_server instances, each in a network namespace
# of its own, one PostgreSQL in another, HAProxy in front (round robin, no stickiness), driven by
# the official SDK (driver.mjs): a run created through one instance streamed, joined and cancelled
# through another, then the kill loop (SIGKILL of the instance running a run, at random moments).
#
#   multihost_test.sh MULTIHOST_SERVER_BIN WORK_DIR
#   STATEGRAPH_MULTIHOST_KILLS=100 multihost_test.sh ...   # the full kill loop (default 12)
#
# Exit 0 pass, 1 fail, 77 skipped (not root, no `ip netns`, no PostgreSQL server binaries, no node).
# Everything made (namespaces, veths, the bridge, processes, the temporary folder) is removed on
# every exit (lab.sh: lab_down). The logs stay in WORK_DIR.
set -uo pipefail
bin="$1"
work="$2"
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=lab.sh
source "$here/lab.sh"

skip() { echo "multihost_test: SKIPPED: $*" >&2; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "not root (network namespaces need it)"
command -v ip >/dev/null 2>&1 || skip "no ip (iproute2)"
probe="mhprobe$$"
ip netns add "$probe" >/dev/null 2>&1 || skip "ip netns add does not work here"
ip netns del "$probe"
lab_pgbin >/dev/null || skip "no PostgreSQL server binaries (postgresql-15)"
status=0
"$here/../sdk/install.sh" || status=$?
[ "$status" -eq 0 ] || exit "$status"

rm -rf "$work" && mkdir -p "$work"
trap 'lab_down' EXIT
trap 'exit 1' INT TERM
fail() {
  echo "multihost_test: FAIL: $*" >&2
  local f
  for f in "$work"/*.log; do
    [ -f "$f" ] || continue
    echo "--- $(basename "$f") (last 15 lines)" >&2
    tail -n 15 "$f" >&2
  done
  exit 1
}

MH_LEASE_MS="${MH_LEASE_MS:-2000}" lab_up "$bin" "$work" a b c || fail "the lab did not come up"
echo "multihost_test: lab up: PostgreSQL $LAB_PG_URL, HAProxy $LAB_LB_URL, instances $LAB_NAMES on $LAB_SUBNET.11-13" >&2
# 1. One instance behind HAProxy (the others not started yet): the SDK flow.
lab_start a || fail "instance a did not start"
lab_wait_lb || fail "HAProxy did not route to instance a"
result=0
# `timeout`: a stuck driver is stopped before CTest's TIMEOUT, so that the trap removes the lab.
timeout 300 node "$here/driver.mjs" single --work "$work" || result=1
# 2. Three instances: across instances, then the kill loop.
for name in b c; do lab_start "$name" || fail "instance $name did not start"; done
sleep 1 # HAProxy's health checks (every 300 ms) see b and c up
kills="${STATEGRAPH_MULTIHOST_KILLS:-12}"
timeout $((240 + kills * 45)) node "$here/driver.mjs" multi --work "$work" --kills "$kills" || result=1
[ "$result" -eq 0 ] || fail "driver.mjs found failures (above)"
echo "multihost_test: PASS" >&2
