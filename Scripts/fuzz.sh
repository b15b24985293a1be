#!/usr/bin/env bash
# Runs each libFuzzer target for N seconds (default 30):   Scripts/fuzz.sh [SECONDS] [TARGET...]
# Targets: FuzzJSON (strict JSON + mapping engine), FuzzJWS (JWS decoder + verifier), FuzzDER (BER/DER reader, receipt payload, old-style
# plist), FuzzConfig (XML and plist config loaders), FuzzNotification (the notification body decoder, V1 and V2, and
# request-path decoding). Crashes land in Fuzz/artifacts/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-30}"; shift || true
targets=("$@"); [ ${#targets[@]} -gt 0 ] || targets=(FuzzJWS FuzzDER FuzzConfig FuzzJSON FuzzNotification)
export IAPGW_FUZZ=1
build=(swift build --build-path .build/fuzz --sanitize=fuzzer -Xswiftc -sanitize=fuzzer,address -Xswiftc -use-ld=lld)
mkdir -p Fuzz/artifacts
for t in "${targets[@]}"; do
    "${build[@]}" --product "$t" >/dev/null
    corpus="Fuzz/corpus-$t"; mkdir -p "$corpus"
    seeds="Fuzz/$t/seeds"; [ -d "$seeds" ] || seeds=""
    echo "== $t for ${seconds}s"
    # detect_leaks=0: Foundation leaks the error objects it makes on parse errors (not ours).
    ASAN_OPTIONS=detect_leaks=0 SWIFT_BACKTRACE=enable=no ".build/fuzz/debug/$t" -max_total_time="$seconds" -rss_limit_mb=2048 \
        -artifact_prefix=Fuzz/artifacts/ "$corpus" $seeds 2>&1 | grep -E "^#[0-9]+ +DONE|ERROR|SUMMARY|Done" || true
    if ls Fuzz/artifacts/crash-* Fuzz/artifacts/leak-* >/dev/null 2>&1; then echo "$t: crash found"; exit 1; fi
done
echo "fuzz: all targets ran ${seconds}s without a crash"
