#!/usr/bin/env bash
# Webhook delivery against notification intake (release build): a burst of COUNT REFUND_DECLINED
# notifications (one webhook event each, 25 per purchase chain) POSTed as fast as `iapgw serve` takes
# them over CONNECTIONS connections, its background work running as deployed, to an app whose receiver
# answers every delivery after LATENCY ms. Prints the backlog's drain time (burst start to the last
# event delivered) beside twice the burst's length, deliveries/s beside the concurrency's ceiling
# (concurrency / latency), and the writer's commits/s once the gateway is idle (IAPGW_WRITER_TRACE).
#   Benchmarks/webhooks-load.sh [COUNT] [CONNECTIONS] [LATENCY_MS] [CONCURRENCY]
#   (defaults 3000, 16, 20, the gateway's default webhooks.concurrency); IAPGW_BENCH_JSON=FILE also
#   writes the figures as JSON.
set -euo pipefail
cd "$(dirname "$0")/.."
source Benchmarks/lib.sh
count="${1:-3000}"
connections="${2:-16}"
latency="${3:-20}"
extra=()
if [[ -n "${4:-}" ]]; then extra+=(--concurrency "$4"); fi
if [[ -n "${IAPGW_BENCH_JSON:-}" ]]; then extra+=(--json "$IAPGW_BENCH_JSON"); fi
if [[ "${IAPGW_SKIP_BUILD:-0}" != 1 ]]; then
  within 1800 swift build -c release --product iapgw-dev >/dev/null
  within 1800 swift build -c release --product iapgw >/dev/null
fi
within 900 .build/release/iapgw-dev bench-webhooks --gateway .build/release/iapgw --count "$count" \
    --connections "$connections" --latency-ms "$latency" "${extra[@]}"
