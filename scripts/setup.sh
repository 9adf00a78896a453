#!/usr/bin/env bash
# Installs what building and testing leasehold needs on a fresh machine.
# Idempotent: every step checks first and skips what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[setup] %s\n' "$*"; }

# The wasm-bindgen CLI must match the crate version pinned in bindings-wasm/Cargo.toml.
WB_VERSION=$(sed -n 's/^wasm-bindgen = { version = "=\([0-9.]*\)".*/\1/p; s/^wasm-bindgen = "=\([0-9.]*\)"/\1/p' bindings-wasm/Cargo.toml | head -n1)

apt_packages=()
command -v redis-server >/dev/null || apt_packages+=(redis-server)
compgen -G "/usr/lib/postgresql/*/bin/postgres" >/dev/null || apt_packages+=(postgresql)
command -v chromium >/dev/null || apt_packages+=(chromium)
command -v chromedriver >/dev/null || apt_packages+=(chromium-driver)
command -v etcd >/dev/null || apt_packages+=(etcd-server)
# Failover tests: sentinels over a primary and its replicas, a transaction-mode pooler.
command -v redis-sentinel >/dev/null || apt_packages+=(redis-sentinel)
command -v pgbouncer >/dev/null || apt_packages+=(pgbouncer)
# The CLI test drives `leasehold inspect --watch` in a terminal of its own.
command -v tmux >/dev/null || apt_packages+=(tmux)
if [ ${#apt_packages[@]} -gt 0 ]; then
  log "apt-get install ${apt_packages[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=300 update -qq
  apt-get -o DPkg::Lock::Timeout=300 install -y -qq "${apt_packages[@]}" >/dev/null
fi

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  log "rustup target add wasm32-unknown-unknown"
  rustup target add wasm32-unknown-unknown
fi

if [ -n "$WB_VERSION" ] && ! wasm-bindgen --version 2>/dev/null | grep -qF " $WB_VERSION"; then
  log "cargo install wasm-bindgen-cli $WB_VERSION (takes a few minutes, once)"
  # No --locked: one of its locked dependency versions is not served by the registry here.
  cargo install wasm-bindgen-cli --version "$WB_VERSION" --quiet
fi

if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  log "npm ci"
  npm ci --no-audit --no-fund --loglevel=error
fi
log "ready"
