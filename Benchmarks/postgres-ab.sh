#!/usr/bin/env bash
# PostgreSQL notifications, A/B of two iapgw-dev builds on a shared machine: each round runs pgbench's
# raw durable insert rate (16 clients, one 4 KB row per transaction, synchronous_commit=on), then each
# binary in turn (alternating which goes first) on a fresh database of the same throwaway cluster:
# notifications accepted/s over HTTP (÷ that round's pgbench) and the inbox drained/s.
#   Benchmarks/postgres-ab.sh BIN_A BIN_B [ROUNDS] [COUNT]     (defaults 3 rounds, 3000 notifications)
# Prints one line per run and writes them as JSON lines to Benchmarks/results/postgres-ab-<UTC time>.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."
source Benchmarks/lib.sh
bin_a="$1"
bin_b="$2"
rounds="${3:-3}"
count="${4:-3000}"
pg_bin="${PG_BIN:-/usr/lib/postgresql/15/bin}"
work=$(mktemp -d /tmp/iapgw-pg-ab.XXXXXX)
pg_up=0
cleanup() {
  pg_stop_cluster
  rm -rf "$work"
}
trap cleanup EXIT

mkdir -p Benchmarks/results
pg_start_cluster
out="Benchmarks/results/postgres-ab-$(date -u +%Y%m%dT%H%M%SZ).jsonl"

for round in $(seq 1 "$rounds"); do
  tps=$(pgbench_insert_rate 5)
  if (( round % 2 )); then order=(a b); else order=(b a); fi
  for which in "${order[@]}"; do
    if [[ $which == a ]]; then bin="$bin_a"; else bin="$bin_b"; fi
    db="iapgw_${round}_${which}"
    "$pg_bin/createdb" "${pg[@]}" "$db"
    # The receipt seal key lives beside an SQLite file by default; a PostgreSQL run has none.
    IAPGW_RECEIPT_SEAL_KEY=$(openssl rand -hex 32) within 900 "$bin" bench-notifications --count "$count" --connections 16 \
      --seconds 1 --storage "postgres://postgres@127.0.0.1:$pg_port/$db" --json "$work/run.json" >"$work/run.out" 2>&1 \
      || echo "round $round $which: bench-notifications exited non-zero (not every notification accepted and drained)" >&2
    python3 - "$work/run.json" "$which" "$round" "${tps:-0}" >>"$out" <<'EOF'
import json, sys
figures = json.load(open(sys.argv[1]))
figures.update(binary=sys.argv[2], round=int(sys.argv[3]), pgbench_per_s=float(sys.argv[4]))
figures["accepted_per_pgbench"] = figures["accepted_per_s"] / figures["pgbench_per_s"]
print(json.dumps(figures))
print(f"round {figures['round']} {figures['binary']}: accepted {figures['accepted_per_s']:.0f}/s "
      f"= {figures['accepted_per_pgbench']:.2f}x pgbench {figures['pgbench_per_s']:.0f}/s; "
      f"drained {figures['drained_per_s']:.0f}/s ({figures['drained']}/{figures['count']})", file=sys.stderr)
EOF
  done
done
echo "figures: $out"
