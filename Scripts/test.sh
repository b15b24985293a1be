#!/usr/bin/env bash
# Runs every test of IAPGateway (the README's test command).
# The real Apple vectors are read from ../shared/testdata/apple-real (or $IAPGW_APPLE_REAL).
set -euo pipefail
cd "$(dirname "$0")/.."
swift build --build-tests
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
# The suite is XCTest only; Swift Testing would add a confusing "0 tests" summary.
set +e
swift test --skip-build --disable-swift-testing 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
# One plain closing line with the totals, from XCTest's summary of the whole run.
summary=$(grep -E "^[[:space:]]*Executed [0-9]+ tests?, with [0-9]+ failures?" "$log" | tail -1)
total=$(sed -E 's/.*Executed ([0-9]+) tests?.*/\1/' <<<"$summary")
failed=$(sed -E 's/.*with ([0-9]+) failures?.*/\1/' <<<"$summary")
if [ -z "$summary" ] || [ "$total" -eq 0 ]; then echo "tests: no test ran"; exit 1; fi
echo "tests: $((total - failed)) passed, $failed failed"
exit "$status"
