# Shared helpers for the benchmark scripts (sourced, not run).

# A TCP port on loopback nobody listens on now (bound by the kernel, then released).
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# The load scripts' arguments, `[SECONDS] [--json FILE]`: sets `seconds` (default 10) and `json`
# (empty: none), and stops unless wrk is installed.
read_load_arguments() {
  seconds=10; json=""
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --json) json="$2"; shift 2 ;;
      *) seconds="$1"; shift ;;
    esac
  done
  command -v wrk >/dev/null || { echo "wrk is not installed (apt-get install wrk)"; exit 1; }
}

# wrk's latency ("812.00us", "1.23ms", "2.01s") in milliseconds.
wrk_ms() {
  awk -v v="$1" 'BEGIN {
    if (v ~ /us$/) { sub(/us$/, "", v); printf "%.3f", v / 1000 }
    else if (v ~ /ms$/) { sub(/ms$/, "", v); printf "%.3f", v }
    else if (v ~ /s$/) { sub(/s$/, "", v); printf "%.3f", v * 1000 }
    else printf "%s", v }'
}

# Every child a benchmark starts has a deadline: `within SECONDS COMMAND...` runs COMMAND, sends it
# SIGTERM after SECONDS and SIGKILL 10 s later, and fails (exit 124/137) if it had to.
within() {
  local limit="$1"; shift
  timeout --kill-after=10 "$limit" "$@"
}

# `openssl speed ecdsap256` verify/s on one core (it signs for N seconds, then verifies for N).
openssl_verify_rate() {
  local n="${1:-3}"
  within $((4 * n + 30)) openssl speed -seconds "$n" ecdsap256 2>/dev/null | awk '/ecdsa \(nistp256\)/ {print $NF}'
}

# initdb and pg_ctl refuse to run as root: as root they run as the `postgres` user (within 300 s).
as_pg() { if [[ $(id -u) == 0 ]]; then within 300 runuser -u postgres -- "$@"; else within 300 "$@"; fi; }

# A throwaway PostgreSQL cluster in $work/pg (needs $work and $pg_bin): loopback, a free port, its
# socket inside $work; sets pg_port, pg (the client options) and pg_up. Creates the database and the
# statement of the pgbench baseline.
pg_start_cluster() {
  mkdir -p "$work/pg/sock"; chmod 755 "$work"
  if [[ $(id -u) == 0 ]]; then chown -R postgres "$work/pg"; fi
  as_pg "$pg_bin/initdb" -D "$work/pg/data" -A trust -U postgres >"$work/pg-initdb.log" 2>&1
  # A kernel-chosen port is released before the server binds it, and another socket may take it in
  # between (it is in the ephemeral range): then the server cannot bind it, and another port is tried.
  local attempt
  for attempt in 1 2 3 4 5; do
    pg_port=$(free_port)
    if as_pg "$pg_bin/pg_ctl" -D "$work/pg/data" -l "$work/pg/log" -w \
      -o "-p $pg_port -k $work/pg/sock -c listen_addresses=127.0.0.1 -c max_connections=100" start >/dev/null 2>&1; then
      break
    fi
    if [[ $attempt == 5 ]] || ! grep -q "could not create any TCP/IP sockets" "$work/pg/log"; then
      echo "the benchmark's PostgreSQL did not start; its log:" >&2; cat "$work/pg/log" >&2; return 1
    fi
  done
  pg_up=1
  pg=(-h 127.0.0.1 -p "$pg_port" -U postgres)
  within 60 "$pg_bin/createdb" "${pg[@]}" pgbench_baseline
  within 60 "$pg_bin/psql" "${pg[@]}" -q -d pgbench_baseline -c "CREATE TABLE inbox(id bigserial PRIMARY KEY, payload text NOT NULL)"
  echo "INSERT INTO inbox(payload) SELECT string_agg(md5(random()::text), '') FROM generate_series(1, 125);" >"$work/insert.sql"
}

pg_stop_cluster() {
  if [[ ${pg_up:-0} == 1 ]]; then as_pg "$pg_bin/pg_ctl" -D "$work/pg/data" -m immediate stop >/dev/null 2>&1 || true; fi
}

# The baseline: pgbench's transactions/s over SECONDS, 16 clients (as many as the notification
# connections), one durable single-row insert of a notification's size each (synchronous_commit=on,
# the server's default).
pgbench_insert_rate() {
  within $(($1 + 120)) "$pg_bin/pgbench" "${pg[@]}" -n -c 16 -j 2 -T "$1" -f "$work/insert.sql" pgbench_baseline >"$work/pgbench.out" 2>&1
  awk '/^tps = / {print $3; exit}' "$work/pgbench.out"
}
