#!/usr/bin/env bash
# Builds the engines in release mode: the native addon into dist/, then the wasm module
# (scripts/build-wasm.sh). `build.sh native` builds the addon only (what the demo needs).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p dist

cargo build --release -p leasehold-node --quiet
addon=$(node -e 'console.log(require("./lib/native.cjs").addonFile())')
cp target/release/libleasehold_node.so "dist/$addon"
echo "[build] dist/$addon"

if [ "${1:-all}" != native ] && [ -f scripts/build-wasm.sh ]; then
  bash scripts/build-wasm.sh
fi
