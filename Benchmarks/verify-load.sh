#!/usr/bin/env bash
# End-to-end load: POST /verify with StoreKit 2 signed transactions (local-only policy, so every
# request is JWS verification + policy checks + a durable ledger write, no upstream call), on loopback:
#   re-claims   wrk, 64 connections, one already-bound purchase claimed again by its owner;
#   new grants  wrk, 64 connections, every request a different purchase from a pool the simulator
#               signed before the run (each verifies, binds and grants once, under its own account),
#               against the gateway alone (`iapgw serve` on the demo's config: the simulator holding
#               the pool is not in the process measured);
#   fixed rate  `iapgw-dev pace`, re-claims offered at 50% and 80% of the re-claim peak, and new grants
#               at 50% and 80% of the new-grant peak (`pace --bodies`: each request the next unused pool
#               purchase), evenly paced (request i due at t0 + i/rate, up to 64 connections, latency from
#               its due time): p50/p99/p99.9/max, errors, and the generator's own lag (a lagging run is refused);
#   hey -q      the same two rates from hey, informational only: hey's 64 workers tick in step, so its
#               "fixed rate" arrives in bursts of 64 (Benchmarks/README.md); skipped without hey.
# Prints each beside the single-core `openssl speed ecdsap256` verify rate measured in the same run,
# and the peak RSS (VmHWM, reset between loads) of the process serving each load.
#   Benchmarks/verify-load.sh [SECONDS] [--json FILE]   (default 10 s; needs wrk)
# IAPGW_SKIP_BUILD=1 uses the release binary as it is (Benchmarks/run.sh has just built it);
# IAPGW_BENCH_POOL sets the wrk new-grant run's share of the pool (default 10,000 per second of the
# run: its figure is withheld if it used more requests than that, as some would then be re-claims);
# the paced new-grant runs get 1.3 times as many more (50% + 80% of a peak up to that), so the
# simulator signs 2.3 × IAPGW_BENCH_POOL purchases (pace refuses a run its share cannot cover).
# IAPGW_BIN runs another build of iapgw-dev (A/B of two binaries), IAPGW_GATEWAY_BIN another iapgw
# (default: the iapgw beside IAPGW_BIN); IAPGW_BENCH_PROFILE=DIR also
# measures the gateway process during each 64-connection run: `perf stat` (CPU time and context
# switches, printed per request) and `perf record -F 499 -g` (DIR/reclaims.perf.data, DIR/grants.perf.data),
# and the same during each fixed-rate run (DIR/pace-50.perf.data, pace-80.perf.data, grants-pace-*.perf.data).
# IAPGW_BENCH_CSV=DIR keeps every request of the fixed-rate runs: DIR/pace-50.csv, pace-80.csv (due,
# sent and done times, latency, generator lag, status), DIR/grants-pace-50.csv, grants-pace-80.csv and DIR/hey-50.csv, hey-80.csv.
# Benchmarks/tail-profile.sh sets the three below to attribute the fixed-rate tails:
# IAPGW_TAIL_PROFILE=DIR records, during each fixed-rate run, the gateway's writer trace
# (IAPGW_WRITER_TRACE), its fdatasync/fsync calls and the scheduler of both cores (`perf record -a`),
# and prints what the slowest 1% waited on (Benchmarks/tail_attribution.py); IAPGW_PACE_PEAK=R
# offers the re-claim fixed rates as percentages of R instead of the re-claim peak measured first (an
# A/B offers both binaries the same rates); IAPGW_BENCH_PACED_ONLY=1 stops after the re-claim fixed-rate rows.
set -euo pipefail
cd "$(dirname "$0")/.."
source Benchmarks/lib.sh
read_load_arguments "$@"
if [[ "${IAPGW_SKIP_BUILD:-0}" != 1 ]]; then
  within 1800 swift build -c release --product iapgw-dev >/dev/null
  within 1800 swift build -c release --product iapgw >/dev/null
fi
pool_size="${IAPGW_BENCH_POOL:-$((10000 * seconds))}"
paced_pool=$((pool_size * 13 / 10))
bin="${IAPGW_BIN:-.build/release/iapgw-dev}"
gateway_bin="${IAPGW_GATEWAY_BIN:-$(dirname "$bin")/iapgw}"
if [[ -z "${IAPGW_GATEWAY_BIN:-}" && ! -x "$gateway_bin" ]]; then
  # An A/B that copied only iapgw-dev aside: say that its new-grant runs measure this tree's gateway.
  echo "note: no iapgw beside $bin: the new-grant runs use .build/release/iapgw (copy both aside, or set IAPGW_GATEWAY_BIN)"
  gateway_bin=.build/release/iapgw
fi
[[ -x "$gateway_bin" ]] || { echo "no gateway binary at $gateway_bin (swift build -c release --product iapgw, or set IAPGW_GATEWAY_BIN)"; exit 1; }
profile="${IAPGW_BENCH_PROFILE:-}"
keep_csv="${IAPGW_BENCH_CSV:-}"
[[ -z "$keep_csv" ]] || mkdir -p "$keep_csv"
tails="${IAPGW_TAIL_PROFILE:-}"
[[ -z "${IAPGW_PACE_PEAK:-}" || "${IAPGW_BENCH_PACED_ONLY:-0}" == 1 ]] || { echo "IAPGW_PACE_PEAK needs IAPGW_BENCH_PACED_ONLY=1 (no peak is measured to report)"; exit 1; }
if [[ -n "$tails" ]]; then
  mkdir -p "$tails"; command -v perf >/dev/null || { echo "perf is not installed"; exit 1; }
  rm -f "$tails/writer.trace"; export IAPGW_WRITER_TRACE="$tails/writer.trace"
fi
if [[ -n "$profile" ]]; then mkdir -p "$profile"; command -v perf >/dev/null || { echo "perf is not installed"; exit 1; }; fi
dir="$(mktemp -d)"; pid=""
stop_demo() { if [[ -n "$pid" ]]; then kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; pid=""; fi; }
trap 'stop_demo; rm -rf "$dir"' EXIT
port=$(free_port); sim=$(free_port)
url="http://127.0.0.1:$port/v1/apps/com.example.demo/verify"
# A fresh demo (gateway + simulator in one process, a fresh database) with POOL extra signed purchases.
start_demo() {  # POOL
  rm -rf "$dir/demo"; mkdir -p "$dir/demo"
  "$bin" demo --port $port --sim-port $sim --dir "$dir/demo" --local-only-jws --pool "$1" \
      >"$dir/demo.out" 2>"$dir/demo.log" &
  pid=$!
  # 120 s, plus 5 s per thousand purchases to sign (50,000 took over 120 s at load average 8).
  local wait_s=$((120 + $1 / 200))
  for _ in $(seq 1 $((wait_s * 10))); do grep -q "Ctrl-C" "$dir/demo.out" 2>/dev/null && break; sleep 0.1; done
  grep -q "Ctrl-C" "$dir/demo.out" || { echo "the demo did not start within $wait_s s:"; tail -5 "$dir/demo.log"; exit 1; }
  key=$(grep -o "Bearer [A-Za-z0-9-]*" "$dir/demo.out" | head -1 | cut -d' ' -f2)
  jws=$(cat "$dir/demo/bob-signed-transaction.jws")
  echo "{\"account\":\"bob\",\"signedTransaction\":\"$jws\"}" >"$dir/reclaim.json"
  # One warm-up request binds the re-claimed purchase to bob.
  curl -s -m 30 -o /dev/null -w "warm-up: HTTP %{http_code}\n" -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
      --data-binary @"$dir/reclaim.json" "$url"
}
# Re-claims and the fixed-rate runs first, on a demo without a pool (the simulator keeps every
# purchase it made in memory, which the peak RSS would otherwise count).
start_demo 1
cat >"$dir/reclaim.lua" <<LUA
wrk.method = "POST"
wrk.body = '{"account":"bob","signedTransaction":"$jws"}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $key"
done = function(summary, latency, requests)
  io.write(string.format("non2xx=%d\np999_us=%d\n", summary.errors.status, latency:percentile(99.9)))
end
LUA
baseline=$(openssl_verify_rate 5)
# Peak RSS of process $pid since the last reset (VmHWM; writing 5 to clear_refs resets it, Linux >= 4.0).
peak_rss_mb() { awk '/VmHWM/ {printf "%.1f", $2/1024}' /proc/$pid/status; }
reset_peak_rss() { echo 5 >/proc/$pid/clear_refs; }

wrk_run() {  # LUA [NAME] → the wrk output (and, profiling, the gateway's CPU and switches per request)
  if [[ -z "$profile" || -z "${2:-}" ]]; then
    within $((seconds + 60)) wrk -t2 -c64 -d"${seconds}s" --timeout 10s --latency -s "$1" "$url"
    return
  fi
  within $((seconds + 60)) perf stat -x, -e task-clock,context-switches -o "$profile/$2.stat" -p "$pid" -- sleep "$seconds" &
  local stat=$!
  within $((seconds + 60)) perf record -q -F 499 -g -o "$profile/$2.perf.data" -p "$pid" -- sleep "$seconds" 2>/dev/null &
  local record=$!
  local out; out=$(within $((seconds + 60)) wrk -t2 -c64 -d"${seconds}s" --timeout 10s --latency -s "$1" "$url")
  wait "$stat" "$record" || true
  echo "$out"
  awk -F, -v n="$(awk '/requests in/ {print $1}' <<<"$out")" -v name="$2" '
    $3 == "task-clock" { cpu = $1 } $3 == "context-switches" { cs = $1 }
    END { if (n > 0) printf "profile %s: gateway CPU %.0f us per request, %.2f context switches per request (%d requests)\n", name, cpu * 1000 / n, cs / n, n }' "$profile/$2.stat"
}

reset_peak_rss
if [[ -n "${IAPGW_PACE_PEAK:-}" ]]; then
  rps="$IAPGW_PACE_PEAK"; p50="-"; p99="-"; p999_ms="-"; non2xx=0
  echo "re-claims: peak not measured, the fixed rates are offered as percentages of IAPGW_PACE_PEAK=${rps}/s"
else
  reclaim=$(wrk_run "$dir/reclaim.lua" reclaims)
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$reclaim")
  p50=$(awk '$1=="50%" {print $2}' <<<"$reclaim"); p99=$(awk '$1=="99%" {print $2}' <<<"$reclaim")
  non2xx=$(awk -F= '/non2xx/ {print $2}' <<<"$reclaim")
  p999_ms=$(awk -F= '/p999_us/ {printf "%.3f", $2 / 1000}' <<<"$reclaim")
  echo "$reclaim" | sed -n '1,12p'
  grep "^profile" <<<"$reclaim" || true
  echo "re-claims: ${rps} req/s, p50 ${p50}, p99 ${p99}, p99.9 ${p999_ms}ms, non-2xx ${non2xx}"
fi

# Fixed offered rate, evenly paced: the goal's figure. pace exits 1 when it could not keep its own
# schedule; its JSON then says kept_pace false and the figure is refused, not dropped. The generator
# is the clock, so it runs SCHED_FIFO where allowed: on 2 shared cores, at normal priority, its
# wake-ups queued behind the gateway's threads (and other work) by 5-25 ms at p99, which would be
# charged to the server; it only sleeps in epoll between sends, so it cannot starve anything.
clock_priority=()
if chrt -f 10 true 2>/dev/null; then clock_priority=(chrt -f 10); fi
offered_at() { awk -v r="$2" -v p="$1" 'BEGIN { printf "%.0f", r * p / 100 }'; }
fixed_rate() {  # PERCENT PEAK NAME --body|--bodies FILE → the pace summary; $dir/NAME-PERCENT.json and .csv
  local percent="$1" peak="$2" name="$3"; shift 3
  local run="$name-$percent" record="" stat=""
  if [[ -n "$tails" ]]; then
    # Both cores' scheduler, the sync calls and the disk's requests, on the clock pace stamps its t0 with.
    within $((seconds + 60)) perf record -q -a -k CLOCK_MONOTONIC -o "$tails/$run.sched.data" \
        -e sched:sched_switch -e sched:sched_wakeup -e sched:sched_wakeup_new \
        -e syscalls:sys_enter_fdatasync -e syscalls:sys_exit_fdatasync -e syscalls:sys_enter_fsync -e syscalls:sys_exit_fsync \
        -e block:block_rq_issue -e block:block_rq_complete \
        -- sleep "$((seconds + 2))" 2>/dev/null &
    record=$!
    sleep 0.5
  fi
  if [[ -n "$profile" ]]; then
    within $((seconds + 60)) perf stat -x, -e task-clock,context-switches -o "$profile/$run.stat" -p "$pid" -- sleep "$seconds" &
    stat=$!
    within $((seconds + 60)) perf record -q -F 499 -g -o "$profile/$run.perf.data" -p "$pid" -- sleep "$seconds" 2>/dev/null &
  fi
  within $((seconds + 60)) "${clock_priority[@]}" "$bin" pace --url "$url" --rate "$(offered_at "$percent" "$peak")" --connections 64 \
      --seconds "$seconds" --timeout 10 "$@" --header 'Content-Type: application/json' --header "Authorization: Bearer $key" \
      --json "$dir/$run.json" --csv "$dir/$run.csv" || true
  [[ -z "$keep_csv" || ! -f "$dir/$run.csv" ]] || cp "$dir/$run.csv" "$keep_csv/"
  if [[ -n "$stat" ]]; then
    wait "$stat" || true
    # pace runs `seconds` and so does perf stat: the requests due in that time.
    awk -F, -v n="$(offered_at "$percent" "$peak")" -v s="$seconds" -v name="$run" '
      $3 == "task-clock" { cpu = $1 } $3 == "context-switches" { cs = $1 }
      END { n = n * s; if (n > 0) printf "profile %s: gateway CPU %.0f us per request, %.2f context switches per request (%d requests)\n", name, cpu * 1000 / n, cs / n, n }' "$profile/$run.stat"
  fi
  if [[ -n "$record" ]]; then
    wait "$record" || true
    for task in /proc/$pid/task/*; do echo "${task##*/} $(cat "$task/comm")"; done >"$tails/$run.tids"
    cp "$dir/$run.csv" "$dir/$run.json" "$tails/"
    within 300 perf sched timehist -i "$tails/$run.sched.data" >"$tails/$run.timehist" 2>/dev/null || true
    within 300 perf script -i "$tails/$run.sched.data" -F tid,time,event,trace 2>/dev/null | grep -E ' (syscalls|block):' >"$tails/$run.syscalls" || true
    within 300 python3 Benchmarks/tail_attribution.py "$tails" "$run" || echo "tail attribution failed"
  fi
}
for percent in 50 80; do
  echo "re-claims offered at ${percent}% of peak, evenly paced (iapgw-dev pace):"
  fixed_rate "$percent" "$rps" pace --body "$dir/reclaim.json" | sed 's/^/  /'
done

if [[ "${IAPGW_BENCH_PACED_ONLY:-0}" == 1 ]]; then exit 0; fi

# The same rates from hey, informational: -q is per worker, and its 64 workers' tickers start
# together, so requests leave in bursts of up to 64 every 64/offered s. "in step" is the share of
# requests that started in the same 0.1 ms (hey's CSV resolution) as the one before; evenly paced
# at these rates they would be 0.2-0.4 ms apart.
hey_rate() {  # PERCENT → "p50 p99 p999 errors offered achieved in-step%" (ms)
  local offered q
  offered=$(offered_at "$1" "$rps")
  q=$(awk -v o="$offered" 'BEGIN { printf "%.2f", o / 64 }')
  within $((seconds + 60)) hey -z "${seconds}s" -t 10 -c 64 -q "$q" -m POST -T application/json -H "Authorization: Bearer $key" \
      -D "$dir/reclaim.json" -o csv "$url" >"$dir/hey-$1.csv"
  [[ -z "$keep_csv" ]] || cp "$dir/hey-$1.csv" "$keep_csv/"
  python3 - "$dir/hey-$1.csv" "$offered" "$seconds" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
times = sorted(float(r["response-time"]) * 1000 for r in rows)
starts = sorted(float(r["offset"]) for r in rows)
in_step = sum(1 for a, b in zip(starts, starts[1:]) if b - a < 0.00005) / max(1, len(starts) - 1) * 100
errors = sum(1 for r in rows if not r["status-code"].startswith("2"))
def pct(p): return times[min(len(times) - 1, int(p / 100 * len(times)))] if times else float("nan")
print(f"{pct(50):.3f} {pct(99):.3f} {pct(99.9):.3f} {errors} {sys.argv[2]} {len(rows) / float(sys.argv[3]):.0f} {in_step:.0f}")
PY
}
hey_json="null"
if command -v hey >/dev/null; then
  for percent in 50 80; do
    read -r h_p50 h_p99 h_p999 h_err h_offered h_done h_step <<<"$(hey_rate "$percent")"
    echo "hey -q (64 workers in step, informational) at ${percent}% (${h_offered}/s, achieved ${h_done}/s," \
         "${h_step}% of starts in step): p50 ${h_p50} ms, p99 ${h_p99} ms, p99.9 ${h_p999} ms, errors ${h_err}"
    entry="\"$percent\":{\"offered_per_s\":$h_offered,\"achieved_per_s\":$h_done,\"p50_ms\":$h_p50,\"p99_ms\":$h_p99,\"p999_ms\":$h_p999,\"errors\":$h_err,\"in_step_percent\":$h_step}"
    if [[ $hey_json == null ]]; then hey_json="{$entry"; else hey_json="$hey_json,$entry"; fi
  done
  hey_json="$hey_json}"
else
  echo "hey is not installed: no informational hey -q rows (apt-get install hey)"
fi

rss_mb=$(peak_rss_mb)
stop_demo
pool_total=$((pool_size + paced_pool))
echo "signing a pool of $pool_total purchases ($pool_size for wrk, $paced_pool for the paced runs)"
sign_start=$(date +%s)
start_demo "$pool_total"
sign_s=$(($(date +%s) - sign_start))
sign_rss_mb=$(peak_rss_mb)
echo "pool signed and the demo up in ${sign_s} s (the demo process, simulator holding the pool: peak RSS ${sign_rss_mb} MB)"
# The gateway alone on the demo's config and database (local-only JWS: a new grant asks the
# simulator nothing), so its RSS is the gateway's, not the simulator's with its whole pool.
stop_demo
"$gateway_bin" serve --config "$dir/demo" --mappings Mappings >"$dir/gateway.out" 2>"$dir/gateway.log" &
pid=$!
for _ in $(seq 1 600); do curl -s -m 1 -o /dev/null "http://127.0.0.1:$port/healthz" && break; sleep 0.1; done
curl -s -m 5 -o /dev/null "http://127.0.0.1:$port/healthz" || { echo "the gateway did not start:"; tail -5 "$dir/gateway.log"; exit 1; }
# Pool lines 1..pool_size go to wrk, the rest to the paced runs (50% first, then 80%); line n is
# account acct-n, so no account or purchase is used twice.
head -n "$pool_size" "$dir/demo/pool-signed-transactions.txt" >"$dir/grants-wrk.txt"
new_grant_bodies() {  # FIRST COUNT FILE: pool lines FIRST.. as request bodies, one a line
  awk -v first="$1" -v last="$(($1 + $2 - 1))" 'NR >= first && NR <= last && length($0) > 0 {
    printf "{\"account\":\"acct-%d\",\"signedTransaction\":\"%s\"}\n", NR, $0 }' "$dir/demo/pool-signed-transactions.txt" >"$3"
}
# Each wrk thread takes every other pool line (thread 0 the odd ones, thread 1 the even ones).
cat >"$dir/grants.lua" <<LUA
local threads = 0
function setup(thread) thread:set("first", threads); threads = threads + 1 end
local pool, sent = {}, 0
function init(args)
  for line in io.lines("$dir/grants-wrk.txt") do
    if #line > 0 then pool[#pool + 1] = line end
  end
end
function request()
  local i = ((first + sent * 2) % #pool) + 1
  sent = sent + 1
  return wrk.format("POST", nil, {["Content-Type"] = "application/json", ["Authorization"] = "Bearer $key"},
                    '{"account":"acct-' .. i .. '","signedTransaction":"' .. pool[i] .. '"}')
end
done = function(summary, latency, requests)
  io.write(string.format("non2xx=%d\np999_us=%d\n", summary.errors.status, latency:percentile(99.9)))
end
LUA
reset_peak_rss
grants=$(wrk_run "$dir/grants.lua" grants)
g_rss_mb=$(peak_rss_mb)
g_rps=$(awk '/Requests\/sec/ {print $2}' <<<"$grants")
g_p50=$(awk '$1=="50%" {print $2}' <<<"$grants"); g_p99=$(awk '$1=="99%" {print $2}' <<<"$grants")
g_p999_ms=$(awk -F= '/p999_us/ {printf "%.3f", $2 / 1000}' <<<"$grants")
g_non2xx=$(awk -F= '/non2xx/ {print $2}' <<<"$grants")
g_requests=$(awk '/requests in/ {print $1}' <<<"$grants")
g_granted=$(within 60 sqlite3 "$dir/demo/iapgw.sqlite" "SELECT COUNT(*) FROM ownership WHERE account LIKE 'acct-%'" 2>/dev/null || echo "?")
echo "$grants" | sed -n '1,12p'
g_valid=1
if (( g_requests > pool_size )); then g_valid=0; fi
grep "^profile" <<<"$grants" || true
echo "new grants: ${g_rps} req/s, p50 ${g_p50}, p99 ${g_p99}, p99.9 ${g_p999_ms}ms, non-2xx ${g_non2xx}, ${g_requests} requests from a pool of ${pool_size} (${g_granted} accounts bound)"
[[ $g_valid == 1 ]] || echo "new grants: the pool ran out (some requests were re-claims): no new-grant rate"

# New grants offered at 50% and 80% of their peak: each request the next unused pool purchase.
reset_peak_rss
next_line=$((pool_size + 1))
for percent in 50 80; do
  needed=$(awk -v r="$(offered_at "$percent" "$g_rps")" -v s="$seconds" 'BEGIN { printf "%d", r * s }')
  new_grant_bodies "$next_line" "$needed" "$dir/grants-$percent.jsonl"
  next_line=$((next_line + needed))
  echo "new grants offered at ${percent}% of peak, evenly paced (iapgw-dev pace --bodies, $needed fresh purchases):"
  if (( g_valid == 1 )); then
    fixed_rate "$percent" "$g_rps" grants-pace --bodies "$dir/grants-$percent.jsonl" | sed 's/^/  /'
  else
    echo "  not run: the new-grant peak was not measured"
  fi
done
gp_rss_mb=$(peak_rss_mb)
stop_demo
# Each paced request a new grant: the accounts bound grew by one per request answered (not re-claims).
gp_answered=$(python3 - "$dir"/grants-pace-*.json 2>/dev/null <<'PY' || echo "?"
import json, sys
print(sum(run["requests"] - run["errors"] for run in (json.load(open(f)) for f in sys.argv[1:])))
PY
)
gp_granted=$(within 60 sqlite3 "$dir/demo/iapgw.sqlite" "SELECT COUNT(*) FROM ownership WHERE account LIKE 'acct-%'" 2>/dev/null || echo "?")
echo "accounts bound after the paced new grants: ${gp_granted} (${g_granted} after wrk + ${gp_answered} paced requests answered without error)"

echo
echo "peak RSS: re-claim loads ${rss_mb} MB (gateway + simulator process, no pool); new grants, 64 connections ${g_rss_mb} MB," \
     "paced ${gp_rss_mb} MB (the gateway process alone)"
echo "openssl speed ecdsap256 verify (one core, same run): ${baseline}/s"
awk -v r="$rps" -v g="$g_rps" -v v="$g_valid" -v b="$baseline" -v c="$(nproc)" \
    'BEGIN { printf "on %d cores / raw single-core verify: re-claims %.2f, new grants %s\n", c, r/b, v ? sprintf("%.2f", g/b) : "–" }'
if [[ -n "$json" ]]; then
  g_json=$([[ $g_valid == 1 ]] && echo "$g_rps" || echo null)
  pace_json() { cat "$dir/$1.json" 2>/dev/null || echo null; }
  cat >"$json" <<JSON
{"connections":64,"seconds":$seconds,"requests_per_s":$rps,"p50_ms":$(wrk_ms "$p50"),"p99_ms":$(wrk_ms "$p99"),"p999_ms":${p999_ms:-null},"non2xx":${non2xx:-0},
 "new_grants":{"requests_per_s":$g_json,"p50_ms":$(wrk_ms "$g_p50"),"p99_ms":$(wrk_ms "$g_p99"),"p999_ms":${g_p999_ms:-null},"non2xx":${g_non2xx:-0},"requests":$g_requests,"pool":$pool_size,
   "fixed_rate":{"generator":"iapgw-dev pace --bodies","pool":$paced_pool,"50":$(pace_json grants-pace-50),"80":$(pace_json grants-pace-80)}},
 "fixed_rate":{"generator":"iapgw-dev pace","50":$(pace_json pace-50),"80":$(pace_json pace-80)},
 "hey_fixed_rate":$hey_json,
 "peak_rss":{"reclaims_mb":$rss_mb,"new_grants_mb":$g_rss_mb,"new_grants_paced_mb":$gp_rss_mb,"pool_signing_demo_mb":$sign_rss_mb,"pool_signing_s":$sign_s},
 "openssl_speed_ecdsap256_verify_per_s":$baseline,"cores":$(nproc)}
JSON
fi
