#!/usr/bin/env bash
# Notifications under load (release build): V2 notifications signed in advance by the simulator,
# POSTed over loopback HTTP by C concurrent connections to a gateway with no background worker
# (each: outer + transaction + renewal JWS verified, durable ledger insert, then 200), then the
# inbox drained by one NotificationProcessor (state machine + entitlement + outbox; each entry atomic in
# its own savepoint, 16 entries per commit). Printed beside `openssl speed ecdsap256` verify/s measured in the same run.
#   Benchmarks/notifications-load.sh [COUNT] [CONNECTIONS] [STORAGE_URL]   (defaults 5000, 16, a fresh SQLite file)
# STORAGE_URL must name an empty database (sqlite:PATH or postgres://…); Benchmarks/run.sh makes one.
set -euo pipefail
cd "$(dirname "$0")/.."
source Benchmarks/lib.sh
count="${1:-5000}"
connections="${2:-16}"
storage=()
if [[ -n "${3:-}" ]]; then storage=(--storage "$3"); fi
if [[ "${IAPGW_SKIP_BUILD:-0}" != 1 ]]; then
  within 1800 swift build -c release --product iapgw-dev >/dev/null
  within 1800 swift build -c release --product iapgw >/dev/null
fi
# The gateway runs as its own process (`iapgw serve`), so its peak RSS and CPU are printed apart from
# the simulator's and the client's, which hold every signed notification of the run.
within 900 .build/release/iapgw-dev bench-notifications --count "$count" --connections "$connections" --seconds 3 \
    --gateway .build/release/iapgw "${storage[@]}"
