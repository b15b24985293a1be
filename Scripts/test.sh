#!/usr/bin/env bash
# Runs every test of IAPGateway (the README's test command).
# The real Apple vectors are read from ../shared/testdata/apple-real (or $IAPGW_APPLE_REAL).
# Then the ledger's suite (and the multi-instance gateway tests) run again against a throwaway PostgreSQL cluster on loopback
# (Scripts/postgres.sh), when the server is installed; on CI (CI=true) it must be.
set -euo pipefail
cd "$(dirname "$0")/.."
swift build --build-tests
log="$(mktemp)"
pg_log="$(mktemp)"
pg_dir="$(mktemp -u /tmp/iapgw-postgres-XXXXXX)"
cleanup() {
    IAPGW_PG_DIR="$pg_dir" Scripts/postgres.sh stop >/dev/null 2>&1 || true
    rm -f "$log" "$pg_log"
}
trap cleanup EXIT

# A run's whole-suite summary ("Executed N tests, with [K tests skipped and] M failures") as "N K M";
# empty if there is none.
totals() {
    local pattern='Executed ([0-9]+) tests?, with (([0-9]+) tests? skipped and )?([0-9]+) failures?'
    local summary
    summary=$(grep -E "^[[:space:]]*$pattern" "$1" | tail -1)
    [ -n "$summary" ] || return 0
    sed -E "s/.*$pattern.*/\\1 \\3 \\4/; s/  / 0 /" <<<"$summary"
}

# The suite is XCTest only; Swift Testing would add a confusing "0 tests" summary.
set +e
swift test --skip-build --disable-swift-testing 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
read -r total skipped failed <<<"$(totals "$log")" || true
if [ -z "${total:-}" ] || [ "$total" -eq 0 ]; then echo "tests: no test ran"; exit 1; fi

pg_bin="${IAPGW_PG_BIN:-/usr/lib/postgresql/15/bin}"
if [ -x "$pg_bin/initdb" ]; then
    # The ledger's whole suite, and the gateway tests that run separate instances on one database.
    pg_suites="LedgerTests|MultiInstanceTests|NotificationDurabilityTests|CrashResilienceTests|StorageDeadlineTests|WebhookCrashTests|IdempotencyKeyTests|OwnershipRuleTests|FinishCrashTests|WebhookConcurrencyTests|RolloutTests|StorageMigrationTests|PrometheusAlertTests/testAReadOnlyDatabase"
    echo "== $pg_suites again on PostgreSQL =="
    url=$(IAPGW_PG_DIR="$pg_dir" Scripts/postgres.sh start)
    set +e
    IAPGW_TEST_POSTGRES_URL="$url" swift test --skip-build --disable-swift-testing \
        --filter "${IAPGW_PG_TEST_FILTER:-$pg_suites}" 2>&1 | tee "$pg_log"
    pg_status=${PIPESTATUS[0]}
    set -e
    IAPGW_PG_DIR="$pg_dir" Scripts/postgres.sh stop
    read -r pg_total pg_skipped pg_failed <<<"$(totals "$pg_log")" || true
    if [ -z "${pg_total:-}" ] || [ "$pg_total" -eq 0 ]; then
        echo "tests: the PostgreSQL run ran no test"; exit 1
    fi
    echo "tests on PostgreSQL: $((pg_total - pg_skipped - pg_failed)) passed, $pg_failed failed, $pg_skipped skipped"
    total=$((total + pg_total)); skipped=$((skipped + pg_skipped)); failed=$((failed + pg_failed))
    [ "$pg_status" -eq 0 ] || status=$pg_status
elif [ "${CI:-}" = "true" ]; then
    echo "tests: PostgreSQL is not installed ($pg_bin/initdb missing); .ci/run installs it"; exit 1
else
    echo "note: PostgreSQL server not installed ($pg_bin): the ledger's PostgreSQL run is skipped"
fi

# One plain closing line with the totals of both runs (skipped tests are neither).
echo "skipped: $skipped (each says why: SQLite-only or PostgreSQL-only)"
echo "tests: $((total - skipped - failed)) passed, $failed failed"
exit "$status"
