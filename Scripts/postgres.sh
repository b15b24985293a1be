#!/usr/bin/env bash
# A throwaway PostgreSQL cluster on loopback, for tests and benchmarks (never for production):
#   Scripts/postgres.sh start   # initdb + start; prints the server URL
#   Scripts/postgres.sh url     # prints the URL of the running cluster
#   Scripts/postgres.sh stop    # stops it and deletes its files
# The cluster lives in $IAPGW_PG_DIR (default: /tmp/iapgw-postgres) and listens on 127.0.0.1 only, on
# $IAPGW_PG_PORT or else the first free port from 25432 up (below Linux's ephemeral range, 32768 up
# by default: a port in that range can be taken at any moment by some process's outgoing connection,
# and then the server cannot bind it although no one listens there); if the server still cannot bind
# its port, the next free one is tried, up to 5 in all. Its unix socket stays inside its own
# directory. Loopback clients are trusted (no password): fine for a test cluster on loopback. As root
# (CI), the server runs as the `postgres` user, because PostgreSQL refuses to run as root.
set -euo pipefail

state="${IAPGW_PG_DIR:-/tmp/iapgw-postgres}"
data="$state/data"
bin="${IAPGW_PG_BIN:-/usr/lib/postgresql/15/bin}"

url() { echo "postgres://postgres@127.0.0.1:$(cat "$state/port")/postgres"; }

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# The first port from $1 (default 25432) with no listener, up to 25531.
free_port() {
    local port
    for port in $(seq "${1:-25432}" 25531); do
        if ! port_in_use "$port"; then echo "$port"; return; fi
    done
    echo "postgres.sh: no free port in ${1:-25432}-25531" >&2
    exit 1
}

as_server_user() {
    if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

start() {
    if [ ! -x "$bin/initdb" ]; then
        echo "postgres.sh: no PostgreSQL server binaries in $bin (apt-get install postgresql)" >&2
        exit 2
    fi
    if [ -f "$data/postmaster.pid" ]; then
        echo "postgres.sh: a cluster is already running in $state (Scripts/postgres.sh stop)" >&2
        exit 1
    fi
    local port="${IAPGW_PG_PORT:-$(free_port)}"
    local attempt
    for attempt in 1 2 3 4 5; do
        if start_on "$port"; then url; return; fi
        # Another socket holds the port (bound without listening, so the probe missed it): only
        # then is the next port worth a try; any other failure is reported as it is.
        if [ -n "${IAPGW_PG_PORT:-}" ] || ! grep -q "could not create any TCP/IP sockets" "$state/server.log"; then break; fi
        port="$(free_port $((port + 1)))"
    done
    echo "postgres.sh: the server did not start; its log:" >&2; cat "$state/server.log" >&2; exit 1
}

# initdb + start on $1; false if the server did not start (its log in $state/server.log).
start_on() {
    local port="$1"
    rm -rf "$state"
    mkdir -p "$state"
    chmod 755 "$state"
    echo "$port" >"$state/port"
    if [ "$(id -u)" -eq 0 ]; then chown postgres:postgres "$state"; fi
    as_server_user "$bin/initdb" -D "$data" -U postgres -A trust -E UTF8 --no-locale --no-sync >"$state/initdb.log" 2>&1 || {
        echo "postgres.sh: initdb failed; its log:" >&2; cat "$state/initdb.log" >&2; exit 1
    }
    # Loopback TCP only; the socket directory is the cluster's own, so it never clashes with a
    # system cluster. Enough connections for the pools of several test instances at once.
    as_server_user "$bin/pg_ctl" -D "$data" -l "$state/server.log" -w -t 60 \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $data -c max_connections=200" start >/dev/null 2>&1
}

stop() {
    if [ -f "$data/postmaster.pid" ]; then
        as_server_user "$bin/pg_ctl" -D "$data" -m fast -w stop >/dev/null || true
    fi
    rm -rf "$state"
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    url) [ -f "$data/postmaster.pid" ] || { echo "postgres.sh: no cluster running in $state" >&2; exit 1; }; url ;;
    *) echo "usage: $0 start|stop|url" >&2; exit 2 ;;
esac
