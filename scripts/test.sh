#!/usr/bin/env bash
# The one test command (`npm test`, and what CI runs): installs what is missing, builds
# both engines in release mode, then runs every check and every test suite.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n=== %s\n' "$*"; }
# On the test path a missing wasm toolchain is an error, never a skipped engine.
export LEASEHOLD_WASM_REQUIRED=1

step "setup"
bash scripts/setup.sh

step "format and lint"
cargo fmt --all --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
# Commit subjects stay within 72 characters (the body says the rest): every commit
# after 031477f, the last one before the rule was kept. Skipped without the history.
if git rev-parse -q --verify '031477f^{commit}' >/dev/null 2>&1; then
  long=$(git log --format='%s' 031477f..HEAD | awk 'length($0) > 72')
  if [ -n "$long" ]; then
    printf 'commit subjects over 72 characters:\n%s\n' "$long" >&2
    exit 1
  fi
fi

step "core tests"
cargo test -p leasehold-core --quiet

step "build"
bash scripts/build.sh

step "wasm binding tests (Node and headless Chromium)"
bash scripts/test-wasm-bindgen.sh

step "type test (nodenext, bundler) and the package's types (attw)"
npx tsc -p js-tests/types
npx tsc -p js-tests/types/tsconfig.bundler.json
npx attw --pack . --quiet --exclude-entrypoints ./leasehold.wasm --ignore-rules cjs-resolves-to-esm

step "JS suite on the native engine"
LEASEHOLD_ENGINE=native node --test --test-concurrency=2 js-tests/*.test.mjs

step "JS suite on the wasm engine"
LEASEHOLD_ENGINE=wasm node --test --test-concurrency=2 js-tests/*.test.mjs

step "runtime matrix on the packed package, installed outside the repo (Node 20/22/24, Bun, Deno, workerd, Chromium)"
node js-tests/matrix/run.mjs --pack
