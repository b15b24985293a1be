#!/usr/bin/env bash
# The README's run command: builds iapgw-dev (the demo, simulator and benchmarks; the production iapgw
# links none of that) and runs the gateway on its embedded defaults — SQLite
# under var/demo and the built-in App Store simulator (no Apple credentials needed) — on loopback,
# printing curl commands for an old-app receipt flow and a new-app transaction flow, then the
# migration (receipts in shadow routing, a planted disagreement, a small compare, the dashboard).
#   Scripts/demo.sh            serve until Ctrl-C (gateway :8080, simulator :8090)
#   Scripts/demo.sh --once     walk every flow itself, print each answer, exit 0 if all were as expected
set -euo pipefail
cd "$(dirname "$0")/.."
swift build -c release --product iapgw-dev >/dev/null
exec .build/release/iapgw-dev demo "$@"
