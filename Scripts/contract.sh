#!/usr/bin/env bash
# The API contract, checked from outside: schemathesis (PyPI) generates requests from the gateway's
# own /openapi.json against `iapgw-dev demo` on loopback, with every check, and fails on any finding
# (a schema-valid request refused as malformed, a schema-invalid one accepted, an answer outside its
# declared schema, a server error). Usage: Scripts/contract.sh [MAX_EXAMPLES] (default 50).
set -euo pipefail
cd "$(dirname "$0")/.."
examples="${1:-50}"
# Through the interpreter pip installed it for (no shim or PATH entry needed).
python3 -c 'import schemathesis' 2>/dev/null || { echo "contract: schemathesis is not installed (pip install schemathesis)"; exit 1; }
swift build --product iapgw-dev >/dev/null
dir="$(mktemp -d /tmp/iapgw-contract-XXXXXX)"
log="$dir/demo.log"
port=$((20000 + RANDOM % 5000))
.build/debug/iapgw-dev demo --port "$port" --sim-port "$((port + 1))" --dir "$dir/demo" >"$log" 2>&1 &
demo=$!
cleanup() { kill "$demo" 2>/dev/null || true; wait "$demo" 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
key=""
for _ in $(seq 1 300); do
    key=$(grep -o 'Bearer demo-[0-9a-f]*' "$log" | head -1 | cut -d' ' -f2 || true)
    [ -n "$key" ] && curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
    kill -0 "$demo" 2>/dev/null || { echo "contract: the demo did not start"; tail -20 "$log"; exit 1; }
    sleep 0.2
done
[ -n "$key" ] || { echo "contract: the demo printed no API key"; exit 1; }
python3 -m schemathesis.cli --config-file Scripts/schemathesis.toml run "http://127.0.0.1:$port/openapi.json" \
    -H "Authorization: Bearer $key" --checks all --max-examples "$examples" --continue-on-failure \
    --seed 20261201 >"$dir/report.txt" 2>&1 && status=0 || status=$?
sed -n '/SUMMARY/,$p' "$dir/report.txt"
if [ "$status" -ne 0 ]; then
    sed -n '/FAILURES/,/SUMMARY/p' "$dir/report.txt" | head -200
    echo "contract: schemathesis found the document and the server disagreeing"
fi
exit "$status"
