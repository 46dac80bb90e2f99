#!/usr/bin/env bash
# Cross-builds the board build of the Python package (python/, cargo features without `full`:
# load and run compiled models on the board's accelerator and on the functional simulator; no
# compiler, no RTL simulator, no C++) into wheels for Zynq boards, and sets up the target's
# CPython and numpy that the qemu check (tests/board.rs, the ignored *_wheel_* tests) runs:
#   armv7    armv7-unknown-linux-gnueabihf  PYNQ-Z1/Z2 (Zynq-7000)
#   aarch64  aarch64-unknown-linux-gnu      Ultra96, ZCU104, KV260 (Zynq UltraScale+)
# The wheels are abi3 (CPython >= 3.9) and manylinux_2_27: maturin links them with zig
# against glibc 2.27, as scripts/cross-build.sh does the board binary, and the script checks
# the newest GLIBC_ symbol version the extension needs (readelf -V); so one wheel installs on
# PYNQ 3.x (Ubuntu 22.04, Python 3.10) and on any later image.
#
# The target Python comes from Debian's packages for that architecture (bookworm: CPython
# 3.11, numpy 1.24), fetched with apt-get download through a private apt state under the
# output directory (the system's apt configuration is not touched) and unpacked with dpkg -x
# into a sysroot that qemu-user runs from (`qemu-arm -L SYSROOT SYSROOT/usr/bin/python3.11`);
# pip is PyPI's pip wheel, run from the wheel file.
#
# Installs what it needs (rustup targets; qemu-user; maturin and ziglang from PyPI). Outputs:
#   target/cross/wheels/vta-*-manylinux_2_27_{armv7l,aarch64}.whl
#   target/cross/python-{armv7,aarch64}/sysroot    the target's CPython and numpy
#   target/cross/python-{armv7,aarch64}/pip.whl    pip, run as `python pip.whl/pip install`
# Usage: scripts/cross-wheel.sh [armv7|aarch64]...   (default: both)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

TARGETS=("$@")
[ ${#TARGETS[@]} -eq 0 ] && TARGETS=(armv7 aarch64)
GLIBC=2.27
PYVER=3.11

triple() {
  case "$1" in
    armv7) echo armv7-unknown-linux-gnueabihf ;;
    aarch64) echo aarch64-unknown-linux-gnu ;;
    *) echo "unknown target '$1' (armv7 or aarch64)" >&2; exit 2 ;;
  esac
}
debarch() {
  case "$1" in
    armv7) echo armhf ;;
    aarch64) echo arm64 ;;
  esac
}
wheel_arch() {
  case "$1" in
    armv7) echo armv7l ;;
    aarch64) echo aarch64 ;;
  esac
}
multiarch() {
  case "$1" in
    armv7) echo arm-linux-gnueabihf ;;
    aarch64) echo aarch64-linux-gnu ;;
  esac
}

for t in "${TARGETS[@]}"; do triple "$t" >/dev/null; done
if ! command -v qemu-arm >/dev/null; then
  echo "installing qemu-user (apt)" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q qemu-user >&2
fi
for t in "${TARGETS[@]}"; do
  rustup target list --installed | grep -qx "$(triple "$t")" || rustup target add "$(triple "$t")" >&2
done
if ! command -v maturin >/dev/null || ! python3 -c 'import ziglang' 2>/dev/null; then
  echo "installing maturin and ziglang (pip)" >&2
  python3 -m pip install -q "maturin>=1.5,<2" ziglang >&2
fi
work=$root/target/cross
mkdir -p "$work/wheels"

for t in "${TARGETS[@]}"; do
  tr=$(triple "$t")
  echo "building the board wheel for $tr (glibc $GLIBC)" >&2
  rm -f "$work"/wheels/vta-*_"$(wheel_arch "$t")".whl
  # --no-default-features: the board build (no `full`); pyproject.toml's extension-module
  # feature still applies.
  maturin build --release --strip --locked -m python/Cargo.toml --no-default-features \
    --target "$tr" --zig --compatibility "manylinux_${GLIBC//./_}" -o "$work/wheels" >&2

  whl=$(ls "$work"/wheels/vta-*_"$(wheel_arch "$t")".whl)
  so_dir=$(mktemp -d)
  python3 -m zipfile -e "$whl" "$so_dir"
  max=$(readelf -V -W "$so_dir"/vta/_native*.so | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
  rm -rf "$so_dir"
  echo "$whl: needs $max" >&2
  if [ "$(printf '%s\n%s\n' "${max#GLIBC_}" "$GLIBC" | sort -V | tail -1)" != "$GLIBC" ]; then
    echo "error: $whl needs $max, newer than glibc $GLIBC" >&2
    exit 1
  fi

  # The target's CPython and numpy (Debian's), once.
  py=$work/python-$t
  if [ ! -x "$py/sysroot/usr/bin/python$PYVER" ]; then
    arch=$(debarch "$t")
    echo "fetching CPython $PYVER and numpy for $arch (Debian packages)" >&2
    rm -rf "$py"
    mkdir -p "$py/apt/sources" "$py/apt/lists/partial" "$py/apt/cache" "$py/debs" "$py/sysroot"
    touch "$py/apt/status"
    cat > "$py/apt/sources/debian.sources" <<SRC
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
    apt=(-o "APT::Architecture=$arch" -o "APT::Architectures::=$arch"
      -o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$py/apt/sources"
      -o "Dir::State::Lists=$py/apt/lists" -o "Dir::State::status=$py/apt/status"
      -o "Dir::Cache=$py/apt/cache" -o Debug::NoLocking=1)
    apt-get "${apt[@]}" update -q >&2
    # The interpreter, its standard library and numpy, with the shared libraries they load.
    (cd "$py/debs" && apt-get "${apt[@]}" download -q \
      "python$PYVER-minimal" "libpython$PYVER-minimal" "libpython$PYVER-stdlib" python3-numpy \
      libc6 libgcc-s1 libstdc++6 zlib1g libexpat1 libffi8 libssl3 libbz2-1.0 liblzma5 \
      libcrypt1 libblas3 liblapack3 libgfortran5 >&2)
    for d in "$py"/debs/*.deb; do dpkg -x "$d" "$py/sysroot"; done
    # BLAS and LAPACK are chosen by update-alternatives, which dpkg -x does not run.
    lib=$py/sysroot/usr/lib/$(multiarch "$t")
    ln -sf blas/libblas.so.3 "$lib/libblas.so.3"
    ln -sf lapack/liblapack.so.3 "$lib/liblapack.so.3"
  fi
  if [ ! -f "$py/pip.whl" ]; then
    pip_dir=$(mktemp -d)
    python3 -m pip download -q --no-deps --only-binary=:all: -d "$pip_dir" pip >&2
    mv "$pip_dir"/pip-*.whl "$py/pip.whl"
    rm -rf "$pip_dir"
  fi
done
