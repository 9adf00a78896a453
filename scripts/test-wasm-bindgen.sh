#!/usr/bin/env bash
# Runs the wasm binding's own tests (bindings-wasm/tests, wasm-bindgen-test) twice: in
# Node, then in headless Chromium through chromedriver. Any missing tool is an error.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[test-wasm-bindgen] %s\n' "$*"; }
need() {
  command -v "$1" >/dev/null || { log "error: $1 is not installed -- run 'npm run setup' (scripts/setup.sh)" >&2; exit 1; }
}
need wasm-bindgen-test-runner
need node
CHROMEDRIVER=${CHROMEDRIVER:-$(command -v chromedriver || true)}
[ -n "$CHROMEDRIVER" ] || { log "error: chromedriver is not installed -- apt-get install chromium chromium-driver" >&2; exit 1; }
export CHROMEDRIVER

export CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner
run() { cargo test -p leasehold-wasm --target wasm32-unknown-unknown --tests "$@"; }

log "clippy on the wasm target (the tests compile only there)"
cargo clippy -p leasehold-wasm --target wasm32-unknown-unknown --all-targets --quiet -- -D warnings

log "Node"
run

log "headless Chromium ($CHROMEDRIVER)"
# The tests do not force an environment, so the runner picks the browser from this variable.
WASM_BINDGEN_USE_BROWSER=1 run
