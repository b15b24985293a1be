#!/usr/bin/env bash
# Runs each libFuzzer target for N seconds (default 30):   Scripts/fuzz.sh [SECONDS] [TARGET...]
# Fails (exit 1) when any target exits non-zero or leaves any artifact (crash, leak, timeout, oom,
# slow unit) in Fuzz/artifacts/<target>/, which is emptied first. Each input gets -timeout seconds
# ($IAPGW_FUZZ_TIMEOUT, default 10). What each target reads: README.md, Fuzzing.
#
# Seeds: Apple's real vectors, read from ../shared/testdata/apple-real (or $IAPGW_APPLE_REAL) at run
# time and shaped for each target into .build/fuzz/seeds/<target>/ (never copied into the repository),
# plus the repository's own inputs (Config/, Mappings/, Fuzz/<target>/seeds/). The working corpus
# Fuzz/corpus-<target>/ grows across runs and is not committed.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-30}"; shift || true
timeout="${IAPGW_FUZZ_TIMEOUT:-10}"
all=(FuzzJWS FuzzSignedJWS FuzzDER FuzzPKCS7 FuzzOCSP FuzzConfig FuzzJSON FuzzMappings FuzzNotification FuzzServerAPI
     FuzzRequest FuzzCompareInput FuzzHTTPResponse FuzzPaceBodies)
targets=("$@"); [ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")
real="${IAPGW_APPLE_REAL:-../shared/testdata/apple-real}"
[ -f "$real/AppleRootCA-G3.cer" ] || { echo "fuzz: Apple's real vectors not found in $real"; exit 1; }
export IAPGW_APPLE_REAL="$(cd "$real" && pwd)"
export IAPGW_FUZZ=1
build=(swift build --build-path .build/fuzz --sanitize=fuzzer -Xswiftc -sanitize=fuzzer,address -Xswiftc -use-ld=lld)

# base64url (no padding) to bytes.
b64url() { local s; s=$(tr -- '-_' '+/' <<<"$1"); while (( ${#s} % 4 )); do s+="="; done; base64 -d <<<"$s"; }
# The payload (JSON) of a compact JWS file.
payload() { local jws; jws=$(tr -d '\n' <"$real/$1"); jws=${jws#*.}; b64url "${jws%%.*}"; }
jws() { tr -d '\n' <"$real/$1"; }
receipt_b64() { tr -d '\n' <"$real/$1"; }
receipts=(receipt-production.b64 receipt-sandbox-g5.b64 receipt-sandbox-legacy.b64 receipt-xcode.b64
          receipt-xcode-with-purchases.b64)

# Writes target $1's seeds from the real vectors into directory $2.
seed() {
    local t="$1" dir="$2" r k
    case "$t" in
    FuzzJWS) cp "$real"/*.jws "$dir/" ;;
    FuzzDER) for r in "${receipts[@]}"; do base64 -d <"$real/$r" >"$dir/${r%.b64}.der"; done ;;
    FuzzPKCS7)
        # First byte even: verified as is against Apple's root; odd: its content signed again by a test PKI.
        # Not the 79 KB legacy receipt (FuzzDER has it): libFuzzer's max_len follows the largest seed,
        # and at ~6 KB mutations land in the signed attributes often enough to matter in a short run.
        for r in receipt-production.b64 receipt-sandbox-g5.b64 receipt-xcode.b64 receipt-xcode-with-purchases.b64; do
            { printf '\x00'; base64 -d <"$real/$r"; } >"$dir/${r%.b64}.as-is"
            { printf '\x01'; base64 -d <"$real/$r"; } >"$dir/${r%.b64}.re-signed"
        done ;;
    FuzzSignedJWS)
        # First byte: kind (0 transaction, 1 renewal, 2 notification, 3 app transaction) and, in bit 2,
        # which real app's policy verifies it (0 com.goodheartapp, 4 com.nineton.taller).
        { printf '\x00'; payload sandbox-consumable-transaction.jws; } >"$dir/transaction"
        { printf '\x06'; payload production-test-notification.jws; } >"$dir/notification"
        # A notification carrying the real transaction as its inner JWS (the target signs any object
        # under signedTransactionInfo), so the inner path and envelope agreement are reached at once.
        { printf '\x02{"notificationType":"ONE_TIME_CHARGE","notificationUUID":"2e2a6ce0-ec9f-4037-b1bf-618af85527bd",'
          printf '"data":{"bundleId":"com.goodheartapp","environment":"Sandbox","signedTransactionInfo":'
          payload sandbox-consumable-transaction.jws
          printf '},"version":"2.0","signedDate":1739161772561}'; } >"$dir/notification-with-transaction" ;;
    FuzzOCSP)
        # Structure-aware (see the target): an honest "good", a week-old one, one from the future (for
        # the intermediate), a revoked one, one signed by a stranger, and one with a flipped byte.
        printf '\x01\x00\x81\x00\x00' >"$dir/good"; printf '\x01\xa9\x00\x00\x00' >"$dir/stale"
        printf '\x03\xc8\x81\x00\x00' >"$dir/future"
        printf '\x01\x00\x81\x02\x00' >"$dir/revoked"; printf '\x01\x00\x81\x00\x03' >"$dir/stranger"
        printf '\x01\x00\x81\x00\x00\x00\x30\x01' >"$dir/patched" ;;
    FuzzConfig) find Config -name '*.xml' -o -name '*.plist' | while read -r f; do cp "$f" "$dir/"; done ;;
    FuzzJSON)
        payload sandbox-consumable-transaction.jws >"$dir/transaction.json"
        payload production-test-notification.jws >"$dir/notification.json" ;;
    FuzzMappings) cp Mappings/verifyReceipt/v1.json "$dir/verifyReceipt-v1.json"; cp Mappings/serverAPI/v1.json "$dir/serverAPI-v1.json" ;;
    FuzzNotification) printf '{"signedPayload":"%s"}' "$(jws production-test-notification.jws)" >"$dir/v2-real-test-notification.json" ;;
    FuzzServerAPI)
        # First byte: the route; then the status line's code, header lines, a blank line, the body.
        printf '\x00200\nContent-Type: application/json\n\n{"signedTransactionInfo":"%s"}' \
            "$(jws sandbox-consumable-transaction.jws)" >"$dir/transaction-info"
        printf '\x01200\n\n{"revision":"r1","hasMore":false,"bundleId":"com.goodheartapp","appAppleId":1,"environment":"Sandbox","signedTransactions":["%s"]}' \
            "$(jws sandbox-consumable-transaction.jws)" >"$dir/history"
        printf '\x02200\n\n{"environment":"Sandbox","bundleId":"com.goodheartapp","appAppleId":1,"data":[{"subscriptionGroupIdentifier":"g","lastTransactions":[{"status":1,"originalTransactionId":"2000000847061981","signedTransactionInfo":"%s"}]}]}' \
            "$(jws sandbox-consumable-transaction.jws)" >"$dir/statuses"
        printf '\x00429\nRetry-After: Wed, 21 Oct 2015 07:28:00 GMT\n\n{"errorCode":4290000,"errorMessage":"Rate limit exceeded."}' >"$dir/rate-limited"
        printf '\x00404\n\n{"errorCode":4040010,"errorMessage":"Transaction id not found."}' >"$dir/not-found" ;;
    FuzzRequest)
        # First byte: 0 a request body (the rest), 1 a query string (the rest).
        printf '\x00{"account":"alice","signedTransaction":"%s"}' "$(jws sandbox-consumable-transaction.jws)" >"$dir/signed"
        printf '\x00{"account":"alice","nonce":"n-1","receipt":"%s"}' "$(receipt_b64 receipt-production.b64)" >"$dir/receipt"
        printf '\x00{"account":"bob","transactionId":"2000000847061981"}' >"$dir/transaction-id"
        printf '\x01account=al%%C3%%AFce&since=2024-02-23T17%%3A27%%3A16Z&x=a+b&x=2' >"$dir/query" ;;
    FuzzCompareInput)
        # (the 79 KB legacy receipt left out: a backlog's lines, not one receipt's size, are fuzzed here)
        for r in receipt-production.b64 receipt-sandbox-g5.b64 receipt-xcode.b64; do k=${r%.b64}; printf '{"receipt":"%s","account":"%s"}\n' "$(receipt_b64 "$r")" "$k"; done \
            >"$dir/backlog.jsonl"
        # A batch state file over the same receipts (resume key, comparison id, outcome).
        k=$(printf '%s' "$(receipt_b64 receipt-production.b64)" | sha256sum | cut -d' ' -f1)
        printf '%s c-1 agreed\n%s c-2 disagreed price\n%s c-3 failed UPSTREAM_UNAVAILABLE\n' "$k" "$k" "$k" >"$dir/state" ;;
    FuzzHTTPResponse)
        # First byte: where the rest is cut. Two kept-alive responses, then one that closes.
        printf '\x2aHTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{"ok":true}HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n' >"$dir/pipelined"
        printf '\x07HTTP/1.1 204 No Content\r\n\r\nHTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok' >"$dir/no-content" ;;
    FuzzPaceBodies)
        # First byte: the line limit - 1 (at most 256, so a real JWS's first 120 characters). Request
        # bodies as verify-load.sh writes them, one a line; then bad lines.
        { printf '\xff'; for k in 1 2 3; do printf '{"account":"acct-%d","signedTransaction":"%s"}\n' "$k" "$(jws sandbox-consumable-transaction.jws | head -c 120)"; done; } >"$dir/pool"
        printf '\x04abcd\nefghi\n\nj\r\n' >"$dir/bad-lines" ;;
    *) echo "fuzz: unknown target $t"; exit 2 ;;
    esac
}

rm -rf Fuzz/artifacts
for t in "${targets[@]}"; do
    log=".build/fuzz/$t.log"; mkdir -p .build/fuzz
    "${build[@]}" --product "$t" >"$log" 2>&1 || { grep -E "error|Error" "$log" | head -20; echo "fuzz: $t does not build"; exit 1; }
    corpus="Fuzz/corpus-$t"; mkdir -p "$corpus"
    seeds=".build/fuzz/seeds/$t"; rm -rf "$seeds"; mkdir -p "$seeds"; seed "$t" "$seeds"
    [ -d "Fuzz/$t/seeds" ] && cp "Fuzz/$t/seeds/"* "$seeds/"
    artifacts="Fuzz/artifacts/$t"; mkdir -p "$artifacts"
    echo "== $t for ${seconds}s (timeout ${timeout}s per input)"
    # detect_leaks=0: Foundation leaks the error objects it makes on parse errors (not ours).
    set +e
    ASAN_OPTIONS=detect_leaks=0 SWIFT_BACKTRACE=enable=no ".build/fuzz/debug/$t" -max_total_time="$seconds" \
        -timeout="$timeout" -rss_limit_mb=2048 -artifact_prefix="$artifacts/" "$corpus" "$seeds" >"$log" 2>&1
    status=$?
    set -e
    grep -E "^#[0-9]+ +DONE|INITED|ERROR|SUMMARY|Done|Test unit written" "$log" || true
    found=$(find "$artifacts" -type f | head -5)
    if [ "$status" -ne 0 ] || [ -n "$found" ]; then
        echo "fuzz: $t FAILED (exit $status)${found:+, artifacts: $found}; full log in $log"
        tail -n 40 "$log"
        exit 1
    fi
done
echo "fuzz: ${#targets[@]} target(s) ran ${seconds}s each: no failure, no artifact"
