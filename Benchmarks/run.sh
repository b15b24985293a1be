#!/usr/bin/env bash
# Every benchmark (Benchmarks/README.md) in one go, each figure a ratio to a baseline measured in this same run:
#   Benchmarks/run.sh [SECONDS]        (SECONDS per measurement, default 5)
# Writes Benchmarks/results/<UTC time>.json (all raw figures) and .md (the table printed at the end).
#   1. JWS verify/s, warm and cold chain cache          / openssl speed ecdsap256 verify/s (one core)
#      cold JWS/s beside Apple's Swift library 6.0 (built by Benchmarks/apple-swift-peer.sh setup DIR, outside
#      the project; IAPGW_APPLE_SWIFT_PEER=DIR, default ../peer-apple-swift), alternating rounds on one core
#   2. the same JWS through Apple's Python library      / iapgw's warm rate (as "iapgw is N× faster")
#   3. the 187-record receipt parsed+verified/s         / the Python library's receipt utility
#   4. POST /verify at 64 connections (wrk), re-claims and new grants (a pool of signed purchases), and
#      each offered at 50% / 80% of its peak, evenly paced (iapgw-dev pace; hey -q beside the re-claim
#      ones, informational): req/s, p50/p99/p99.9, errors, peak RSS of the process serving each load
#      / openssl verify/s (one core)
#   5. notifications accepted/s, durably, on SQLite and on PostgreSQL   / raw durable single-row inserts/s
#      of the same backend (sqlite3 CLI, WAL + synchronous=FULL; pgbench, 16 clients, one INSERT each)
#   6. POST /v1/retention (realtime retention request, answered with a signed offer): p50, p99 / Apple's ~700 ms deadline
#   7. webhook delivery after a notification burst at peak intake, receiver answering in 20 ms: the backlog's
#      drain time / 2 × the burst's length; deliveries/s / concurrency ÷ latency; writer commits/s while idle
#   8. re-claims and new grants of two instances on one PostgreSQL / one instance on SQLite, same cores and
#      run; each p99 with the pair at half its peak
# The PostgreSQL figures come from a throwaway cluster (initdb in a temp dir, loopback, a free port,
# its socket in the temp dir) stopped and deleted at exit.
# Environment: IAPGW_BENCH_NOTIFICATIONS (count, default 3000), PG_BIN (default /usr/lib/postgresql/15/bin).
set -euo pipefail
cd "$(dirname "$0")/.."
source Benchmarks/lib.sh
seconds="${1:-5}"
count="${IAPGW_BENCH_NOTIFICATIONS:-3000}"
pg_bin="${PG_BIN:-/usr/lib/postgresql/15/bin}"
stamp=$(date -u +%Y%m%dT%H%M%SZ)
work=$(mktemp -d /tmp/iapgw-bench.XXXXXX)
pg_up=0

cleanup() {
  pg_stop_cluster
  rm -rf "$work"
}
trap cleanup EXIT
now_ns() { date +%s%N; }
section() { echo; echo "== $*"; }

section "build (release)"
within 1800 swift build -c release --product iapgw-dev >/dev/null
within 1800 swift build -c release --product iapgw >/dev/null  # the gateway measured alone (new grants, notifications)
export IAPGW_SKIP_BUILD=1
iapgw=.build/release/iapgw-dev
git rev-parse --short HEAD >"$work/commit" 2>/dev/null || echo unknown >"$work/commit"

section "1-3. JWS and receipts (iapgw-dev bench --seconds $seconds), Apple's Python library as the peer"
python_args=()
if peer=$(within 900 bash Benchmarks/setup_python_peer.sh 2>"$work/peer.log" | tail -1) && [[ -n "$peer" ]]; then
  if [[ "$peer" == "env PYTHONPATH="* ]]; then
    rest="${peer#env PYTHONPATH=}"; export PYTHONPATH="${rest%% *}"; python="${rest#* }"
  else
    python="$peer"
  fi
  python_args=(--python "$python")
else
  echo "   the Python peer could not be installed; figures 2 and 3 lose their peer:"; sed 's/^/   /' "$work/peer.log"
fi
within $((40 * seconds + 300)) "$iapgw" bench --seconds "$seconds" "${python_args[@]}" --results "$work/bench.json" | sed 's/^/   /'

# Apple's Swift library is built outside the project by hand (it takes minutes); without it the row says how.
apple_peer="${IAPGW_APPLE_SWIFT_PEER:-$(cd .. && pwd)/peer-apple-swift}"
section "1b. cold JWS beside Apple's Swift library 6.0 (Benchmarks/apple-swift-peer.sh measure $apple_peer $seconds)"
if [[ -x "$apple_peer/pkg/.build/release/AppleSwiftBench" ]]; then
  within $((8 * seconds + 600)) bash Benchmarks/apple-swift-peer.sh measure "$apple_peer" "$seconds" \
      --json "$work/apple-swift.json" 2>&1 | sed 's/^/   /' ||
    { echo "   FAILED: apple-swift-peer.sh measure (output above)"; echo '{"skipped":"the peer measurement failed"}' >"$work/apple-swift.json"; }
else
  echo "   not measured: no peer built in $apple_peer; build it with Benchmarks/apple-swift-peer.sh setup $apple_peer"
  echo "   (or set IAPGW_APPLE_SWIFT_PEER to where it is built)"
  echo '{"skipped":"peer not built, run Benchmarks/apple-swift-peer.sh setup DIR"}' >"$work/apple-swift.json"
fi

section "4. POST /verify: re-claims, new grants, fixed offered rate (Benchmarks/verify-load.sh $seconds)"
within $((12 * seconds + 900)) bash Benchmarks/verify-load.sh "$seconds" --json "$work/verify.json" | sed 's/^/   /'

section "5a. notifications on SQLite ($count notifications, 16 connections)"
within 600 "$iapgw" bench-notifications --count "$count" --connections 16 --seconds 3 --gateway .build/release/iapgw \
    --json "$work/notif-sqlite.json" | sed 's/^/   /'
# Baseline: the same durability the inbox insert asks for (WAL, synchronous=FULL), one row of a
# notification's size per transaction, from the sqlite3 CLI.
inserts=1000
within 60 sqlite3 "$work/baseline.sqlite" "PRAGMA journal_mode=WAL;" "CREATE TABLE inbox(id INTEGER PRIMARY KEY, payload BLOB);" >/dev/null
{ echo "PRAGMA synchronous=FULL;"; for _ in $(seq 1 $inserts); do echo "INSERT INTO inbox(payload) VALUES (randomblob(4000));"; done; } >"$work/inserts.sql"
t0=$(now_ns); within 600 sqlite3 "$work/baseline.sqlite" <"$work/inserts.sql"; t1=$(now_ns)
awk -v n=$inserts -v ns=$((t1 - t0)) 'BEGIN { printf "{\"inserts\":%d,\"per_s\":%.1f}\n", n, n / (ns / 1e9) }' >"$work/sqlite-baseline.json"
echo "   baseline: sqlite3 CLI, $inserts single-row 4 KB inserts, WAL + synchronous=FULL: $(python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["per_s"]))' "$work/sqlite-baseline.json")/s"

section "5b. notifications on PostgreSQL (throwaway cluster on loopback)"
if [[ ! -x "$pg_bin/initdb" ]]; then
  echo "   skipped: no PostgreSQL server binaries in $pg_bin (set PG_BIN)"
else
  pg_start_cluster
  within 60 "$pg_bin/createdb" "${pg[@]}" iapgw_bench
  within 60 "$pg_bin/createdb" "${pg[@]}" iapgw_bench_alone  # the gateway process measured alone (its RSS)
  tps=$(pgbench_insert_rate "$seconds")
  echo "{\"clients\":16,\"per_s\":${tps:-0}}" >"$work/pg-baseline.json"
  echo "   baseline: pgbench, 16 clients, single-row 4 KB inserts, synchronous_commit=on: ${tps:-?}/s"
  storage="postgres://postgres@127.0.0.1:$pg_port/iapgw_bench"
  # The receipt seal key lives beside an SQLite file by default; a PostgreSQL run has none.
  if IAPGW_RECEIPT_SEAL_KEY=$(openssl rand -hex 32) within 600 "$iapgw" bench-notifications --count "$count" --connections 16 \
       --seconds 3 --storage "$storage" --gateway .build/release/iapgw --gateway-storage "${storage}_alone" \
       --json "$work/notif-postgres.json" >"$work/notif-postgres.out" 2>&1; then
    sed 's/^/   /' "$work/notif-postgres.out"
  elif grep -q "not in this build" "$work/notif-postgres.out"; then
    echo "   skipped: the PostgreSQL ledger is not in this build yet (SQLLedger(storage: \"postgres://…\") refuses);"
    echo "   merge main once it lands and run again. The pgbench baseline above was still measured."
    echo '{"skipped":"the PostgreSQL ledger is not in this build"}' >"$work/notif-postgres.json"
  else
    sed 's/^/   /' "$work/notif-postgres.out"
    echo "   FAILED: bench-notifications on PostgreSQL (output above)"
    echo '{"skipped":"bench-notifications failed on PostgreSQL"}' >"$work/notif-postgres.json"
  fi
fi

section "6. POST /v1/retention, 8 connections (iapgw-dev bench-retention): p99 / Apple's ~700 ms realtime deadline"
within 600 "$iapgw" bench-retention --count 3000 --connections 8 --json "$work/retention.json" | sed 's/^/   /'

# webhooks.concurrency 32: at the default 8 a 20 ms receiver takes at most 400 events a second, below
# this machine's intake (Benchmarks/README.md, row 7).
section "7. webhooks: a burst of $count notifications at peak intake, receiver answering in 20 ms, concurrency 32 (Benchmarks/webhooks-load.sh)"
IAPGW_BENCH_JSON="$work/webhooks.json" within 900 bash Benchmarks/webhooks-load.sh "$count" 16 20 32 | sed 's/^/   /' \
  || echo "   FAILED: bench-webhooks (output above)"

section "8. scaling out: two instances on one PostgreSQL against one on SQLite, same cores (Benchmarks/scale-out.sh $((2 * seconds)))"
within 1800 bash Benchmarks/scale-out.sh $((2 * seconds)) --json "$work/scale-out.json" | sed 's/^/   /' \
  || echo "   FAILED: scale-out (output above)"

section "summary"
mkdir -p Benchmarks/results
within 60 python3 Benchmarks/report.py "$work" "Benchmarks/results/$stamp" "Benchmarks/run.sh $seconds"
