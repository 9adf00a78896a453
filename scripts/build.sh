#!/usr/bin/env bash
# Builds the engines in release mode: the native addon into dist/, then the wasm module
# (scripts/build-wasm.sh). `build.sh native` builds the addon only (what the demo needs).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p dist

cargo build --release -p leasehold-node --quiet
addon=$(node -e 'console.log(require("./lib/native.cjs").addonFile())')
# Copy, then rename: a process that has the old addon loaded keeps its file.
cp target/release/libleasehold_node.so "dist/$addon.tmp"
mv -f "dist/$addon.tmp" "dist/$addon"
echo "[build] dist/$addon"

if [ "${1:-all}" != native ] && [ -f scripts/build-wasm.sh ]; then
  bash scripts/build-wasm.sh --optional
fi
