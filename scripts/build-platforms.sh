#!/usr/bin/env bash
# Builds the native addon of every platform package in npm/ that this machine can
# cross-build into npm/<triple>/leasehold.<triple>.node:
#
#   npm run build:platforms                             every platform below
#   bash scripts/build-platforms.sh linux-arm64-gnu     just the ones named
#
# Then runs what can run here: the arm64 addon under qemu (js-tests/matrix/emulated.mjs).
# Not part of `npm test`, which builds and tests this machine's addon only
# (scripts/build.sh): the cross builds take minutes, and add a toolchain per platform.
# Installs what they need first, once: Debian's cross compilers and qemu, the Rust
# targets, and for macOS zig with cargo-zigbuild (PyPI, in .cache/zigbuild).
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[build-platforms] %s\n' "$*"; }
apt_install() {
  log "apt-get install $*"
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=300 install -y -qq "$@" >/dev/null ||
    { apt-get -o DPkg::Lock::Timeout=300 update -qq && apt-get -o DPkg::Lock::Timeout=300 install -y -qq "$@" >/dev/null; }
}

# triple, Rust target, linker ("zig": cargo-zigbuild), strip tool ("-": none), Debian package.
PLATFORMS=(
  "linux-x64-gnu   x86_64-unknown-linux-gnu   cc                    strip                   binutils"
  "linux-x64-musl  x86_64-unknown-linux-musl  musl-gcc              strip                   musl-tools"
  "linux-arm64-gnu aarch64-unknown-linux-gnu  aarch64-linux-gnu-gcc aarch64-linux-gnu-strip gcc-aarch64-linux-gnu"
  "darwin-arm64    aarch64-apple-darwin       zig                   -                       -"
  "darwin-x64      x86_64-apple-darwin        zig                   -                       -"
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
zig=no
for row in "${selected[@]}"; do
  read -r _ target linker _ package <<<"$row"
  if [ "$linker" = zig ]; then
    zig=yes
  elif ! command -v "$linker" >/dev/null; then
    apt_packages+=("$package")
  fi
  rustup target list --installed | grep -qx "$target" || targets+=("$target")
done
if [ ${#apt_packages[@]} -gt 0 ]; then apt_install "${apt_packages[@]}"; fi
if [ ${#targets[@]} -gt 0 ]; then
  log "rustup target add ${targets[*]}"
  rustup target add "${targets[@]}"
fi
if [ "$zig" = yes ] && [ ! -x .cache/zigbuild/bin/cargo-zigbuild ]; then
  log "pip install ziglang cargo-zigbuild (into .cache/zigbuild)"
  python3 -m venv .cache/zigbuild
  .cache/zigbuild/bin/pip install --quiet ziglang cargo-zigbuild
fi

host=$(node -e 'console.log(require("./lib/entries/native.cjs").platformTriple())')
for row in "${selected[@]}"; do
  read -r triple target linker strip _ <<<"$row"
  out="npm/$triple/leasehold.$triple.node"
  if [ "$triple" = "$host" ]; then
    # This machine's own addon: the one scripts/build.sh builds and tests.
    bash scripts/build.sh native >/dev/null
    log "$out: $(stat -c %s "$out") bytes"
    continue
  fi
  log "$triple: building for $target"
  env_name=$(echo "$target" | tr 'a-z-' 'A-Z_')
  rustflags=""
  artifact="target/$target/release/libleasehold_node.so"
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
    *-apple-darwin)
      # zig's linker signs the dylib (arm64 macOS loads signed code only); stripping it
      # afterwards would break the signature, so it ships with its symbol table.
      rustflags="-C link-arg=-Wl,-install_name,@rpath/leasehold.$triple.node"
      artifact="target/$target/release/libleasehold_node.dylib"
      ;;
  esac
  if [ "$linker" = zig ]; then
    # The oldest macOS that Node 20 runs on: zig would otherwise mark the addon for its own.
    case "$target" in aarch64-*) macos=11.0 ;; *) macos=10.15 ;; esac
    env "PATH=$PWD/.cache/zigbuild/bin:$PATH" "CARGO_TARGET_${env_name}_RUSTFLAGS=$rustflags" MACOSX_DEPLOYMENT_TARGET=$macos \
      cargo zigbuild --release -p leasehold-node --target "$target" --quiet 2> >(grep -v -e xcrun -e 'SDK is needed' -e 'DEVELOPER_DIR' -e '^ *|$' -e '^ *= ' -e 'generated 1 warning' -e '^[[:space:]]*$' >&2)
  else
    env "CARGO_TARGET_${env_name}_LINKER=$linker" "CARGO_TARGET_${env_name}_RUSTFLAGS=$rustflags" \
      cargo build --release -p leasehold-node --target "$target" --quiet
  fi
  cp "$artifact" "$out.tmp"
  [ "$strip" = - ] || "$strip" "$out.tmp"
  mv -f "$out.tmp" "$out"
  cp LICENSE "npm/$triple/LICENSE"
  log "$out: $(stat -c %s "$out") bytes"
done

# Run what can run here: the arm64 addon, packed and installed, on an arm64 Node under
# qemu (js-tests/matrix/emulated.mjs). The others are checked by their file format.
file npm/*/leasehold.*.node | sed 's/BuildID\[[^]]*\]=[0-9a-f]*, //'
if printf '%s\n' "${selected[@]}" | grep -q '^linux-arm64-gnu '; then
  need=()
  command -v qemu-aarch64 >/dev/null || need+=(qemu-user)
  [ -e /usr/aarch64-linux-gnu/lib/libstdc++.so.6 ] || need+=(libstdc++6-arm64-cross)
  if [ ${#need[@]} -gt 0 ]; then apt_install "${need[@]}"; fi
  node js-tests/matrix/emulated.mjs
fi
