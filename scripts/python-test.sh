#!/usr/bin/env bash
# Builds the Python package (python/) into a wheel with maturin, installs it into a fresh venv
# with no network access for the install (pip --no-index from a local wheelhouse), and runs its
# pytest suite against the installed wheel. Used by ./test.sh (VTA_PYTHON=0 skips it there).
#
# Network is used only before the install, and only when the wheelhouse lacks something: pip
# fills target/python/wheelhouse with numpy, pytest, onnx and onnxruntime (the test suite's
# dependencies) and a build venv with maturin. Later runs are offline.
#
# The wheel is built with cargo's dev profile, so that it shares the artifacts `cargo test
# --workspace` built (a release wheel: `maturin build --release -m python/Cargo.toml`).
# VTA_RAY=1 also installs Ray (a large download, once) so that tests/test_ray.py runs: a
# sharded sweep on a two-node local Ray cluster, one node killed mid-task; without it that
# file is skipped. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
py=${PYTHON:-python3}
work=${CARGO_TARGET_DIR:-$root/target}/python
mkdir -p "$work"

t0=$(date +%s)
if [ ! -x "$work/build-venv/bin/maturin" ]; then
    "$py" -m venv "$work/build-venv"
    "$work/build-venv/bin/pip" install -q "maturin>=1.5,<2"
fi
deps=(numpy pytest onnx onnxruntime)
if ! ls "$work"/wheelhouse/onnxruntime-*.whl >/dev/null 2>&1; then
    "$work/build-venv/bin/pip" download -q -d "$work/wheelhouse" "${deps[@]}"
fi
if [ "${VTA_RAY:-0}" = 1 ]; then
    deps+=(ray)
    if ! ls "$work"/wheelhouse/ray-*.whl >/dev/null 2>&1; then
        "$work/build-venv/bin/pip" download -q -d "$work/wheelhouse" ray
    fi
fi

rm -rf "$work/dist"
"$work/build-venv/bin/maturin" build -m python/Cargo.toml --profile dev --strip -o "$work/dist" \
    --interpreter "$py"
t1=$(date +%s)

rm -rf "$work/test-venv"
"$py" -m venv "$work/test-venv"
# The install itself: no index, only the wheelhouse and the wheel just built.
"$work/test-venv/bin/pip" install -q --no-index --find-links "$work/wheelhouse" \
    --find-links "$work/dist" vta "${deps[@]}"
t2=$(date +%s)

# Run from outside python/ so that `import vta` is the installed package, not the sources.
cd "$work"
PATH="$work/test-venv/bin:$PATH" "$work/test-venv/bin/python" -m pytest -q \
    "$root/python/tests" "$@"
t3=$(date +%s)
echo "python: wheel built in $((t1 - t0)) s, installed in $((t2 - t1)) s, tests ran in $((t3 - t2)) s"
