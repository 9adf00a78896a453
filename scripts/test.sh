#!/usr/bin/env bash
# The one test command (`npm test`, and what CI runs): installs what is missing, builds
# both engines in release mode, then runs every check and every test suite.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n=== %s\n' "$*"; }

step "setup"
bash scripts/setup.sh

step "format and lint"
cargo fmt --all --check
cargo clippy --workspace --all-targets --quiet -- -D warnings

step "core tests"
cargo test -p leasehold-core --quiet

step "build"
bash scripts/build.sh

step "type test"
npx tsc -p js-tests/types

step "JS suite on the native engine"
LEASEHOLD_ENGINE=native node --test --test-concurrency=2 js-tests/*.test.mjs

if [ -f lib/wasm-node.cjs ]; then
  step "JS suite on the wasm engine"
  LEASEHOLD_ENGINE=wasm node --test --test-concurrency=2 js-tests/*.test.mjs
fi
