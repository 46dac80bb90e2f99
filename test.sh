#!/usr/bin/env bash
# Runs every test of the workspace. The hardware tests drive Verilator and yosys, and the
# bitstream tests run the generated Vivado scripts under tclsh with a stub, so this first
# installs the system tools they need (verilator, yosys, g++, clang++, tclsh) from Debian's packages when
# any is missing (as root, or through sudo). Extra arguments go to `cargo test`. Then it
# builds the Python package's wheel and runs its tests (VTA_PYTHON=0 skips that), and
# cross-builds the board binary and the board wheel of the Python package for armv7
# (PYNQ-Z1/Z2) and runs them under qemu-arm on the emulated board (VTA_CROSS=0 skips that). Before those it builds the user guide (docs/, an mdBook;
# mdbook is installed from crates.io when missing) and runs the commands of the README's quick start
# and user paths against the release build (VTA_DOCS=0 skips both; the guide's and the README's
# links are checked by `cargo test`, tests/docs_links.rs).
set -euo pipefail
cd "$(dirname "$0")"

missing=()
for tool in verilator yosys g++ clang++ tclsh; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "test.sh: installing ${missing[*]} (needed by the hardware tests)" >&2
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
        verilator yosys g++ clang make tcl >/dev/null
fi

cargo test --workspace "$@"

# The user guide builds, and every command the README shows in its quick start and user paths
# runs (scripts/check-readme-commands.sh: a release build of `vta`, then each command in a
# temporary directory; commands marked slow or needing a board are listed, not run).
if [ "${VTA_DOCS:-1}" = 1 ]; then
    export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
    if ! command -v mdbook >/dev/null 2>&1; then
        echo "test.sh: installing mdbook (builds the user guide in docs/)" >&2
        cargo install mdbook --version 0.5.4 --locked --no-default-features
    fi
    mdbook build docs
    scripts/check-readme-commands.sh
fi

# The Python package: the wheel built with maturin, installed into a fresh venv with no network
# for the install (numpy, pytest, onnx and onnxruntime are fetched into a wheelhouse first),
# and its pytest suite, which checks Python runs against `vta run` byte for byte on fsim and
# RTL (a few minutes; VTA_PYTHON=0 skips it).
if [ "${VTA_PYTHON:-1}" = 1 ]; then
    scripts/python-test.sh
fi

# A sharded design sweep on a real one-node Slurm cluster (munged, slurmctld, slurmd from
# Debian's packages, started and torn down by the script; about 30 s): 4 array tasks and a
# merge give the single machine's results byte for byte, and a failed task is named with its
# rerun command (VTA_SLURM=0 skips it).
if [ "${VTA_SLURM:-1}" = 1 ]; then
    scripts/slurm-check.sh
fi

# The open FPGA flow on the SoC: yosys, nextpnr-ecp5 and ecppack build vta_soc (1x4x4) for an
# ECP5-25F board to a bitstream with timing met (5 CPU-minutes, 15 on a busy machine; the tools come from PyPI into
# the user's tool cache on first use; VTA_OPENFLOW=0 skips it).
if [ "${VTA_OPENFLOW:-1}" = 1 ]; then
    cargo test --test cli_bitstream -- --ignored ulx3s_25f_soc
fi

# The board binary cross-built for armv7 and run under qemu-arm on the emulated board: it runs
# a model and serves the digits demo to `vta demo --backend remote://` (a few minutes: the
# script installs the rustup target, Debian's cross gcc and qemu-user, and zig from PyPI).
# Then the board build of the Python package: its armv7 wheel, installed by pip into Debian's
# armhf CPython under qemu-arm, runs the tiny CNN on the same emulated board from Python
# (scripts/cross-wheel.sh armv7; the aarch64 wheel's test runs after
# `scripts/cross-wheel.sh aarch64`).
if [ "${VTA_CROSS:-1}" = 1 ]; then
    scripts/cross-build.sh armv7
    scripts/cross-wheel.sh armv7
    cargo test --test board -- --ignored --skip aarch64
fi
