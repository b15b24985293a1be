#!/usr/bin/env bash
# The README's run command (until the gateway service lands): builds iapgw and runs its checks on
# this repository's configuration and on Apple's real signed vectors from ../shared/testdata/apple-real.
set -euo pipefail
cd "$(dirname "$0")/.."
swift build -c release --product iapgw >/dev/null
iapgw=.build/release/iapgw
vectors="${IAPGW_APPLE_REAL:-../shared/testdata/apple-real}"

echo "== iapgw config check Config"
"$iapgw" config check Config
echo
echo "== iapgw mappings check Mappings"
"$iapgw" mappings check Mappings
echo
echo "== iapgw jws verify: Apple's real sandbox transaction"
"$iapgw" jws verify --kind transaction --root "$vectors/AppleRootCA-G3.cer" \
    --bundle-id com.goodheartapp --environment Sandbox < "$vectors/sandbox-consumable-transaction.jws"
echo
echo "== iapgw jws verify: Apple's real production notification, wrong bundle (refused, exit 1)"
"$iapgw" jws verify --kind notification --root "$vectors/AppleRootCA-G3.cer" \
    --bundle-id com.example.other --environment Production < "$vectors/production-test-notification.jws" || echo "(exit $?)"
echo
echo "== iapgw receipt inspect --verify: Apple's real production receipt (first lines)"
"$iapgw" receipt inspect --verify --root "$vectors/AppleIncRootCertificate.cer" \
    < "$vectors/receipt-production.b64" | head -c 600; echo " ..."
