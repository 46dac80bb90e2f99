#!/usr/bin/env bash
# Cross-builds the board binary `vta-board` for Zynq boards and checks the glibc it needs:
#   armv7-unknown-linux-gnueabihf  PYNQ-Z1/Z2 (Zynq-7000; PYNQ v2.x images have glibc 2.27-2.31)
#   aarch64-unknown-linux-gnu      Ultra96, ZCU104, KV260 (Zynq UltraScale+)
# Both link against glibc 2.27 through cargo-zigbuild (zig as the C toolchain, from PyPI's
# `ziglang`), so one file runs on PYNQ v2.x, PYNQ 3.x and Ubuntu 18.04+ board images.
# The board binary is `vta-board`, not `vta`: `vta` carries the Verilator simulator (a C++
# model compiled by vta-sim's build script) and the ONNX compiler, neither of which belongs
# on a board; `vta-board` links the runtime and the device HAL only.
#
# Installs what it needs (rustup targets; Debian's cross gcc, which brings the ARM sysroots
# qemu uses; qemu-user; ziglang and cargo-zigbuild from PyPI). Outputs:
#   target/cross/vta-board-armv7   target/cross/vta-board-aarch64
# Usage: scripts/cross-build.sh [armv7|aarch64]...   (default: both)
set -euo pipefail
cd "$(dirname "$0")/.."

TARGETS=("$@")
[ ${#TARGETS[@]} -eq 0 ] && TARGETS=(armv7 aarch64)
GLIBC=2.27

triple() {
  case "$1" in
    armv7) echo armv7-unknown-linux-gnueabihf ;;
    aarch64) echo aarch64-unknown-linux-gnu ;;
    *) echo "unknown target '$1' (armv7 or aarch64)" >&2; exit 2 ;;
  esac
}
cross_prefix() {
  case "$1" in
    armv7) echo arm-linux-gnueabihf ;;
    aarch64) echo aarch64-linux-gnu ;;
  esac
}

need_apt=()
for t in "${TARGETS[@]}"; do
  p=$(cross_prefix "$t")
  command -v "$p-gcc" >/dev/null || need_apt+=("gcc-$p")
done
command -v qemu-arm >/dev/null || need_apt+=(qemu-user)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "installing ${need_apt[*]} (apt)" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${need_apt[@]}" >&2
fi
for t in "${TARGETS[@]}"; do
  rustup target list --installed | grep -qx "$(triple "$t")" || rustup target add "$(triple "$t")" >&2
done
if ! command -v cargo-zigbuild >/dev/null || ! python3 -c 'import ziglang' 2>/dev/null; then
  echo "installing ziglang and cargo-zigbuild (pip)" >&2
  python3 -m pip install -q ziglang cargo-zigbuild >&2
fi

mkdir -p target/cross
for t in "${TARGETS[@]}"; do
  tr=$(triple "$t")
  echo "building vta-board for $tr (glibc $GLIBC)" >&2
  cargo zigbuild --release --locked -p vta-board --target "$tr.$GLIBC" >&2
  out=target/cross/vta-board-$t
  # Stripped: the release profile keeps line tables, 15 MB of them on armv7.
  "$(cross_prefix "$t")-strip" -o "$out" "target/$tr/release/vta-board"
  # The newest glibc symbol version the binary needs: must be <= $GLIBC.
  max=$("$(cross_prefix "$t")-objdump" -T "$out" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
  echo "$out: $(stat -c %s "$out") bytes, needs $max" >&2
  if [ "$(printf '%s\n%s\n' "${max#GLIBC_}" "$GLIBC" | sort -V | tail -1)" != "$GLIBC" ]; then
    echo "error: $out needs $max, newer than glibc $GLIBC" >&2
    exit 1
  fi
done
