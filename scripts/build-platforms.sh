#!/usr/bin/env bash
# Builds the native addon of every platform package in npm/ that this machine can
# cross-build, stripped, into npm/<triple>/leasehold.<triple>.node:
#
#   npm run build:platforms                    every platform below
#   bash scripts/build-platforms.sh linux-arm64-gnu   just the ones named
#
# Not part of `npm test`, which builds and tests this machine's addon only
# (scripts/build.sh): the cross builds take minutes and nothing here can run their output.
# Installs what they need first, once: Debian's cross compilers and the Rust targets.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[build-platforms] %s\n' "$*"; }

# triple, Rust target, linker, strip, Debian packages that bring the linker.
PLATFORMS=(
  "linux-x64-gnu   x86_64-unknown-linux-gnu   cc                    strip                   binutils"
  "linux-x64-musl  x86_64-unknown-linux-musl  musl-gcc              strip                   musl-tools"
  "linux-arm64-gnu aarch64-unknown-linux-gnu  aarch64-linux-gnu-gcc aarch64-linux-gnu-strip gcc-aarch64-linux-gnu"
)

wanted=("$@")
selected=()
for row in "${PLATFORMS[@]}"; do
  read -r triple _ <<<"$row"
  if [ ${#wanted[@]} -eq 0 ] || printf '%s\n' "${wanted[@]}" | grep -qx "$triple"; then selected+=("$row"); fi
done
if [ ${#selected[@]} -eq 0 ]; then
  log "no such platform: $*; known: $(for row in "${PLATFORMS[@]}"; do read -r t _ <<<"$row"; printf '%s ' "$t"; done)"
  exit 2
fi

# What the selected builds need, installed once.
apt_packages=()
targets=()
for row in "${selected[@]}"; do
  read -r _ target linker _ package <<<"$row"
  command -v "$linker" >/dev/null || apt_packages+=("$package")
  rustup target list --installed | grep -qx "$target" || targets+=("$target")
done
if [ ${#apt_packages[@]} -gt 0 ]; then
  log "apt-get install ${apt_packages[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=300 install -y -qq "${apt_packages[@]}" >/dev/null ||
    { apt-get -o DPkg::Lock::Timeout=300 update -qq && apt-get -o DPkg::Lock::Timeout=300 install -y -qq "${apt_packages[@]}" >/dev/null; }
fi
if [ ${#targets[@]} -gt 0 ]; then
  log "rustup target add ${targets[*]}"
  rustup target add "${targets[@]}"
fi

host=$(node -e 'console.log(require("./lib/native.cjs").platformTriple())')
for row in "${selected[@]}"; do
  read -r triple target linker strip _ <<<"$row"
  out="npm/$triple/leasehold.$triple.node"
  if [ "$triple" = "$host" ]; then
    # This machine's own addon: the one scripts/build.sh builds and tests.
    bash scripts/build.sh native >/dev/null
  else
    log "$triple: cargo build --target $target"
    env_name=$(echo "$target" | tr 'a-z-' 'A-Z_')
    rustflags=""
    case "$target" in
      *-musl)
        # A musl cdylib links musl's libc dynamically, as the Node that loads it does, and
        # unwinds through libgcc_s (musl systems install it with Node). musl-gcc searches
        # only musl's own folder, so the link is shown the host's libgcc_s: the soname and
        # the unwinder ABI are the same.
        mkdir -p target/musl-libgcc
        ln -sf "$(gcc -print-file-name=libgcc_s.so.1)" target/musl-libgcc/libgcc_s.so
        rustflags="-C target-feature=-crt-static -L native=$PWD/target/musl-libgcc"
        ;;
    esac
    env "CARGO_TARGET_${env_name}_LINKER=$linker" "CARGO_TARGET_${env_name}_RUSTFLAGS=$rustflags" \
      cargo build --release -p leasehold-node --target "$target" --quiet
    cp "target/$target/release/libleasehold_node.so" "$out.tmp"
    "$strip" "$out.tmp"
    mv -f "$out.tmp" "$out"
  fi
  log "$out: $(stat -c %s "$out") bytes"
done
