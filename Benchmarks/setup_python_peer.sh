#!/usr/bin/env bash
# Installs Apple's official Python App Store Server Library (PyPI:
# app-store-server-library) as a *peer* to benchmark against. It is not part of
# the product. Idempotent: does nothing if the library is already importable.
#
# Result: a venv at <repo>/.build/python-peer, or, where python3-venv/ensurepip
# is missing (plain Debian without python3-venv), a pip --target directory at
# <repo>/.build/python-peer/site used through PYTHONPATH.
#
# Prints, as its last line on stdout, the command to run the peer benchmark
# with: either "<python>" or "env PYTHONPATH=<site> <python>".
# Usage: bash Benchmarks/setup_python_peer.sh [--version X.Y.Z]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PEER="$ROOT/.build/python-peer"
SITE="$PEER/site"
PKG="app-store-server-library"
if [[ "${1:-}" == "--version" && -n "${2:-}" ]]; then PKG="$PKG==$2"; fi
PY3="${PYTHON3:-python3}"

log() { echo "setup_python_peer: $*" >&2; }

importable() { # $1 = python, optional PYTHONPATH in $2
  if [[ -n "${2:-}" ]]; then
    PYTHONPATH="$2" "$1" -c 'import appstoreserverlibrary.signed_data_verifier, appstoreserverlibrary.receipt_utility' >/dev/null 2>&1
  else
    "$1" -c 'import appstoreserverlibrary.signed_data_verifier, appstoreserverlibrary.receipt_utility' >/dev/null 2>&1
  fi
}

# 1. Already installed in the venv?
if [[ -x "$PEER/bin/python" ]] && importable "$PEER/bin/python"; then
  log "already installed (venv)"; echo "$PEER/bin/python"; exit 0
fi
# 2. Already installed in the --target fallback?
if [[ -d "$SITE" ]] && importable "$PY3" "$SITE"; then
  log "already installed (--target)"; echo "env PYTHONPATH=$SITE $(command -v "$PY3")"; exit 0
fi

mkdir -p "$ROOT/.build"

# 3. Try a venv.
if [[ ! -x "$PEER/bin/python" ]]; then
  rm -rf "$PEER/bin" "$PEER/lib" "$PEER/pyvenv.cfg" "$PEER/include" 2>/dev/null || true
  if ! "$PY3" -m venv "$PEER" >/dev/null 2>&1; then
    log "python3 -m venv failed (python3-venv missing?); using pip --target"
    rm -rf "$PEER/bin" "$PEER/lib" "$PEER/lib64" "$PEER/pyvenv.cfg" "$PEER/include" 2>/dev/null || true
  fi
fi
if [[ -x "$PEER/bin/python" ]] && "$PEER/bin/python" -m pip --version >/dev/null 2>&1; then
  log "installing $PKG into venv"
  "$PEER/bin/python" -m pip install -q --disable-pip-version-check "$PKG" >&2
  importable "$PEER/bin/python" || { log "install finished but library not importable"; exit 1; }
  echo "$PEER/bin/python"; exit 0
fi

# 4. Fallback: pip --target (Debian 12's system pip is "externally managed",
#    so --break-system-packages is needed there; it only writes into $SITE).
log "installing $PKG into $SITE (pip --target)"
mkdir -p "$SITE"
PIPFLAGS=(-q --disable-pip-version-check --target "$SITE" --upgrade)
if ! "$PY3" -m pip install "${PIPFLAGS[@]}" "$PKG" >&2 2>/dev/null; then
  "$PY3" -m pip install "${PIPFLAGS[@]}" --break-system-packages "$PKG" >&2
fi
importable "$PY3" "$SITE" || { log "install finished but library not importable"; exit 1; }
echo "env PYTHONPATH=$SITE $(command -v "$PY3")"
