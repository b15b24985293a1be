#!/usr/bin/env bash
# The Debian package as an operator meets it, on this machine (root; .ci/run calls it after the tests):
# builds it (Scripts/package.sh), checks the unit with systemd-analyze verify, installs it with
# apt-get, runs `iapgw config check /etc/iapgw` as the iapgw user, runs the unit's ExecStart line as
# that user with the example config plus a test app (throwaway root, keys and secrets made here) and
# waits for /readyz, stops it with SIGTERM (exit 0), backs up and restores as that user, then `dpkg -r` and
# checks the ledger is still there. Under a running systemd it also starts the hardened unit itself.
# Everything it installed is purged at the end; it refuses a machine where iapgw is installed already.
set -euo pipefail
cd "$(dirname "$0")/.."

skip() { echo "package-test: SKIPPED: $*"; exit 0; }
[ "$(id -u)" = 0 ] || skip "needs root (apt-get install, a system user)"
for tool in dpkg-deb apt-get systemd-analyze runuser setpriv curl openssl sqlite3; do
    command -v "$tool" >/dev/null || skip "$tool is not installed"
done
if dpkg -s iapgw >/dev/null 2>&1 || [ -e /var/lib/iapgw ] || [ -e /etc/iapgw ]; then
    echo "package-test: iapgw is (or was) installed on this machine: not touching it" >&2
    exit 1
fi

work="$(mktemp -d)"
gateway_pid=""
cleanup() {
    [ -n "$gateway_pid" ] && kill "$gateway_pid" 2>/dev/null || true
    [ -d /run/systemd/system ] && systemctl stop iapgw.service 2>/dev/null || true
    dpkg --purge iapgw >/dev/null 2>&1 || true
    rm -rf /etc/iapgw /var/lib/iapgw "$work"
    getent passwd iapgw >/dev/null && deluser --system iapgw >/dev/null 2>&1 || true
}
trap cleanup EXIT
fail() { echo "package-test: FAILED: $*" >&2; [ -f "$work/serve.log" ] && tail -20 "$work/serve.log" >&2; exit 1; }
step() { echo "package-test: $*"; }

deb="$(Scripts/package.sh "$work/out")"
step "built $(basename "$deb") ($(du -h "$deb" | cut -f1))"

export DEBIAN_FRONTEND=noninteractive
apt-get install -y -qq "$(realpath "$deb")" >"$work/apt.log" 2>&1 || { cat "$work/apt.log" >&2; fail "apt-get install"; }
step "installed with apt-get"
unit=/lib/systemd/system/iapgw.service
systemd-analyze verify "$unit" || fail "systemd-analyze verify $unit"
step "systemd-analyze verify: clean"
# The hardening, scored by systemd itself (0 best, 10 worst): at most 2.5 ("OK"; the unit scores 1.7).
systemd-analyze security --offline=true --threshold=25 "$unit" >"$work/security.log" 2>&1 \
    || { tail -5 "$work/security.log" >&2; fail "systemd-analyze security: exposure above 2.5"; }
step "$(grep -o 'Overall exposure level.*' "$work/security.log")"
for directive in "User=iapgw" "StateDirectory=iapgw" "Restart=on-failure" "KillSignal=SIGTERM" "NoNewPrivileges=yes" \
                 "ProtectSystem=strict" "ProtectHome=yes" "PrivateTmp=yes" "CapabilityBoundingSet=" \
                 "ExecStartPre=/usr/bin/iapgw config check /etc/iapgw"; do
    grep -qx "$directive" "$unit" || fail "$unit lacks $directive"
done
[ "$(stat -c %U /var/lib/iapgw)" = iapgw ] || fail "/var/lib/iapgw is not the iapgw user's"
[ "$(stat -c %a /etc/iapgw)" = 750 ] || fail "/etc/iapgw is not 0750"

# A test app: a throwaway root to pin, a .p8 key, an API key and a shared secret (root:iapgw 0640).
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
sed -i "s|<listenPort type=\"integer\">8080</listenPort>|<listenPort type=\"integer\">$port</listenPort>|" /etc/iapgw/gateway.xml
install -d -m 0750 -g iapgw /etc/iapgw/secrets
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout /dev/null -out "$work/root.pem" \
    -days 30 -subj "/CN=package test root" 2>/dev/null
openssl x509 -in "$work/root.pem" -outform DER -out /etc/iapgw/trust/PackageTestRoot.cer
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out /etc/iapgw/secrets/AuthKey_PKGTEST01.p8 2>/dev/null
openssl rand -hex 16 | tr -d '\n' > /etc/iapgw/secrets/shared-secret
api_key="pkgtest-$(openssl rand -hex 16)"
printf %s "$api_key" > /etc/iapgw/secrets/api-key
sed -e 's|<string>com.example.demo</string>|<string>com.example.packagetest</string>|' \
    -e 's|AppleRootCA-G3.cer|PackageTestRoot.cer|; s|AppleIncRootCertificate.cer|PackageTestRoot.cer|' \
    -e 's|AuthKey_2X9R4HXF34.p8|AuthKey_PKGTEST01.p8|; s|<string>2X9R4HXF34</string>|<string>PKGTEST01</string>|' \
    /usr/share/doc/iapgw/examples/com.example.app.plist > "$work/app.plist"
python3 - "$work/app.plist" /etc/iapgw/apps/com.example.packagetest.plist <<'PY'
import re, sys
text = open(sys.argv[1]).read()
# The example names its secrets by environment variable; the test app reads files instead.
text = re.sub(r"<key>sharedSecret</key>\s*<dict>.*?</dict>\s*</dict>",
              "<key>sharedSecret</key><dict><key>file</key><string>../secrets/shared-secret</string></dict>", text, flags=re.S)
text = re.sub(r"<key>apiKey</key>\s*<dict>.*?</dict>",
              "<key>apiKey</key><dict><key>file</key><string>../secrets/api-key</string></dict>", text, flags=re.S)
open(sys.argv[2], "w").write(text)
PY
chgrp -R iapgw /etc/iapgw && chmod 0640 /etc/iapgw/secrets/* /etc/iapgw/apps/* /etc/iapgw/trust/*

runuser -u iapgw -- /usr/bin/iapgw config check /etc/iapgw >"$work/check.log" 2>&1 || { cat "$work/check.log" >&2; fail "config check as iapgw"; }
grep -q "^ok com.example.packagetest" "$work/check.log" || { cat "$work/check.log" >&2; fail "config check did not load the test app"; }
step "iapgw config check /etc/iapgw as the iapgw user: ok"

# The unit's own ExecStart line, in its WorkingDirectory, as its user.
exec_start="$(sed -n 's/^ExecStart=//p' "$unit")"
workdir="$(sed -n 's/^WorkingDirectory=//p' "$unit")"
( cd "$workdir" && exec setpriv --reuid=iapgw --regid=iapgw --init-groups -- $exec_start ) 2>"$work/serve.log" &
gateway_pid=$!
ready=""
for _ in $(seq 1 150); do
    ready="$(curl -s --max-time 2 "http://127.0.0.1:$port/readyz" || true)"
    [[ "$ready" == *'"ready"'* ]] && break
    kill -0 "$gateway_pid" 2>/dev/null || fail "iapgw serve exited"
    sleep 0.2
done
[[ "$ready" == *'"status":"ready"'* ]] || fail "/readyz answered: $ready"
step "ExecStart as iapgw serves /readyz: $ready"
nonce="$(curl -s --max-time 5 -H "Authorization: Bearer $api_key" -H 'Content-Type: application/json' \
    -d '{"account":"package-test"}' "http://127.0.0.1:$port/v1/apps/com.example.packagetest/nonces")"
[[ "$nonce" == *'"nonce"'* ]] || fail "POST nonces answered: $nonce"
kill -TERM "$gateway_pid"
status=0; wait "$gateway_pid" || status=$?
gateway_pid=""
[ "$status" = 0 ] || fail "iapgw serve exited $status after SIGTERM"
step "SIGTERM: clean exit"
[ "$(stat -c '%U %a' /var/lib/iapgw/iapgw.sqlite)" = "iapgw 600" ] || fail "the ledger is not iapgw's, mode 0600"
runuser -u iapgw -- /usr/bin/iapgw backup --config /etc/iapgw --to /var/lib/iapgw/backup.sqlite >"$work/backup.log" \
    || fail "iapgw backup as iapgw"
[ "$(sqlite3 -readonly /var/lib/iapgw/backup.sqlite 'SELECT count(*) FROM nonces')" = 1 ] || fail "the backup lacks the nonce"
step "iapgw backup as the iapgw user: $(head -c 120 "$work/backup.log")…"
runuser -u iapgw -- /usr/bin/iapgw restore --from /var/lib/iapgw/backup.sqlite --config /etc/iapgw >/dev/null \
    || fail "iapgw restore as iapgw"
[ "$(stat -c '%U %a' /var/lib/iapgw/iapgw.sqlite)" = "iapgw 600" ] || fail "the restored ledger is not iapgw's, mode 0600"
ls /var/lib/iapgw/iapgw.sqlite.replaced-* >/dev/null || fail "restore did not keep the replaced ledger"
step "iapgw restore as the iapgw user (the gateway stopped): ok"

if [ -d /run/systemd/system ]; then
    systemctl start iapgw.service || { journalctl -u iapgw --no-pager | tail -20; fail "systemctl start"; }
    for _ in $(seq 1 150); do
        ready="$(curl -s --max-time 2 "http://127.0.0.1:$port/readyz" || true)"
        [[ "$ready" == *'"status":"ready"'* ]] && break
        sleep 0.2
    done
    [[ "$ready" == *'"status":"ready"'* ]] || { journalctl -u iapgw --no-pager | tail -20; fail "the unit's /readyz: $ready"; }
    systemctl stop iapgw.service
    step "systemctl start iapgw (hardened unit) serves /readyz"
else
    step "no running systemd here: the unit itself was verified, not started"
fi

dpkg -r iapgw >/dev/null
[ ! -e /usr/bin/iapgw ] || fail "dpkg -r left /usr/bin/iapgw"
[ -s /var/lib/iapgw/iapgw.sqlite ] || fail "dpkg -r removed the ledger"
[ "$(sqlite3 -readonly /var/lib/iapgw/iapgw.sqlite 'SELECT count(*) FROM nonces')" = 1 ] || fail "the ledger lost its rows"
step "dpkg -r: binary gone, ledger kept"
echo "package-test: ok"
