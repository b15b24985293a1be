#!/usr/bin/env bash
# Scaling out: two gateway instances on one PostgreSQL against one instance on SQLite, on the same
# cores, in one run. Both loads are POST /verify with StoreKit 2 signed transactions (local-only
# policy: JWS verification + policy checks + a durable ledger write, no upstream call):
#   re-claims   64 purchases, each bound to its owner first, re-claimed by their owners (wrk, 16
#               connections in all: 8 on each PostgreSQL instance, 16 on the SQLite one);
#   new grants  every request a different purchase of a pool the simulator signed before the run;
#   half load   each figure's p99 with the PostgreSQL pair offered half its own peak, evenly paced
#               (`iapgw-dev pace`, half the rate to each instance).
# Prints the pair's req/s over the SQLite instance's (the goal: >= 0.8x both ways, p99 <= 10 ms at half
# load). The PostgreSQL is a throwaway cluster (initdb in a temp dir, loopback, a free port).
#   Benchmarks/scale-out.sh [SECONDS] [--json FILE]        (default 10 s; needs wrk and PostgreSQL)
# IAPGW_SKIP_BUILD=1 uses the release binaries as they are; IAPGW_SCALE_POOL sets the new-grant pool
# per backend (default 4000 per second of the run); PG_BIN the server binaries; IAPGW_SCALE_WAITS=1
# also samples what the PostgreSQL sessions wait on during the half-load runs; IAPGW_SCALE_CPU=1 prints
# each side's CPU per request (the gateways' and the database server's).
set -euo pipefail
cd "$(dirname "$0")/.."
source Benchmarks/lib.sh
read_load_arguments "$@"
pg_bin="${PG_BIN:-/usr/lib/postgresql/15/bin}"
[[ -x "$pg_bin/initdb" ]] || { echo "no PostgreSQL server binaries in $pg_bin (set PG_BIN)"; exit 1; }
if [[ "${IAPGW_SKIP_BUILD:-0}" != 1 ]]; then
  within 1800 swift build -c release --product iapgw-dev >/dev/null
  within 1800 swift build -c release --product iapgw >/dev/null
fi
dev=.build/release/iapgw-dev; gateway=.build/release/iapgw
pool="${IAPGW_SCALE_POOL:-$((4000 * seconds))}"
work=$(mktemp -d /tmp/iapgw-scale.XXXXXX); pg_up=0; pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  pg_stop_cluster
  rm -rf "$work"
}
trap cleanup EXIT

# The demo signs the purchases (64 to re-claim, then a pool per backend), then stops: the gateways
# measured are `iapgw serve` processes on copies of its config, without the simulator.
sim=$(free_port); demo_port=$(free_port)
"$dev" demo --port "$demo_port" --sim-port "$sim" --dir "$work/demo" --local-only-jws --pool $((64 + 2 * pool)) \
    >"$work/demo.out" 2>"$work/demo.log" &
demo=$!; pids+=("$demo")
for _ in $(seq 1 $(((120 + pool / 100) * 10))); do grep -q "Ctrl-C" "$work/demo.out" 2>/dev/null && break; sleep 0.1; done
grep -q "Ctrl-C" "$work/demo.out" || { echo "the demo did not start:"; tail -5 "$work/demo.log"; exit 1; }
key=$(grep -o "Bearer [A-Za-z0-9-]*" "$work/demo.out" | head -1 | cut -d' ' -f2)
kill "$demo"; wait "$demo" 2>/dev/null || true
signed="$work/demo/pool-signed-transactions.txt"
# Lines 1-64 are re-claimed; the next `pool` are SQLite's new grants, the `pool` after PostgreSQL's.
awk 'NR <= 64 { printf "{\"account\":\"owner-%d\",\"signedTransaction\":\"%s\"}\n", NR, $0 }' "$signed" >"$work/reclaims.txt"
awk -v a=65 -v b=$((64 + pool)) 'NR >= a && NR <= b { printf "{\"account\":\"new-%d\",\"signedTransaction\":\"%s\"}\n", NR, $0 }' "$signed" >"$work/grants-sqlite.txt"
awk -v a=$((65 + pool)) 'NR >= a { printf "{\"account\":\"new-%d\",\"signedTransaction\":\"%s\"}\n", NR, $0 }' "$signed" >"$work/grants-pg.txt"
# The PostgreSQL pair's pool split by line parity, one half for each instance.
awk 'NR % 2 == 1' "$work/grants-pg.txt" >"$work/grants-pg-a.txt"
awk 'NR % 2 == 0' "$work/grants-pg.txt" >"$work/grants-pg-b.txt"

pg_start_cluster
within 60 "$pg_bin/createdb" "${pg[@]}" iapgw_scale
storage_pg="postgres://postgres@127.0.0.1:$pg_port/iapgw_scale"
# Instances on one PostgreSQL share the receipt seal key (an SQLite ledger keeps its own beside the file).
export IAPGW_RECEIPT_SEAL_KEY; IAPGW_RECEIPT_SEAL_KEY=$(openssl rand -hex 32)

# A copy of the demo's config serving on PORT over STORAGE, as instance ID (empty: none).
instance() {  # NAME PORT STORAGE ID
  local dir="$work/$1"
  mkdir -p "$dir"; cp -r "$work/demo/apps" "$work/demo/secrets" "$work/demo/trust" "$dir/"
  sed -e "s|<listenPort type=\"integer\">[0-9]*</listenPort>|<listenPort type=\"integer\">$2</listenPort>${4:+<instanceId>$4</instanceId>}|" \
      -e "s|<storageURL>[^<]*</storageURL>|<storageURL>$3</storageURL>|" "$work/demo/gateway.xml" >"$dir/gateway.xml"
  "$gateway" serve --config "$dir" --mappings Mappings >"$dir/out" 2>"$dir/log" &
  pids+=("$!"); eval "pid_$1=$!"
  for _ in $(seq 1 600); do curl -s -m 1 -o /dev/null "http://127.0.0.1:$2/readyz" && return; sleep 0.1; done
  echo "instance $1 did not start:"; tail -5 "$dir/log"; exit 1
}
port_sqlite=$(free_port); port_a=$(free_port); port_b=$(free_port)
instance sqlite "$port_sqlite" "sqlite:$work/sqlite.db" ""
instance pga "$port_a" "$storage_pg" a
instance pgb "$port_b" "$storage_pg" b
url() { echo "http://127.0.0.1:$1/v1/apps/com.example.demo/verify"; }

# Each of the 64 purchases bound to its owner once, on each backend.
bind_all() {  # PORT
  while read -r body; do
    curl -s -m 30 -o /dev/null -w "%{http_code}\n" -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
        --data-binary "$body" "$(url "$1")"
  done <"$work/reclaims.txt" | sort | uniq -c | awk -v p="$1" '{ printf "  bound on :%s: %d answered HTTP %s\n", p, $1, $2 }'
}
bind_all "$port_sqlite"; bind_all "$port_a"

# wrk script: each request the next body of FILE (re-claims cycle over 64; new grants never repeat
# while the pool lasts: each thread takes every other line).
lua() {  # FILE
  cat <<LUA
local threads = 0
function setup(thread) thread:set("first", threads); threads = threads + 1 end
local pool, sent = {}, 0
function init(args) for line in io.lines("$1") do if #line > 0 then pool[#pool + 1] = line end end end
function request()
  local i = ((first + sent * 2) % #pool) + 1
  sent = sent + 1
  return wrk.format("POST", nil, {["Content-Type"] = "application/json", ["Authorization"] = "Bearer $key"}, pool[i])
end
done = function(summary, latency, requests)
  io.write(string.format("non2xx=%d\nrequests=%d\np99_us=%d\n", summary.errors.status, summary.requests, latency:percentile(99)))
end
LUA
}
wrk_load() {  # PORT CONNECTIONS FILE OUT
  lua "$3" >"$4.lua"
  within $((seconds + 60)) wrk -t2 -c"$2" -d"${seconds}s" --timeout 10s --latency -s "$4.lua" "$(url "$1")" >"$4"
}
rate() { awk '/Requests\/sec/ {print $2}' "$1"; }
field() { awk -F= -v k="$2" '$1 == k {print $2}' "$1"; }

# Each measured run starts with nothing dirty in the page cache: otherwise the kernel writes back the
# run before's data (its pages expire after 30 s) during this one, and every WAL fdatasync of the
# PostgreSQL pair waits behind it for 300-400 ms about every 10 s (seen as clusters of slow COMMITs on
# all sessions at once, waiting on IO:WALSync, while a bare fdatasync loop on the same disk stays under 8 ms).
settle() { sync; sleep 1; }

# CPU seconds (user + system) the processes of COMMAND-NAME have used so far, summed.
cpu_of() {
  local pid; for pid in $(pgrep -x "$1"); do cat "/proc/$pid/stat" 2>/dev/null; done |
    awk -v hz="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); s += $12 + $13 } END { printf "%.2f", s / hz }'
}
# IAPGW_SCALE_CPU=1: each side's CPU per request, the gateways' and the database server's apart.
cpu_per_request() {  # LABEL GATEWAY-SECONDS POSTGRES-SECONDS REQUESTS
  [[ "${IAPGW_SCALE_CPU:-0}" == 1 ]] || return 0
  awk -v l="$1" -v g="$2" -v p="$3" -v n="$4" 'BEGIN {
    printf "  %s: CPU per request: gateway %.0f us, PostgreSQL server %.0f us\n", l, g / n * 1e6, p / n * 1e6 }'
}

measure() {  # NAME SQLITE-FILE PG-A-FILE PG-B-FILE
  local name="$1" g0 p0 g1 p1 g2 p2
  settle
  g0=$(cpu_of iapgw); p0=$(cpu_of postgres)
  wrk_load "$port_sqlite" 16 "$2" "$work/$name-sqlite"
  g1=$(cpu_of iapgw); p1=$(cpu_of postgres)
  settle
  g1=$(cpu_of iapgw); p1=$(cpu_of postgres)
  wrk_load "$port_a" 8 "$3" "$work/$name-pga" & local a=$!
  wrk_load "$port_b" 8 "$4" "$work/$name-pgb"; wait "$a"
  g2=$(cpu_of iapgw); p2=$(cpu_of postgres)
  cpu_per_request "$name on SQLite" "$(echo "$g1 - $g0" | bc)" "$(echo "$p1 - $p0" | bc)" "$(field "$work/$name-sqlite" requests)"
  cpu_per_request "$name on the PostgreSQL pair" "$(echo "$g2 - $g1" | bc)" "$(echo "$p2 - $p1" | bc)" \
      "$(( $(field "$work/$name-pga" requests) + $(field "$work/$name-pgb" requests) ))"
  local s pa pb; s=$(rate "$work/$name-sqlite"); pa=$(rate "$work/$name-pga"); pb=$(rate "$work/$name-pgb")
  local errors=$(( $(field "$work/$name-sqlite" non2xx) + $(field "$work/$name-pga" non2xx) + $(field "$work/$name-pgb" non2xx) ))
  local p99_s p99_pg
  p99_s=$(awk -F= '$1 == "p99_us" { printf "%.2f", $2 / 1000 }' "$work/$name-sqlite")
  p99_pg=$(cat "$work/$name-pga" "$work/$name-pgb" | awk -F= '$1 == "p99_us" && $2 > m { m = $2 } END { printf "%.2f", m / 1000 }')
  awk -v n="$name" -v s="$s" -v a="$pa" -v b="$pb" -v ps="$p99_s" -v pp="$p99_pg" -v e="$errors" 'BEGIN {
    printf "%s: SQLite %.0f req/s (p99 %s ms); PostgreSQL pair %.0f + %.0f = %.0f req/s (p99 %s ms); non-2xx %d; ratio %.2fx (goal >= 0.8: %s)\n",
      n, s, ps, a, b, a + b, pp, e, (a + b) / s, ((a + b) / s >= 0.8 && e == 0) ? "met" : "not met" }'
  eval "${name}_sqlite=$s ${name}_pg=$(awk -v a="$pa" -v b="$pb" 'BEGIN { print a + b }') ${name}_errors=$errors"
  eval "${name}_p99_sqlite=$p99_s ${name}_p99_pg=$p99_pg"
}

# Half the pair's peak, evenly paced, a quarter of it to each instance: the p99 a team sees at half load.
# IAPGW_SCALE_WAITS=1: what the PostgreSQL sessions wait on during each half-load run, sampled
# every 50 ms from pg_stat_activity (the state and wait event of each of the gateways' sessions).
sample_waits() {  # NAME
  local out="$work/$1-waits.txt" deadline=$((SECONDS + seconds))
  : >"$out"
  while [[ $SECONDS -lt $deadline ]]; do
    "$pg_bin/psql" "${pg[@]}" -d iapgw_scale -At -c "SELECT state || ' ' || COALESCE(wait_event_type || ':' || wait_event, 'on CPU')
        FROM pg_stat_activity WHERE datname = 'iapgw_scale' AND pid <> pg_backend_pid()" >>"$out" 2>/dev/null || true
    sleep 0.05
  done
  echo "$1 at half load, PostgreSQL sessions sampled every 50 ms (state, wait):"
  sort "$out" | uniq -c | sort -rn | head -8 | sed 's/^/    /'
}

half_load() {  # NAME PEAK BODY-A-FLAG BODY-A BODY-B-FLAG BODY-B
  local name="$1" each; each=$(awk -v r="$2" 'BEGIN { printf "%.0f", r / 4 }')
  local sampler=""
  settle
  if [[ "${IAPGW_SCALE_WAITS:-0}" == 1 ]]; then sample_waits "$name" & sampler=$!; fi
  within $((seconds + 60)) "$dev" pace --url "$(url "$port_a")" --rate "$each" --connections 8 --seconds "$seconds" --timeout 10 \
      "$3" "$4" --header 'Content-Type: application/json' --header "Authorization: Bearer $key" --json "$work/$name-half-a.json" \
      >"$work/$name-half-a.log" 2>&1 & local a=$!
  within $((seconds + 60)) "$dev" pace --url "$(url "$port_b")" --rate "$each" --connections 8 --seconds "$seconds" --timeout 10 \
      "$5" "$6" --header 'Content-Type: application/json' --header "Authorization: Bearer $key" --json "$work/$name-half-b.json" \
      >"$work/$name-half-b.log" 2>&1 || true
  wait "$a" || true
  [[ -z "$sampler" ]] || wait "$sampler" || true
  local side
  for side in a b; do
    [[ -f "$work/$name-half-$side.json" ]] || { echo "$name at half load: pace on instance $side gave no figure:"; tail -3 "$work/$name-half-$side.log"; return 0; }
  done
  python3 - "$work/$name-half-a.json" "$work/$name-half-b.json" "$name" "$each" <<'PY'
import json, sys
runs = [json.load(open(p)) for p in sys.argv[1:3]]
p99 = max((r.get("p99_ms") or float("inf")) for r in runs)
errors = sum(r.get("errors", 0) for r in runs)
kept = all(r.get("kept_pace", False) for r in runs)
met = p99 <= 10 and errors == 0 and kept
json.dump({"p99_ms": None if p99 == float("inf") else p99, "errors": errors, "kept_pace": kept, "offered_each_per_s": int(sys.argv[4])},
          open(sys.argv[1].replace("-half-a.json", "-half.json"), "w"))
print(f"{sys.argv[3]} at half the pair's peak ({sys.argv[4]}/s to each instance): p99 {p99:.2f} ms, errors {errors}, "
      f"generator kept pace: {kept} (goal p99 <= 10 ms: {'met' if met else 'not met'})")
PY
}

echo "re-claims: 64 owned purchases, 16 connections per side, ${seconds} s"
measure reclaims "$work/reclaims.txt" "$work/reclaims.txt" "$work/reclaims.txt"
# The 64 re-claims over and over, enough lines for the run (pace sends each line once): one body
# again and again would put every request on one purchase chain, serialised across the instances.
repeat_lines() {  # FILE COUNT OUT
  awk -v n="$2" '{ line[NR] = $0 } END { for (i = 0; i < n; i++) print line[i % NR + 1] }' "$1" >"$3"
}
half_each=$(awk -v r="$reclaims_pg" -v s="$seconds" 'BEGIN { printf "%d", r / 4 * s + 100 }')
repeat_lines "$work/reclaims.txt" "$half_each" "$work/reclaims-half-a.txt"
tail -n +33 "$work/reclaims.txt" | cat - <(head -n 32 "$work/reclaims.txt") >"$work/reclaims-rotated.txt"
repeat_lines "$work/reclaims-rotated.txt" "$half_each" "$work/reclaims-half-b.txt"
half_load reclaims "$reclaims_pg" --bodies "$work/reclaims-half-a.txt" --bodies "$work/reclaims-half-b.txt"
echo "new grants: a pool of $pool signed purchases per side, 16 connections per side, ${seconds} s"
measure grants "$work/grants-sqlite.txt" "$work/grants-pg-a.txt" "$work/grants-pg-b.txt"
used=$(( $(field "$work/grants-pga" requests) + $(field "$work/grants-pgb" requests) ))
[[ $used -le $pool ]] || echo "  note: the pair sent $used requests for a pool of $pool: the excess were re-claims"
tail -n +$((used / 2 + 1)) "$work/grants-pg-a.txt" >"$work/grants-half-a.txt"
tail -n +$((used / 2 + 1)) "$work/grants-pg-b.txt" >"$work/grants-half-b.txt"
half_load grants "$grants_pg" --bodies "$work/grants-half-a.txt" --bodies "$work/grants-half-b.txt"

if [[ -n "$json" ]]; then
  half() { cat "$work/$1-half.json" 2>/dev/null || echo null; }
  cat >"$json" <<JSON
{"seconds": $seconds, "pool": $pool,
 "reclaims": {"sqlite": $reclaims_sqlite, "postgres_pair": $reclaims_pg, "errors": $reclaims_errors,
   "p99_ms_sqlite": $reclaims_p99_sqlite, "p99_ms_postgres": $reclaims_p99_pg, "half_load": $(half reclaims)},
 "grants": {"sqlite": $grants_sqlite, "postgres_pair": $grants_pg, "errors": $grants_errors,
   "p99_ms_sqlite": $grants_p99_sqlite, "p99_ms_postgres": $grants_p99_pg, "half_load": $(half grants)}}
JSON
fi
