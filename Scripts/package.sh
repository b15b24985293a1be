#!/usr/bin/env bash
# Builds the Debian package iapgw_<version>_amd64.deb with dpkg-deb: the production binary only
# (release build, Swift's runtime linked in), the systemd unit, an example /etc/iapgw (no secrets),
# the mapping files and the docs. Prints the package's path.
#   Scripts/package.sh [OUTPUT_DIR]     (default .build/package)
#   IAPGW_VERSION=1.2.3 Scripts/package.sh
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-.build/package}"
version="${IAPGW_VERSION:-0.1.0~git$(git log -1 --format=%cd.%h --date=format:%Y%m%d 2>/dev/null || echo 0)}"
arch="$(dpkg --print-architecture)"

swift build -c release --product iapgw --static-swift-stdlib >&2
binary="$(swift build -c release --product iapgw --static-swift-stdlib --show-bin-path)/iapgw"

root="$(mktemp -d)"
chmod 0755 "$root"
trap 'rm -rf "$root"' EXIT
install -D -m 0755 "$binary" "$root/usr/bin/iapgw"
strip --strip-unneeded "$root/usr/bin/iapgw"
install -D -m 0644 Packaging/iapgw.service "$root/lib/systemd/system/iapgw.service"
install -d -m 0750 "$root/etc/iapgw" "$root/etc/iapgw/apps" "$root/etc/iapgw/trust"
install -m 0640 Packaging/etc/iapgw/gateway.xml Packaging/etc/iapgw/README.md "$root/etc/iapgw/"
install -m 0640 Config/trust/README.md "$root/etc/iapgw/trust/README.md"
install -d "$root/usr/share/iapgw"
cp -R Mappings "$root/usr/share/iapgw/mappings"
find "$root/usr/share/iapgw" -type d -exec chmod 0755 {} + -o -type f -exec chmod 0644 {} +
doc="$root/usr/share/doc/iapgw"
install -D -m 0644 README.md "$doc/README.md"
install -m 0644 Config/README.md "$doc/Config-README.md"
install -D -m 0644 Config/apps/com.example.demo.plist "$doc/examples/com.example.app.plist"
install -m 0644 Packaging/examples/low-port.conf Config/prometheus/iapgw-rules.yml Config/grafana/iapgw-dashboard.json \
    "$doc/examples/"

# Depends: the Debian package of each shared library the binary links (its ELF NEEDED entries).
depends=""
for lib in $(readelf -d "$binary" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
    path="$(ldd "$binary" | awk -v lib="$lib" '$1 == lib { print $3 } $1 ~ ("/" lib "$") { print $1 }')"
    [ -n "$path" ] || { echo "package.sh: $lib is not found on this machine" >&2; exit 1; }
    owner="$(dpkg -S "$path" 2>/dev/null || dpkg -S "$(realpath "$path")" 2>/dev/null || true)"
    [ -n "$owner" ] || { echo "package.sh: no Debian package owns $path" >&2; exit 1; }
    depends="$depends ${owner%%:*}"
done
depends="$(echo $depends | tr ' ' '\n' | sort -u | paste -sd, | sed 's/,/, /g')"

install -d "$root/DEBIAN"
install -m 0755 Packaging/debian/postinst Packaging/debian/prerm Packaging/debian/postrm "$root/DEBIAN/"
find "$root/etc" -type f | sed "s|^$root||" | sort > "$root/DEBIAN/conffiles"
cat > "$root/DEBIAN/control" <<CONTROL
Package: iapgw
Version: $version
Architecture: $arch
Maintainer: IAPGateway <iapgw@localhost>
Section: net
Priority: optional
Depends: adduser, $depends
Installed-Size: $(du -sk "$root" --exclude=DEBIAN | cut -f1)
Description: Apple In-App Purchase verification gateway
 Verifies legacy App Store receipts and App Store Server API signed transactions, keeps a durable
 ledger of who owns each purchase (SQLite, or PostgreSQL for several instances) and runs as the
 hardened systemd service iapgw.service.
CONTROL

mkdir -p "$out"
deb="$out/iapgw_${version}_${arch}.deb"
dpkg-deb --root-owner-group --build "$root" "$deb" >&2
echo "$deb"
