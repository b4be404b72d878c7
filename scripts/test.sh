#!/usr/bin/env bash
# test.sh: `make test`. Runs every module's tests with the race detector
# against the real services, and talks while it does: a line when each
# module starts and ends (with its duration), a line a minute while one
# runs long, and at the end the count of packages passed and failed, then
# what was not run (Oracle without ORACLE_DSN, kcat or chromium missing
# outside CI).
# Exit status 0 when every package passed.
set -uo pipefail

GO="${GO:-go}"
PKGS="${PKGS:-./...}"
cd "$(dirname "$0")/.."

modules=$($GO list -m -f '{{.Dir}}')
total_start=$(date +%s)
passed=0 failed=0 notests=0
failed_pkgs=()
log=$(mktemp)
trap 'rm -f "$log"' EXIT

for m in $modules; do
  rel=${m#"$PWD"}; rel=${rel#/}; rel=${rel:-.}
  start=$(date +%s)
  echo "== $rel: started at $(date -u +%H:%M:%S)"
  ( while sleep 60; do echo "   … $rel still running ($(( ($(date +%s) - start) / 60 ))m)"; done ) &
  ticker=$!
  (cd "$m" && $GO test -race -count=1 -timeout 14m $PKGS) 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  kill "$ticker" 2>/dev/null; wait "$ticker" 2>/dev/null
  p=$(grep -cE '^ok[[:space:]]' "$log")
  f=$(grep -cE '^FAIL[[:space:]]+[^[:space:]]+[[:space:]]' "$log")
  n=$(grep -cE '^\?[[:space:]]' "$log")
  # A build failure or a panic before any result still fails the module.
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  passed=$((passed + p)); failed=$((failed + f)); notests=$((notests + n))
  while read -r pkg; do failed_pkgs+=("$pkg"); done < <(grep -E '^FAIL[[:space:]]+[^[:space:]]+[[:space:]]' "$log" | awk '{print $2}')
  [ "$rc" -ne 0 ] && [ "$(grep -cE '^FAIL[[:space:]]+[^[:space:]]+[[:space:]]' "$log")" -eq 0 ] && failed_pkgs+=("$rel (build or setup failure)")
  status=passed; [ "$rc" -ne 0 ] && status=FAILED
  echo "== $rel: $status in $(( $(date +%s) - start ))s ($p packages passed, $f failed)"
done

# The SQLite conformance tests are built without the race detector only
# (conformance/sqlite*_test.go: //go:build !race): -race instruments
# modernc.org/sqlite's engine and slows it past the relay's heartbeat
# timeout. They run here, in a second pass over the conformance module.
start=$(date +%s)
echo "== conformance (SQLite, without -race): started at $(date -u +%H:%M:%S)"
(cd conformance && $GO test -count=1 -timeout 10m -run 'SQLite' .) 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
if [ "$rc" -eq 0 ]; then
  passed=$((passed + 1))
  echo "== conformance (SQLite, without -race): passed in $(( $(date +%s) - start ))s"
else
  failed=$((failed + 1)); failed_pkgs+=("conformance (SQLite, without -race)")
  echo "== conformance (SQLite, without -race): FAILED in $(( $(date +%s) - start ))s"
fi

if [ -z "${ORACLE_DSN:-}" ]; then
  echo "**********************************************************************"
  echo "ORACLE NOT RUN: no ORACLE_DSN, so every Oracle subtest of the conformance"
  echo "suite was skipped; the Oracle dialect was tested by its generated SQL only."
  echo "Set ORACLE_DSN=oracle://user:pass@host:1521/service to run it."
  echo "**********************************************************************"
else
  echo "Oracle: the conformance suite above ran its oracle subtests against ORACLE_DSN."
fi
if ! command -v kcat >/dev/null 2>&1; then
  echo "**********************************************************************"
  echo "KCAT NOT RUN: kcat is not on PATH, so kafka's TestKcatReadsKeyAndHeaders"
  echo "was skipped (CI fails it instead). Install it: apt-get install kcat"
  echo "(Debian/Ubuntu), brew install kcat (macOS), apk add kcat (Alpine)."
  echo "**********************************************************************"
fi
if ! command -v pgbouncer >/dev/null 2>&1 && [ ! -x /usr/sbin/pgbouncer ] || [ "$(id -u)" -ne 0 ] || ! command -v pg_createcluster >/dev/null 2>&1; then
  echo "**********************************************************************"
  echo "POSTGRESQL CLUSTERS NOT RUN: e2e/postgres (PgBouncer, failover) and"
  echo "internal/pgcluster need root, pg_createcluster (postgresql-common) and"
  echo "pgbouncer; they were skipped (CI fails them instead). Install them:"
  echo "apt-get install postgresql-common pgbouncer (docs/postgresql.md)."
  echo "**********************************************************************"
fi

if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1 && ! command -v google-chrome >/dev/null 2>&1; then
  echo "**********************************************************************"
  echo "CHROMIUM NOT RUN: no chromium on PATH, so console/e2e's"
  echo "TestConsoleInABrowser was skipped (CI fails it instead). Install it:"
  echo "apt-get update && apt-get install -y chromium (Debian/Ubuntu)."
  echo "**********************************************************************"
fi

elapsed=$(( $(date +%s) - total_start ))
if [ "$failed" -ne 0 ]; then
  echo "test: FAILED: $failed packages failed, $passed passed ($notests without tests) in ${elapsed}s:"
  for p in "${failed_pkgs[@]}"; do echo "  FAIL $p"; done
  exit 1
fi
echo "test: PASSED: $passed packages passed, 0 failed ($notests without tests) in ${elapsed}s"
