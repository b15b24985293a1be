# Shared helpers for the benchmark scripts (sourced, not run).

# A TCP port on loopback nobody listens on now (bound by the kernel, then released).
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
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
