#!/usr/bin/env bash
# End-to-end load: POST /verify with a StoreKit 2 signed transaction (local-only policy, so every
# request is JWS verification + policy checks + a ledger write, no upstream call), driven by wrk at
# 64 connections on loopback. Prints requests/s, p50, p99 and the gateway's peak RSS beside the
# single-core `openssl speed ecdsap256` verify rate measured in the same run.
#   Benchmarks/verify-load.sh [SECONDS] [--json FILE]   (default 10 s; needs wrk: apt-get install wrk)
# --json FILE also writes the figures (req/s, p50/p99 in ms, peak RSS in MB, openssl verify/s, ratio).
# IAPGW_SKIP_BUILD=1 uses the release binary as it is (Benchmarks/run.sh has just built it).
set -euo pipefail
cd "$(dirname "$0")/.."
source Benchmarks/lib.sh
seconds=10; json=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --json) json="$2"; shift 2 ;;
    *) seconds="$1"; shift ;;
  esac
done
command -v wrk >/dev/null || { echo "wrk is not installed (apt-get install wrk)"; exit 1; }
[[ "${IAPGW_SKIP_BUILD:-0}" == 1 ]] || swift build -c release --product iapgw-dev >/dev/null
dir="$(mktemp -d)"; pid=""; trap '[[ -n "$pid" ]] && kill "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
port=$(free_port); sim=$(free_port)
.build/release/iapgw-dev demo --port $port --sim-port $sim --dir "$dir" --local-only-jws >"$dir/demo.out" 2>"$dir/demo.log" &
pid=$!
for _ in $(seq 1 300); do grep -q "Ctrl-C" "$dir/demo.out" 2>/dev/null && break; sleep 0.1; done
key=$(grep -o "Bearer [A-Za-z0-9-]*" "$dir/demo.out" | head -1 | cut -d' ' -f2)
jws=$(cat "$dir/bob-signed-transaction.jws")
cat >"$dir/post.lua" <<LUA
wrk.method = "POST"
wrk.body = '{"account":"bob","signedTransaction":"$jws"}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $key"
done = function(summary, latency, requests)
  io.write(string.format("non2xx=%d\n", summary.errors.status))
end
LUA
# One warm-up request binds the purchase to bob; the rest are verified re-claims.
curl -s -o /dev/null -w "warm-up: HTTP %{http_code}\n" -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
    --data-binary "{\"account\":\"bob\",\"signedTransaction\":\"$jws\"}" "http://127.0.0.1:$port/v1/apps/com.example.demo/verify"
baseline=$(openssl_verify_rate 5)
out=$(wrk -t2 -c64 -d"${seconds}s" --latency -s "$dir/post.lua" "http://127.0.0.1:$port/v1/apps/com.example.demo/verify")
rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
p50=$(awk '$1=="50%" {print $2}' <<<"$out")
p99=$(awk '$1=="99%" {print $2}' <<<"$out")
non2xx=$(awk -F= '/non2xx/ {print $2}' <<<"$out")
rss_mb=$(awk '/VmHWM/ {printf "%.1f", $2/1024}' /proc/$pid/status)
rss="$rss_mb MB"
echo "$out" | sed -n '1,12p'
echo
echo "POST /verify (signed transaction, local-only): ${rps} req/s, p50 ${p50}, p99 ${p99}, non-2xx ${non2xx}, peak RSS ${rss} (gateway + simulator process)"
echo "openssl speed ecdsap256 verify (one core, same run): ${baseline}/s"
awk -v r="$rps" -v b="$baseline" 'BEGIN { printf "end-to-end on %d cores / raw single-core verify: %.2f\n", 2, r/b }'
if [[ -n "$json" ]]; then
  cat >"$json" <<JSON
{"connections":64,"seconds":$seconds,"requests_per_s":$rps,"p50_ms":$(wrk_ms "$p50"),"p99_ms":$(wrk_ms "$p99"),"non2xx":${non2xx:-0},"peak_rss_mb":$rss_mb,"openssl_speed_ecdsap256_verify_per_s":$baseline,"cores":$(nproc)}
JSON
fi
