#!/usr/bin/env bash
# global_supervisor --permissions FILE: permission rules over the agents' planned steps, given on
# the command line (deny, ask, allow), and the usage errors of a bad rules file.
# usage: permissions_cli_test.sh path/to/global_supervisor
set -euo pipefail

bin=${1:?usage: permissions_cli_test.sh path/to/global_supervisor}
work=$(mktemp -d "${TMPDIR:-/tmp}/gs_perm.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
ok() { echo "ok: $*"; }
json() { python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1"; }

email="Send an email to Anna about dinner on Friday"

# 1. Without rules the brain asks before sending an email.
"$bin" chat --db "$work/a.db" --thread p0 --json "$email" >"$work/plain.json"
[ "$(json "$work/plain.json" 'j["status"]')" = interrupted ] && ok "no rules: the email step asks" \
  || fail "no rules: status $(json "$work/plain.json" 'j["status"]')"

# 2. A deny rule: the step is reported denied, naming the rule, without asking.
echo '{"deny": ["productivity(*email*)"]}' >"$work/deny.json"
"$bin" chat --db "$work/b.db" --thread p1 --json --permissions "$work/deny.json" "$email" >"$work/deny.out"
[ "$(json "$work/deny.out" 'j["status"]')" = done ] || fail "deny: status $(json "$work/deny.out" 'j["status"]')"
if grep -q 'productivity(\*email\*)' "$work/deny.out"; then ok "deny: the reply names the rule"; else fail "deny: $(cat "$work/deny.out")"; fi

# 3. An allow rule runs the step without asking.
echo '{"allow": ["productivity(*)"], "deny": [], "ask": []}' >"$work/allow.json"
"$bin" chat --db "$work/c.db" --thread p2 --json --permissions "$work/allow.json" "$email" >"$work/allow.out"
[ "$(json "$work/allow.out" 'j["status"]')" = done ] && ok "allow: ran without asking" || fail "allow: $(cat "$work/allow.out")"

# 4. Usage errors (exit 2, one line naming the file and what is wrong).
expect_usage() {
  local what=$1 want=$2; shift 2
  local rc=0
  "$@" >"$work/out" 2>"$work/err" || rc=$?
  if [ "$rc" -ne 2 ]; then fail "$what: exit $rc, expected 2 ($(cat "$work/err"))"; return; fi
  if [ "$(wc -l <"$work/err")" -ne 1 ]; then fail "$what: expected one line on stderr"; return; fi
  if ! grep -qF -- "$want" "$work/err"; then fail "$what: '$want' not in: $(cat "$work/err")"; return; fi
  ok "$what ($(cat "$work/err"))"
}
echo '{"refuse": ["wealth(*)"]}' >"$work/key.json"
echo '{"deny": ["(oops"]}' >"$work/rule.json"
echo '[1, 2]' >"$work/array.json"
expect_usage "unknown key" "unknown key 'refuse'" "$bin" chat --db "$work/d.db" --thread p3 --permissions "$work/key.json" hi
expect_usage "malformed rule" "(oops" "$bin" chat --db "$work/d.db" --thread p3 --permissions "$work/rule.json" hi
expect_usage "not an object" "is not a JSON object" "$bin" chat --db "$work/d.db" --thread p3 --permissions "$work/array.json" hi
expect_usage "missing file" "cannot read --permissions file" "$bin" chat --db "$work/d.db" --thread p3 --permissions "$work/none.json" hi
expect_usage "not for state" "unknown flag --permissions" "$bin" state --db "$work/a.db" --thread p0 --permissions "$work/deny.json"

if [ "$failures" -ne 0 ]; then echo "$failures failure(s)"; exit 1; fi
echo "all permission checks passed"
