#!/usr/bin/env bash
# Builds the engines in release mode: this platform's native addon, stripped, into dist/
# (where a clone loads it from) and into its platform package npm/<triple>/ (what the
# pack test installs), then the wasm module (scripts/build-wasm.sh). `build.sh native`
# builds the addon only (what the demo needs). The other platforms' addons are built by
# scripts/build-platforms.sh, which `npm test` does not run.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p dist

cargo build --release -p leasehold-node --quiet
triple=$(node -e 'console.log(require("./lib/entries/native.cjs").platformTriple())')
addon="leasehold.$triple.node"
# Copy, strip, then rename: a process that has the old addon loaded keeps its file.
cp target/release/libleasehold_node.so "dist/$addon.tmp"
strip "dist/$addon.tmp"
mv -f "dist/$addon.tmp" "dist/$addon"
echo "[build] dist/$addon"
if [ -d "npm/$triple" ]; then
  cp "dist/$addon" "npm/$triple/$addon"
  cp LICENSE "npm/$triple/LICENSE"
  echo "[build] npm/$triple/$addon"
fi

if [ "${1:-all}" != native ] && [ -f scripts/build-wasm.sh ]; then
  bash scripts/build-wasm.sh --optional
fi
